"""``streaming: true``: LLaMA-Factory 0.9.5's streaming order, rows tokenized as without streaming, a training run
on the demo model that sees the rows in that order (across an epoch), and the refusals."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from engine.config import load_config
from engine.config.loader import ConfigError
from engine.data import DatasetError, get_dataset
from engine.data.stream_order import stream_order

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "examples" / "data"
BASE = {"model_name_or_path": "demo", "template": "chatml", "stage": "sft", "finetuning_type": "lora",
        "dataset": "demo_identity", "dataset_dir": str(DATA), "cutoff_len": 256, "report_to": "none",
        "streaming": True, "max_steps": 4, "output_dir": "out"}

# (lengths, seed, buffer_size, mix_strategy, interleave_probs, epoch) -> (dataset, row) of each streamed row, as
# datasets 4.0.0 (LLaMA-Factory 0.9.5's pin) yields them: datasets.Dataset.to_iterable_dataset(num_shards=1) per
# dataset, concatenate_datasets / interleave_datasets(probabilities, seed), .shuffle(buffer_size, seed), set_epoch.
DATASETS_4_0_0 = [
    (([12], 42, 4, "concat", None, 0), [(0, 0), (0, 3), (0, 2), (0, 1), (0, 7), (0, 5), (0, 4), (0, 6), (0, 8),
                                        (0, 10), (0, 9), (0, 11)]),
    (([12], 42, 4, "concat", None, 1), [(0, 2), (0, 1), (0, 0), (0, 4), (0, 5), (0, 8), (0, 7), (0, 3), (0, 6),
                                        (0, 10), (0, 11), (0, 9)]),
    (([5, 7], 7, 3, "concat", None, 0), [(0, 2), (0, 1), (0, 3), (1, 0), (0, 4), (1, 1), (1, 3), (0, 0), (1, 5),
                                         (1, 2), (1, 4), (1, 6)]),
    (([6, 9], 3, 5, "interleave_under", [0.7, 0.3], 0), [(0, 3), (0, 0), (1, 0), (0, 5), (0, 4), (0, 2), (0, 1)]),
    (([4, 6], 42, 2, "interleave_over", None, 2), [(0, 0), (0, 1), (1, 0), (0, 2), (1, 2), (0, 3), (1, 3), (0, 0),
                                                   (1, 1), (1, 4), (0, 1), (1, 5)]),
]


@pytest.mark.parametrize(("case", "expected"), DATASETS_4_0_0)
def test_the_order_is_llamafactorys_streaming_order(case, expected):
    lengths, seed, buffer_size, strategy, probs, epoch = case
    assert list(stream_order(lengths, seed, buffer_size, strategy, probs, epoch)) == expected


# with dataloader_num_workers W: each dataset in W shards, read by a torch DataLoader of W workers and batch size B
# (lengths, seed, buffer_size, mix_strategy, interleave_probs, epoch, W, B, skip) -> the loader's rows, datasets 4.0.0
DATASETS_4_0_0_WORKERS = [
    (([7, 11], 5, 3, "concat", None, 0, 2, 2, 3), [(1, 6), (1, 10), (1, 3), (1, 0), (1, 7), (0, 6), (1, 4), (1, 1),
                                                   (0, 4), (0, 5), (0, 1), (0, 2), (0, 3), (1, 5), (0, 0)]),
    (([9, 6], 42, 4, "interleave_over", [0.6, 0.4], 1, 3, 2, 0), [(0, 7), (1, 4), (0, 1), (1, 0), (0, 4), (1, 2),
                                                                  (0, 6), (1, 4), (0, 0), (1, 0), (0, 3), (1, 2),
                                                                  (1, 5), (0, 8), (1, 1), (0, 2), (1, 3), (0, 5)]),
]


@pytest.mark.parametrize(("case", "expected"), DATASETS_4_0_0_WORKERS)
def test_each_workers_shard_streams_in_llamafactorys_order(case, expected):
    from itertools import islice

    from engine.data.stream_order import split_number

    lengths, seed, buffer_size, strategy, probs, epoch, workers, batch, skip = case
    streams = [list(islice(stream_order(lengths, seed, buffer_size, strategy, probs, epoch, workers, worker),
                           split_number(skip, workers, worker), None)) for worker in range(workers)]
    turns = [[stream[i:i + batch] for i in range(0, len(stream), batch)] for stream in streams]
    loader = [pick for turn in range(max(map(len, turns))) for batches in turns if turn < len(batches)
              for pick in batches[turn]]  # torch's loader: a batch from each worker in turn
    assert loader == expected


def _components(cfg):
    from engine.models.tokenizer_setup import load_text_components

    return load_text_components(cfg)


def _pairs(rows):
    return [(list(row["input_ids"]), list(row["labels"])) for row in rows]


def test_each_streamed_row_is_tokenized_as_without_streaming(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = load_config(None, {**BASE, "dataset": "demo_identity,demo_alpaca", "buffer_size": 16, "val_size": 3,
                             "output_dir": str(tmp_path)})
    tokenizer, template = _components(cfg)
    streamed = get_dataset(cfg, tokenizer, template)
    assert streamed.origin == "streamed" and not hasattr(streamed.train, "__len__")
    plain = get_dataset(load_config(None, {**BASE, "dataset": "demo_identity,demo_alpaca", "streaming": False,
                                           "output_dir": str(tmp_path)}), tokenizer, template)
    every = sorted(_pairs(plain.train))
    held, trained = _pairs(streamed.eval), _pairs(streamed.train)
    assert len(held) == 3 and sorted(held + trained) == every  # the same rows, each tokenized the same
    assert trained != _pairs(plain.train)[3:]  # ... in the stream's shuffled order
    streamed.train.set_epoch(1)
    again = _pairs(streamed.train)
    # a new epoch reshuffles, and skips the first rows of the new order (LLaMA-Factory's take/skip of one stream)
    assert again != trained and len(again) == len(trained) and all(pair in every for pair in again)


def test_a_streamed_run_trains_the_rows_in_stream_order_across_an_epoch(tmp_path, monkeypatch):
    """The demo model trains 4 steps of 12 rows on a stream of 32: the Trainer reads the stream (12, 12, 8 rows), then
    (epoch 1) the reshuffled stream, as LLaMA-Factory's does."""
    from engine.cli import main
    from engine.data import collator

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    monkeypatch.chdir(tmp_path)
    seen: list[list[int]] = []
    call = collator.PaddingCollator.__call__

    def record(self, features):
        seen.extend(list(feature["input_ids"]) for feature in features)
        return call(self, features)

    monkeypatch.setattr(collator.PaddingCollator, "__call__", record)
    overrides = {**BASE, "per_device_train_batch_size": 12, "buffer_size": 10, "logging_steps": 1,
                 "save_strategy": "no", "output_dir": str(tmp_path / "out")}
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), *(f"{k}={v}" for k, v in overrides.items())]
    assert main(args) == 0
    cfg = load_config(None, overrides)
    bundle = get_dataset(cfg, *_components(cfg))
    first = [row["input_ids"] for row in bundle.train]
    bundle.train.set_epoch(1)
    second = [row["input_ids"] for row in bundle.train]
    # accelerate's loader collates one batch ahead (to know the last one), so the stream is read past step 4
    assert len(first) == 32 and seen[:44] == first + second[:12] and seen[44:] == second[12:12 + len(seen) - 44]
    events = (tmp_path / "out" / "events.jsonl").read_text()
    assert '"total_steps": 4' in events


def test_two_loader_workers_read_their_shards_in_turn(tmp_path, monkeypatch):
    """With ``dataloader_num_workers: 2`` the Trainer's loader reads a batch from each worker's shard in turn."""
    import torch

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = load_config(None, {**BASE, "dataloader_num_workers": 2, "buffer_size": 5, "val_size": 3,
                             "per_device_eval_batch_size": 2, "output_dir": str(tmp_path)})
    bundle = get_dataset(cfg, *_components(cfg))
    loader = torch.utils.data.DataLoader(bundle.train, batch_size=4, num_workers=2, collate_fn=list)
    seen = [row["input_ids"] for batch in loader for row in batch]
    shards = [list(bundle.train.batches(bundle.train.picks(worker=worker))) for worker in (0, 1)]
    rows = [[ids for columns, _ in shard for ids in columns["input_ids"]] for shard in shards]
    turns = [[part[i:i + 4] for i in range(0, len(part), 4)] for part in rows]
    assert len(seen) == 29 and seen == [ids for turn in range(max(map(len, turns))) for part in turns
                                        if turn < len(part) for ids in part[turn]]
    held = [[ids for columns, _ in bundle.train.batches(bundle.train.picks(0, True, worker)) for ids in
             columns["input_ids"]] for worker in (0, 1)]
    assert [len(part) for part in held] == [2, 1]  # the held-out rows: each worker's share of val_size
    assert bundle.eval["input_ids"] == held[0][:2] + held[1][:2]


def test_packed_and_pretraining_rows_stream_in_batches(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    for extra in ({"packing": True}, {"stage": "pt", "dataset": "demo_pt", "cutoff_len": 32}):
        cfg = load_config(None, {**BASE, **extra, "output_dir": str(tmp_path)})
        bundle = get_dataset(cfg, *_components(cfg))
        rows = list(bundle.train)
        assert rows and all(len(row["input_ids"]) <= cfg.data.cutoff_len for row in rows)
        if extra.get("packing"):
            assert "position_ids" in bundle.train.column_names


@pytest.mark.parametrize(("extra", "message"), [
    ({"max_steps": -1}, "`streaming: true` needs `max_steps`"),
    ({"max_samples": 10}, "`max_samples` cannot be used with `streaming: true`"),
    ({"val_size": 0.1}, "`val_size: 0.1` is a fraction"),
    ({"stage": "ppo"}, "streams stages pt, sft, rm, dpo and kto here"),
    ({"max_tokens_per_batch": 512}, "`max_tokens_per_batch`"),
    ({"do_predict": True, "val_size": 4}, "`do_predict: true` with `streaming: true`"),
    ({"predict_with_generate": True, "val_size": 4, "eval_strategy": "steps", "eval_steps": 2},
     "`predict_with_generate: true` with `streaming: true`"),
])
def test_refusals_name_the_key_and_the_fix(extra, message):
    with pytest.raises(ConfigError, match=message.replace("`", ".").replace("(", ".").replace(")", ".")):
        load_config(None, {**BASE, **extra})


def test_buffer_size_is_a_setting_now_and_streaming_with_one_worker_is_accepted(caplog, monkeypatch):
    from engine.config import streaming_checks

    monkeypatch.setattr(streaming_checks, "_SAID", set())
    cfg = load_config(None, {**BASE, "buffer_size": 128, "dataloader_num_workers": 1})
    assert cfg.data.buffer_size == 128
    with caplog.at_level(logging.INFO, logger="engine.config.streaming_checks"):
        load_config(None, BASE)
    assert "LLaMA-Factory 0.9.5 gives with `dataloader_num_workers: 1`" in caplog.text


def test_a_val_size_that_holds_out_the_whole_stream_is_refused(tmp_path):
    cfg = load_config(None, {**BASE, "val_size": 32, "output_dir": str(tmp_path)})
    with pytest.raises(DatasetError, match="holds out every one of the 32 rows"):
        get_dataset(cfg, *_components(cfg))


def test_rows_with_media_do_not_stream(tmp_path):
    cfg = load_config(None, {**BASE, "dataset": "demo_vlm", "output_dir": str(tmp_path)})
    with pytest.raises(DatasetError, match="streams text rows only here"):
        get_dataset(cfg, *_components(cfg))


def test_several_processes_are_refused_before_the_model_loads(tmp_path, monkeypatch):
    from engine.train.workflow import check_launch

    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(DatasetError, match="runs in one process here, and this run has 2"):
        check_launch(load_config(None, {**BASE, "output_dir": str(tmp_path)}))


def test_streamed_rows_cannot_be_saved_to_tokenized_path(tmp_path):
    cfg = load_config(None, {**BASE, "tokenized_path": str(tmp_path / "saved"), "output_dir": str(tmp_path)})
    with pytest.raises(DatasetError, match="Turn off `streaming` when saving"):
        get_dataset(cfg, *_components(cfg))


def test_a_saved_tokenized_path_streams_in_its_saved_order(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    saved = {**BASE, "streaming": False, "tokenized_path": str(tmp_path / "saved"), "output_dir": str(tmp_path)}
    cfg = load_config(None, saved)
    tokenizer, template = _components(cfg)
    rows = _pairs(get_dataset(cfg, tokenizer, template).train)
    streamed = get_dataset(load_config(None, {**saved, "streaming": True}), tokenizer, template)
    assert not hasattr(streamed.train, "__len__") and _pairs(streamed.train) == rows


def test_the_data_command_refuses_a_stream(tmp_path):
    from engine.prepare_data import prepare

    with pytest.raises(DatasetError, match="tokenized while training"):
        prepare(load_config(None, {**BASE, "output_dir": str(tmp_path)}))


def test_memory_while_streaming_does_not_grow_with_the_rows(tmp_path, monkeypatch):
    """Iterating a stream of 5,000 rows peaks at about what 1,000 rows peak at: one batch and the buffer."""
    import gc
    import json
    import tracemalloc

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = None
    peaks = {}
    for count in (1000, 5000):
        path = tmp_path / f"rows{count}.jsonl"
        path.write_text("".join(json.dumps({"instruction": f"Question {i}: what is {i} plus {i}?",
                                            "output": f"It is {2 * i}."}) + "\n" for i in range(count)))
        cfg = load_config(None, {**BASE, "dataset": str(path), "preprocessing_batch_size": 200, "buffer_size": 100,
                                 "output_dir": str(tmp_path)})
        bundle = get_dataset(cfg, *_components(cfg))
        gc.collect()
        tracemalloc.start()
        try:
            rows = sum(1 for _ in bundle.train)
            peaks[count] = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        assert rows == count
    assert peaks[5000] < 1.3 * peaks[1000], peaks


@pytest.mark.parametrize("model", ["demo", "demo-vlm"])
def test_check_refuses_streamed_rows_with_media_before_anything_loads(tmp_path, model):
    # `lf-engine check` said OK here and `train` refused the rows only after the model had loaded
    from engine.preflight import check

    template = "qwen2_vl" if model == "demo-vlm" else "chatml"
    cfg = load_config(None, {**BASE, "model_name_or_path": model, "template": template, "dataset": "demo_vlm",
                             "output_dir": str(tmp_path)})
    problems = [str(p) for p in check(cfg, "train")]
    assert any("'demo_vlm' has images, videos or audio, and `streaming: true` streams text rows only" in p
               for p in problems), problems
    text_only = load_config(None, {**BASE, "output_dir": str(tmp_path)})
    assert not [p for p in check(text_only, "train") if "streams text rows only" in str(p)]
