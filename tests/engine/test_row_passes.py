"""Padding-free batches through forward and backward a few whole rows at a time (``max_tokens_per_pass``): the same
loss and gradients as one pass, and where it applies."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
from safetensors.torch import load_file
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments

from engine.cli import main
from engine.config import load_config
from engine.data.collator import IGNORE, PaddingCollator
from engine.train.row_passes import CPU_DEFAULT, resolve_budget, row_groups, split_back_to_back
from engine.train.sft import LabelPositionsTrainer, build_trainer

REPO = Path(__file__).resolve().parents[2]
LENGTHS = ((11, 4), (5, 2), (17, 9), (8, 0))  # rows of 11, 5, 17 and 8 tokens (prompt lengths beside)


class _Tok:
    pad_token_id = 0
    eos_token_id = 1
    padding_side = "right"


def _batch() -> dict:
    torch.manual_seed(3)
    rows = []
    for length, prompt in LENGTHS:
        ids = torch.randint(3, 97, (length,)).tolist()
        rows.append({"input_ids": ids, "labels": [IGNORE] * prompt + ids[prompt:], "attention_mask": [1] * length})
    return PaddingCollator(_Tok(), padding_free=True)(rows)


def _model() -> LlamaForCausalLM:
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                        attn_implementation="sdpa"))


def test_rows_are_grouped_whole_within_the_budget():
    offsets = [0, 11, 16, 33, 41]
    assert row_groups(offsets, 20) == [(0, 2), (2, 3), (3, 4)]  # 16 tokens, then the 17-token row, then 8
    assert row_groups(offsets, 5) == [(0, 1), (1, 2), (2, 3), (3, 4)]  # a row longer than the budget goes alone
    assert row_groups(offsets, 41) == [(0, 4)]
    assert row_groups([0, 7], 3) == [(0, 1)]


def test_a_batch_splits_at_row_starts_and_keeps_each_rows_layout():
    batch = _batch()
    pieces = split_back_to_back(batch, 20)
    assert [p["input_ids"].shape[1] for p in pieces] == [16, 17, 8]
    for key in ("input_ids", "labels", "position_ids"):
        assert torch.equal(torch.cat([p[key] for p in pieces], dim=1), batch[key])
    assert [p["cu_seq_lens_q"].tolist() for p in pieces] == [[0, 11, 16], [0, 17], [0, 8]]
    assert all(torch.equal(p["cu_seq_lens_k"], p["cu_seq_lens_q"]) for p in pieces)
    assert [p["position_ids"][0, 0].item() for p in pieces] == [0, 0, 0]
    assert all(p["use_cache"] is False for p in pieces)
    # it stays one pass: the batch fits, no budget, or the batch holds more than rows back to back
    assert split_back_to_back(batch, 41) is None and split_back_to_back(batch, 0) is None
    assert split_back_to_back({**batch, "pixel_values": torch.zeros(1)}, 20) is None
    padded = PaddingCollator(_Tok())([{"input_ids": [5] * 30, "labels": [5] * 30, "attention_mask": [1] * 30}] * 2)
    assert split_back_to_back(padded, 20) is None


def _step(trainer, model, batch, budget):
    trainer.max_tokens_per_pass = budget
    model.zero_grad()
    items = torch.tensor(int((batch["labels"][:, 1:] != IGNORE).sum()))
    loss = trainer.training_step(model, batch, items)
    return loss, [p.grad.clone() for p in model.parameters()]


def test_the_passes_give_the_batchs_loss_and_gradients(tmp_path, monkeypatch):
    model = _model()
    trainer = LabelPositionsTrainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[],
                                                                        use_cpu=True))
    calls = []
    real = LabelPositionsTrainer.compute_loss
    monkeypatch.setattr(LabelPositionsTrainer, "compute_loss",
                        lambda self, m, inputs, **kw: calls.append(inputs["input_ids"].shape[1]) or real(self, m, inputs,
                                                                                                         **kw))
    batch = _batch()
    whole, expected = _step(trainer, model, batch, 0)
    assert calls == [41]
    split, got = _step(trainer, model, batch, 20)
    assert calls == [41, 16, 17, 8] and trainer.split_batches == 1 and trainer.split_passes == 3
    assert torch.allclose(split, whole, atol=1e-6)
    assert all(torch.allclose(a, b, atol=1e-6) for a, b in zip(got, expected))
    assert any(g.abs().sum() > 0 for g in got)
    # where the passes would not add up, the batch runs whole: label smoothing (a mean per call) and ASFT
    trainer.label_smoother = object()
    assert not trainer.passes_add_up()
    trainer.label_smoother = None
    trainer.token_weighting = SimpleNamespace(kind="asft")
    assert not trainer.passes_add_up()
    trainer.token_weighting = SimpleNamespace(kind="dft")
    assert trainer.passes_add_up()


DEMO = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "lora", "dataset": "demo_sft",
        "report_to": "none"}


def test_the_budget_is_2048_on_the_cpu_unless_set(tmp_path, caplog):
    assert resolve_budget(None, "cpu", True) == CPU_DEFAULT == 2048
    assert resolve_budget(None, "cuda", True) == 0 and resolve_budget(300, "cuda", True) == 300
    assert resolve_budget(300, "cpu", False) == 0  # padded batches: one pass
    bundle = SimpleNamespace(train=[], eval=None, media=None)
    with caplog.at_level(logging.INFO, logger="engine.train.row_passes"):
        trainer = build_trainer(load_config(None, {**DEMO, "output_dir": str(tmp_path)}), _model(), _Tok(), bundle, [])
    assert trainer.max_tokens_per_pass == 2048 and "at most 2048 tokens (max_tokens_per_pass" in caplog.text
    for value, want in ((0, 0), (300, 300)):
        cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": value})
        assert build_trainer(cfg, _model(), _Tok(), bundle, []).max_tokens_per_pass == want
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": 300, "padding_free": False})
    assert build_trainer(cfg, _model(), _Tok(), bundle, []).max_tokens_per_pass == 0
    with pytest.raises(Exception, match="max_tokens_per_pass"):
        load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": -1})


def _train(tmp_path: Path, capsys, budget: int) -> tuple[list[float], dict]:
    out = tmp_path / f"run{budget}"
    code = main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={out}", "max_steps=3",
                 "max_samples=24", "logging_steps=1", "save_strategy=no", "plot_loss=false", "cutoff_len=64",
                 "per_device_train_batch_size=4", "gradient_accumulation_steps=2", f"max_tokens_per_pass={budget}",
                 "overwrite_output_dir=true"])
    err = capsys.readouterr().err
    assert code == 0, err
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()]
    return [e["loss"] for e in events if e["event"] == "log"], load_file(out / "adapter_model.safetensors")


def test_a_training_run_in_passes_ends_where_one_pass_ends(tmp_path, capsys, caplog):
    whole, weights = _train(tmp_path, capsys, 0)
    with caplog.at_level(logging.INFO, logger="engine.train.row_passes"):
        split, split_weights = _train(tmp_path, capsys, 40)
    assert "batches ran forward and backward in" in caplog.text  # it did run in passes
    assert len(whole) == 3 and split == pytest.approx(whole, abs=1e-5)
    assert weights.keys() == split_weights.keys()
    # Adam scales float-order noise in near-zero gradients up to ~5e-6 here; a lost pass moves weights by ~lr (5e-3)
    assert all(torch.allclose(weights[k], split_weights[k], atol=1e-4) for k in weights)


def test_a_budget_set_where_it_cannot_apply_says_why(tmp_path, caplog):
    """max_tokens_per_pass set by hand where the passes would not add up (or batches are padded) runs one pass and
    the log says so and why; on a stage without row passes the config check refuses it."""
    bundle = SimpleNamespace(train=[], eval=None, media=None)
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": 300, "padding_free": False})
    with caplog.at_level(logging.INFO, logger="engine.train.row_passes"):
        assert build_trainer(cfg, _model(), _Tok(), bundle, []).max_tokens_per_pass == 0
    assert "max_tokens_per_pass=300 does not apply to this run (its batches are padded" in caplog.text
    caplog.clear()
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": 300, "label_smoothing_factor": 0.1})
    with caplog.at_level(logging.INFO, logger="engine.train.row_passes"):
        assert build_trainer(cfg, _model(), _Tok(), bundle, []).max_tokens_per_pass == 0
    assert "does not apply to this run (label smoothing takes a mean per pass)" in caplog.text
    caplog.clear()
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "label_smoothing_factor": 0.1})
    with caplog.at_level(logging.INFO, logger="engine.train.row_passes"):
        assert build_trainer(cfg, _model(), _Tok(), bundle, []).max_tokens_per_pass == 0
    assert "does not apply" not in caplog.text and "at most 2048" not in caplog.text  # the default: no claim, no noise
    with pytest.raises(Exception, match="max_tokens_per_pass.*stage: dpo"):
        load_config(None, {**DEMO, "output_dir": str(tmp_path), "max_tokens_per_pass": 300, "stage": "dpo",
                           "dataset": "demo_dpo"})


def test_total_flos_counts_tokens_as_llama_factorys_padded_batch():
    """transformers' 6 x tokens x parameters, the tokens of LLaMA-Factory's batch of the same rows: sft pads them
    to a multiple of 8, pt to the longest row (tests/engine/test_final_eval_lf.py checks a whole run's total_flos)."""
    from engine.train.row_passes import RowPassesMixin

    class Plain:
        def floating_point_ops(self, inputs):
            return 6 * inputs["input_ids"].numel() * 10

    class Counting(RowPassesMixin, Plain):
        model = SimpleNamespace(num_parameters=lambda exclude_embeddings: 10)

    trainer = Counting()
    back_to_back = {"input_ids": torch.zeros(1, 8, dtype=torch.long),
                    "cu_seq_lens_q": torch.tensor([0, 3, 8], dtype=torch.int32)}
    assert trainer.floating_point_ops(back_to_back) == 6 * 2 * 8 * 10  # rows 3 and 5 long: 2 x 8, not 8
    padded = {"input_ids": torch.zeros(2, 8, dtype=torch.long),
              "attention_mask": torch.tensor([[1] * 5 + [0] * 3, [1] * 3 + [0] * 5])}
    assert trainer.floating_point_ops(padded) == 6 * 2 * 8 * 10  # padded here as there
    trainer.flos_pad_multiple = 1  # pt
    assert trainer.floating_point_ops(back_to_back) == 6 * 2 * 5 * 10
    assert trainer.floating_point_ops(padded) == 6 * 2 * 5 * 10  # not the 8 it is padded to here
