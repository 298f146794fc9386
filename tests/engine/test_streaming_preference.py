"""``streaming: true`` for rm, dpo and kto (LLaMA-Factory 0.9.5 trains all three so): the rows of the non-streaming
path in the stream's order, KTO's KL pairs formed within each streamed preprocessing batch (skipped rows' stand-ins
included), and TRL's trainers reading the stream itself."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import load_config
from engine.data import get_dataset

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
BASE = {"model_name_or_path": "demo", "template": "chatml", "finetuning_type": "lora", "dataset_dir": str(DATA),
        "cutoff_len": 256, "report_to": "none", "streaming": True, "max_steps": 4, "buffer_size": 8,
        "preprocessing_batch_size": 4}
DATASET = {"rm": "demo_dpo", "dpo": "demo_dpo", "kto": "demo_kto"}
OWN = {"rm": ("chosen_ids", "rejected_ids"), "dpo": ("prompt_ids", "chosen_ids", "rejected_ids"),
       "kto": ("prompt_ids", "completion_ids", "label")}


def _config(stage: str, tmp_path: Path, **extra):
    return load_config(None, {**BASE, "stage": stage, "dataset": DATASET[stage], "output_dir": str(tmp_path), **extra})


def _components(cfg):
    from engine.models.tokenizer_setup import load_text_components

    return load_text_components(cfg)


def _own(rows, stage):
    return [tuple(tuple(row[name]) if isinstance(row[name], list) else row[name] for name in OWN[stage])
            for row in rows]


@pytest.mark.parametrize("stage", ["rm", "dpo", "kto"])
def test_preference_rows_stream_as_they_tokenize_without_streaming(stage, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = _config(stage, tmp_path, val_size=3)
    tokenizer, template = _components(cfg)
    streamed = get_dataset(cfg, tokenizer, template)
    assert streamed.origin == "streamed" and not hasattr(streamed.train, "__len__")
    plain = get_dataset(_config(stage, tmp_path, streaming=False), tokenizer, template)
    trained, held = _own(streamed.train, stage), _own(streamed.eval, stage)
    assert len(held) == 3 and sorted(held + trained) == sorted(_own(plain.train, stage))
    assert trained != _own(plain.train, stage)[3:]  # in the stream's shuffled order


def _batches(rows, size):
    return [rows[i:i + size] for i in range(0, len(rows), size)]


def test_kto_pairs_each_row_with_the_reply_before_it_in_its_streamed_batch(tmp_path, monkeypatch):
    """LLaMA-Factory's map pairs the rows of each batch of the stream (after the held-out rows): row i takes the
    completion of row i-1, the first row the last's; so the pairs follow preprocessing_batch_size."""
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    for size in (4, 5):
        cfg = _config("kto", tmp_path, val_size=3, preprocessing_batch_size=size)
        bundle = get_dataset(cfg, *_components(cfg))
        rows = list(bundle.train)
        assert len(rows) == 27
        for batch in _batches(rows, size):
            for row, before in zip(batch, batch[-1:] + batch[:-1]):
                assert row["KL_prompt_ids"] == row["prompt_ids"] and row["KL_completion_ids"] == before["completion_ids"]
        held = [dict(zip(bundle.eval.column_names, values)) for values in zip(*bundle.eval[:].values())]
        assert [row["KL_completion_ids"] for row in held] == [held[-1]["completion_ids"], held[0]["completion_ids"],
                                                             held[1]["completion_ids"]]


def test_a_skipped_kto_row_lends_its_reply_within_its_batch(tmp_path, monkeypatch):
    """A row the converter skips (its kto_tag is not a boolean) still sits in LLaMA-Factory's streamed map batch: the
    row after it pairs with its reply, and it is not trained on."""
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = json.loads((DATA / "demo_kto.json").read_text(encoding="utf-8"))[:8]
    rows[2]["kto_tag"] = "yes"
    rows[2]["messages"][1]["content"] = "A reply that only lends itself."
    (tmp_path / "kto.json").write_text(json.dumps(rows), encoding="utf-8")
    info = json.loads((DATA / "dataset_info.json").read_text(encoding="utf-8"))["demo_kto"]
    (tmp_path / "dataset_info.json").write_text(json.dumps({"kto8": {**info, "file_name": "kto.json"}}),
                                                encoding="utf-8")
    cfg = load_config(None, {**BASE, "stage": "kto", "dataset": "kto8", "dataset_dir": str(tmp_path),
                             "preprocessing_batch_size": 8, "output_dir": str(tmp_path)})
    tokenizer, template = _components(cfg)
    streamed = list(get_dataset(cfg, tokenizer, template).train)
    lent = tokenizer.encode("A reply that only lends itself.", add_special_tokens=False)
    assert len(streamed) == 7 and all(lent[:4] != row["completion_ids"][:4] for row in streamed)
    borrowers = [row for row in streamed if row["KL_completion_ids"][:len(lent)] == lent]
    assert len(borrowers) == 1  # one batch of all 8 rows: the row after the skipped one in the stream


@pytest.mark.parametrize("stage", ["rm", "dpo", "kto"])
def test_trls_trainers_read_the_stream(stage, tmp_path, monkeypatch):
    """TRL's trainers take `datasets` sets only: built with the stream's first row, they then read the stream itself
    (its order, each epoch reshuffled), not that row."""
    from engine.train.preference import build_dpo_trainer, build_kto_trainer, build_rm_trainer
    from engine.train.workflow import load_components

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = _config(stage, tmp_path, per_device_train_batch_size=4)
    tokenizer, template, model = load_components(cfg, trainable=True)
    bundle = get_dataset(cfg, tokenizer, template)
    build = {"rm": build_rm_trainer, "dpo": build_dpo_trainer, "kto": build_kto_trainer}[stage]
    trainer = build(cfg, model, tokenizer, bundle, [])
    assert trainer.train_dataset is bundle.train
    loader = trainer.get_train_dataloader()
    batch = next(iter(loader))
    seen = [row[keep.bool()].tolist() for row, keep in zip(batch["input_ids"], batch["attention_mask"])]
    first = [row for _, row in zip(range(4), bundle.train)]
    if stage == "rm":
        expected = [row["chosen_ids"] for row in first]
    else:
        expected = [row["prompt_ids"] + row["chosen_ids" if stage == "dpo" else "completion_ids"] for row in first]
    assert len(seen) == (4 if stage == "kto" else 8) and seen[:4] == expected  # rm, dpo: the rejected rows follow
    assert sum(1 for _ in loader) == 8  # the 30 rows in batches of 4


@pytest.mark.parametrize("stage", ["rm", "dpo", "kto"])
def test_check_accepts_a_streamed_preference_config(stage, tmp_path):
    from engine.preflight import check

    problems = [str(problem) for problem in check(_config(stage, tmp_path), "train")]
    assert not [problem for problem in problems if "stream" in problem], problems


def test_kto_streaming_memory_does_not_grow_with_the_rows(tmp_path, monkeypatch):
    """Iterating a KTO stream of 1,000 rows (KL pairs and all) peaks at about what 200 rows peak at: one batch and
    the buffer."""
    import gc
    import tracemalloc

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    peaks = {}
    info = {"formatting": "sharegpt", "columns": {"messages": "messages", "kto_tag": "kto_tag"},
            "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}
    for count in (200, 1000):
        rows = [{"messages": [{"role": "user", "content": f"What is {i} plus {i}?"},
                              {"role": "assistant", "content": f"It is {2 * i + i % 2}."}], "kto_tag": i % 2 == 0}
                for i in range(count)]
        (tmp_path / f"kto{count}.json").write_text(json.dumps(rows), encoding="utf-8")
        (tmp_path / "dataset_info.json").write_text(json.dumps({"rows": {**info, "file_name": f"kto{count}.json"}}),
                                                    encoding="utf-8")
        cfg = load_config(None, {**BASE, "stage": "kto", "dataset": "rows", "dataset_dir": str(tmp_path),
                                 "preprocessing_batch_size": 40, "buffer_size": 20, "output_dir": str(tmp_path)})
        bundle = get_dataset(cfg, *_components(cfg))
        gc.collect()
        tracemalloc.start()
        try:
            seen = sum(1 for _ in bundle.train)
            peaks[count] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert seen == count
    assert peaks[1000] < 1.3 * peaks[200], peaks


def test_kto_labels_of_a_stream_are_those_of_its_training_rows(tmp_path, monkeypatch):
    """The rows `val_size` holds out do not train: a stream whose training rows (here one, after 29 held out) have one
    label only is refused as the same data without streaming is, though the held-out rows have both."""
    from engine.errors import UserError
    from engine.train.preference import build_kto_trainer
    from engine.train.workflow import load_components

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = _config("kto", tmp_path, per_device_train_batch_size=2, val_size=29)
    tokenizer, template, model = load_components(cfg, trainable=True)
    bundle = get_dataset(cfg, tokenizer, template)
    with pytest.raises(UserError, match="KTO needs both desirable"):
        build_kto_trainer(cfg, model, tokenizer, bundle, [])
    cfg = _config("kto", tmp_path, per_device_train_batch_size=2, val_size=4)  # both kinds train: accepted
    bundle = get_dataset(cfg, tokenizer, template)
    assert build_kto_trainer(cfg, model, tokenizer, bundle, []).train_dataset is bundle.train
