"""`add_tokens` and `add_special_tokens` (LLaMA-Factory's keys): the tokens join the vocabulary in LLaMA-Factory's
order (so they get its ids and the rows its tokens: tests/golden/compare_rows.py gave identical rows on identity
with `{{name}}` added), the embeddings grow with LLaMA-Factory's noise_init rows, and LoRA trains those rows."""

from __future__ import annotations

import json

import pytest
import torch

from engine.config import load_config
from engine.models import load_tokenizer

DEMO = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "lora", "dataset": "demo_sft",
        "output_dir": "out", "template": "chatml"}


def test_tokens_join_the_vocabulary_in_llama_factorys_order():
    plain = load_tokenizer(load_config(None, DEMO).model)
    cfg = load_config(None, {**DEMO, "add_tokens": "{{name}}, {{author}}", "add_special_tokens": "<|x|>"})
    tokenizer = load_tokenizer(cfg.model)
    base = len(plain)
    assert tokenizer.convert_tokens_to_ids(["{{name}}", "{{author}}", "<|x|>"]) == [base, base + 1, base + 2]
    assert tokenizer.lf_added_tokens == 3 and tokenizer.added_tokens_decoder[base + 2].special
    assert not tokenizer.added_tokens_decoder[base].special
    text = "I am {{name}}, made by {{author}}<|x|>"
    assert tokenizer.encode(text, add_special_tokens=False) != plain.encode(text, add_special_tokens=False)
    assert base + 2 in tokenizer.encode(text, add_special_tokens=False)
    again = load_tokenizer(cfg.model)
    assert again.lf_added_tokens == 3 and len(again) == len(tokenizer)


def test_a_lora_run_trains_the_new_rows(tmp_path):
    from engine.cli import main
    from engine.models.loader import _noisy_mean_rows

    out = tmp_path / "run"
    assert main(["train", "examples/sft_lora_demo.yaml", f"output_dir={out}", "max_steps=2", "save_strategy=no",
                 "plot_loss=false", "add_special_tokens=<|x|>,<|y|>"]) == 0
    adapter = json.loads((out / "adapter_config.json").read_text())
    tokenizer = json.loads((out / "tokenizer.json").read_text())
    ids = {token["content"]: token["id"] for token in tokenizer["added_tokens"]}
    trained = {i for rows in adapter["trainable_token_indices"].values() for i in rows}
    assert {ids["<|x|>"], ids["<|y|>"]} <= trained

    torch.manual_seed(0)
    model = torch.nn.Module()
    embed, head = torch.nn.Embedding(10, 64), torch.nn.Linear(64, 10, bias=False)
    model.get_input_embeddings, model.get_output_embeddings = (lambda: embed), (lambda: head)
    model.config = type("C", (), {"tie_word_embeddings": False})()
    old_mean = embed.weight.data[:6].mean(dim=0)
    _noisy_mean_rows(model, 6)
    new = embed.weight.data[6:]
    assert (new - old_mean).std().item() == pytest.approx(1 / 8, rel=0.3)  # mean + noise of std 1/sqrt(64)
    assert torch.allclose(new.mean(dim=0), old_mean, atol=0.2)
