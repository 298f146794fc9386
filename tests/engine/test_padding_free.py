"""Padding-free batches: rows back to back, attention within each row; the same loss and gradients as padding."""

from __future__ import annotations

import logging

import pytest
import torch
from tinymodels import graph_node_names
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments

from engine.config import load_config
from engine.data.collator import IGNORE, PaddingCollator
from engine.models.row_attention import ATTENTION_NAME, use_row_attention, why_not_padding_free
from engine.train.sft import LabelPositionsTrainer


class _Tok:
    pad_token_id = 0
    eos_token_id = 1
    padding_side = "right"


def _rows():
    torch.manual_seed(3)
    rows = []
    for length, prompt in ((11, 4), (5, 2), (17, 9), (8, 0)):
        ids = torch.randint(3, 97, (length,)).tolist()
        rows.append({"input_ids": ids, "labels": [IGNORE] * prompt + ids[prompt:], "attention_mask": [1] * length})
    return rows


def _model(kv_heads=4, attention="sdpa"):
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=kv_heads, max_position_embeddings=64,
                         attn_implementation=attention)
    return LlamaForCausalLM(config)


def test_the_collator_lays_rows_back_to_back():
    rows = _rows()
    batch = PaddingCollator(_Tok(), padding_free=True)(rows)
    assert batch["input_ids"].shape == (1, 41) and "attention_mask" not in batch
    assert batch["input_ids"][0].tolist() == sum((r["input_ids"] for r in rows), [])
    assert batch["position_ids"][0].tolist() == [*range(11), *range(5), *range(17), *range(8)]
    assert batch["cu_seq_lens_q"].tolist() == [0, 11, 16, 33, 41] == batch["cu_seq_lens_k"].tolist()
    labels = batch["labels"][0].tolist()
    # each row's first label is ignored (it would be the previous row's last target); the rest is the row's own
    assert [labels[i] for i in (0, 11, 16, 33)] == [IGNORE] * 4
    assert labels[1:11] == rows[0]["labels"][1:] and labels[34:] == rows[3]["labels"][1:]
    assert batch["use_cache"] is False
    # packed rows keep their own layout
    packed = [{**r, "position_ids": list(range(len(r["input_ids"])))} for r in rows]
    assert PaddingCollator(_Tok(), padding_free=True)(packed)["input_ids"].shape == (4, 24)


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_same_loss_and_gradients_as_the_padded_batch(tmp_path, kv_heads):
    rows = _rows()
    model = _model(kv_heads)
    trainer = LabelPositionsTrainer(model=model, args=TrainingArguments(output_dir=str(tmp_path), report_to=[],
                                                                        use_cpu=True))
    padded = PaddingCollator(_Tok())(rows)
    reference = trainer.compute_loss(model, padded)
    reference.backward()
    expected = [p.grad.clone() for p in model.parameters()]
    model_loss = model(**padded).loss  # the model's own loss on the padded batch
    model.zero_grad()
    assert use_row_attention(model) and model.config._attn_implementation == ATTENTION_NAME
    flat = PaddingCollator(_Tok(), padding_free=True)(rows)
    ours = trainer.compute_loss(model, flat)
    ours.backward()
    assert torch.allclose(ours, reference, atol=1e-6) and torch.allclose(ours, model_loss, atol=1e-6)
    for got, want in zip((p.grad for p in model.parameters()), expected):
        assert torch.allclose(got, want, atol=1e-6)
    # the model's own forward (evaluation takes it) gives the same loss, and padded batches still work
    assert torch.allclose(model(**flat).loss, model_loss, atol=1e-6)
    assert torch.allclose(model(**padded).loss, model_loss, atol=1e-6)
    # a row's tokens never see another row: changing row 0 leaves row 2's logits alone
    changed = [dict(rows[0], input_ids=[5] * 11), *rows[1:]]
    with torch.no_grad():
        a = model(**PaddingCollator(_Tok(), padding_free=True)(rows)).logits[0, 16:33]
        b = model(**PaddingCollator(_Tok(), padding_free=True)(changed)).logits[0, 16:33]
    assert torch.equal(a, b)


DEMO = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "lora", "dataset": "demo_sft",
        "output_dir": "out"}


def test_where_it_does_not_apply():
    model = _model()
    cfg = load_config(None, DEMO)
    assert why_not_padding_free(cfg, model) is None
    assert "packing" in why_not_padding_free(load_config(None, {**DEMO, "packing": True}), model)
    assert "NEFTune" in why_not_padding_free(load_config(None, {**DEMO, "neftune_noise_alpha": 5}), model)
    eager = _model(attention="eager")
    assert "eager" in why_not_padding_free(cfg, eager)
    assert not use_row_attention(eager)
    model.config.model_type = "gemma2"
    assert "gemma2" in why_not_padding_free(cfg, model)


def test_the_trainer_takes_it_and_drops_length_grouping(tmp_path, caplog):
    from types import SimpleNamespace

    from engine.train.sft import build_trainer

    bundle = SimpleNamespace(train=[], eval=None, media=None)
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "report_to": "none"})
    trainer = build_trainer(cfg, _model(), _Tok(), bundle, [])
    assert trainer.data_collator.padding_free and trainer.args.train_sampling_strategy != "group_by_length"
    # asked off: padded, grouped by length (the auto default where batches are padded)
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "report_to": "none", "padding_free": False})
    trainer = build_trainer(cfg, _model(), _Tok(), bundle, [])
    assert not trainer.data_collator.padding_free and trainer.args.train_sampling_strategy == "group_by_length"
    # an explicit group_by_length wins
    cfg = load_config(None, {**DEMO, "output_dir": str(tmp_path), "report_to": "none", "group_by_length": True})
    trainer = build_trainer(cfg, _model(), _Tok(), bundle, [])
    assert trainer.data_collator.padding_free and trainer.args.train_sampling_strategy == "group_by_length"
    # a model it does not apply to says why in the log
    eager = _model(attention="eager")
    with caplog.at_level(logging.INFO, logger="engine.train.sft"):
        trainer = build_trainer(load_config(None, {**DEMO, "output_dir": str(tmp_path), "report_to": "none"}), eager,
                                _Tok(), bundle, [])
    assert not trainer.data_collator.padding_free
    assert "padding_free does not apply: the model runs eager attention" in caplog.text


@pytest.mark.parametrize("path", ["node", "split"])
def test_rows_attention_gives_per_row_sdpa_values_and_gradients(path, monkeypatch):
    """Training on the CPU takes one node over all rows (RowsFlashAttention: each row's output written once into
    o_proj's input); elsewhere the tensors are split once, never sliced per row (a slice per row would give each
    row's gradient a zeroed copy of the whole tensor in the backward pass). Both equal each row's own sdpa, bit for
    bit, with q, k, v laid out as a Llama attention hands them over (transposed views)."""
    import types

    from engine.models import row_attention
    from engine.models.row_attention import rows_sdpa_attention

    if path == "split":
        monkeypatch.setattr(row_attention, "_takes_rows_node", lambda *args: False)
    torch.manual_seed(1)
    lengths = [5, 0, 7, 3]
    q, k, v = (torch.randn(1, sum(lengths), 2, 4).transpose(1, 2).requires_grad_() for _ in range(3))
    offsets = torch.tensor([0, 5, 5, 12, 15])
    module = types.SimpleNamespace(training=True, num_key_value_groups=1)
    out, _ = rows_sdpa_attention(module, q, k, v, None, scaling=0.5, cu_seq_lens_q=offsets, cu_seq_lens_k=offsets)
    nodes = graph_node_names(out)
    assert "SliceBackward0" not in nodes
    if path == "node":
        assert nodes[0] == "RowsFlashAttentionBackward" and "CatBackward0" not in nodes and out.is_contiguous()
    else:
        assert nodes.count("SplitWithSizesBackward0") == 3
    weights = torch.randn(out.shape)
    (out * weights).sum().backward()
    for start, end in ((0, 5), (5, 12), (12, 15)):  # each row alone, causal: the same values and gradients
        parts = [t.detach()[:, :, start:end].clone().requires_grad_() for t in (q, k, v)]
        alone = torch.nn.functional.scaled_dot_product_attention(*parts, scale=0.5, is_causal=True)
        assert torch.equal(out[0, start:end].transpose(0, 1), alone[0])
        (alone * weights[:, start:end].transpose(1, 2)).sum().backward()
        for full, part in zip((q, k, v), parts):
            assert torch.equal(full.grad[:, :, start:end], part.grad)
    with pytest.raises(ValueError, match="does not split"):
        rows_sdpa_attention(module, q, k, v, None, cu_seq_lens_q=torch.tensor([0, 5, 14]))


def _first_loss(folder) -> float:
    import json

    events = [json.loads(line) for line in (folder / "events.jsonl").read_text().splitlines() if line.strip()]
    return next(event["loss"] for event in events if event["event"] == "log")


def test_packed_rows_saved_in_tokenized_path_train_packed_when_the_config_no_longer_packs(tmp_path, caplog,
                                                                                          monkeypatch):
    """Row-by-row attention (padding-free) must not meet packed rows: it would attend across them. Such data trains
    as it trained when it was saved, with a warning; data saved unpacked under `packing: true` says so too."""
    from pathlib import Path

    from engine.cli import main

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    base = ["train", str(repo / "examples" / "sft_lora_demo.yaml"), "max_steps=1", "logging_steps=1",
            f"dataset_dir={repo / 'examples' / 'data'}"]
    saved = f"tokenized_path={tmp_path / 'packed'}"
    assert main([*base, "packing=true", saved, f"output_dir={tmp_path / 'a'}"]) == 0
    with caplog.at_level(logging.INFO):
        assert main([*base, "packing=false", saved, f"output_dir={tmp_path / 'b'}"]) == 0
    assert "holds packed rows: they train packed" in caplog.text
    assert "padding_free does not apply: `packing` lays rows out itself" in caplog.text
    assert _first_loss(tmp_path / "b") == _first_loss(tmp_path / "a")
    unpacked = f"tokenized_path={tmp_path / 'unpacked'}"
    assert main([*base, unpacked, f"output_dir={tmp_path / 'c'}"]) == 0
    caplog.clear()
    assert main([*base, "packing=true", unpacked, f"output_dir={tmp_path / 'd'}"]) == 0
    assert "was saved without it: its rows train unpacked" in caplog.text
    assert "padding_free does not apply" not in caplog.text  # unpacked rows: padding-free batches, as without packing
    assert _first_loss(tmp_path / "d") == _first_loss(tmp_path / "c")


def test_packed_saved_rows_refuse_what_packing_cannot_take():
    """Packed rows from a tokenized_path under `packing: false` meet the rules packing has."""
    from types import SimpleNamespace

    from datasets import Dataset

    from engine.config.loader import ConfigError
    from engine.train.sft import _keep_packed_rows_apart

    packed = Dataset.from_dict({"input_ids": [[1, 2, 3]], "labels": [[1, 2, 3]], "position_ids": [[0, 1, 0]]})
    bundle = SimpleNamespace(train=packed, eval=None)
    model = _model()
    cfg = load_config(None, DEMO)
    cfg.parallel.cp_size = 2
    with pytest.raises(ConfigError, match="`cp_size > 1` splits one sequence across ranks"):
        _keep_packed_rows_apart(cfg, model, bundle)
    cfg = load_config(None, {**DEMO, "max_tokens_per_batch": 512})
    with pytest.raises(ConfigError, match="`max_tokens_per_batch` works without packing"):
        _keep_packed_rows_apart(cfg, model, bundle)
    assert _keep_packed_rows_apart(load_config(None, DEMO), model, bundle) is True


def test_the_check_sees_packed_rows_saved_in_tokenized_path_before_anything_loads(tmp_path, capsys, monkeypatch):
    from pathlib import Path

    from datasets import Dataset, DatasetDict

    from engine.cli import main

    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    saved = tmp_path / "tok"
    rows = {"input_ids": [[1, 2, 3]], "labels": [[1, 2, 3]], "attention_mask": [[1, 1, 1]], "position_ids": [[0, 1, 0]]}
    DatasetDict({"train": Dataset.from_dict(rows)}).save_to_disk(saved)
    base = ["check", str(repo / "examples" / "sft_lora_demo.yaml"), f"tokenized_path={saved}", "packing=false",
            f"output_dir={tmp_path / 'out'}"]
    assert main([*base, "max_tokens_per_batch=512"]) != 0
    assert "holds packed rows, and `max_tokens_per_batch` works without packing" in capsys.readouterr().err
    assert main(base) == 0
    assert main([*base, "overwrite_cache=true", "max_tokens_per_batch=512"]) == 0  # tokenized again: not packed
