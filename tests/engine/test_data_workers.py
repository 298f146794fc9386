"""preprocessing_num_workers: tokenization runs in that many processes and gives the same result."""

from __future__ import annotations

import os
from pathlib import Path

from engine.config import build_config
from engine.data import get_dataset, load_examples
from engine.data.parallel import shard_bounds, tokenize_parallel
from engine.data.tokenize import TokenizeOptions, tokenize_examples
from engine.templates import get_template

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "data"


def test_shards_are_contiguous_and_cover_everything():
    assert shard_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert shard_bounds(2, 8) == [(0, 1), (1, 2)]


def test_workers_tokenize_in_other_processes_with_the_same_result(chat_tokenizer):
    cfg = build_config({"dataset": "alpaca_small,sharegpt_small", "dataset_dir": str(FIXTURES)})
    examples = load_examples(cfg.data, cfg.data.dataset, "sft")
    template = get_template("chatml", chat_tokenizer)
    opts = TokenizeOptions(cutoff_len=64)
    serial = tokenize_examples(examples, "sft", chat_tokenizer, template, opts)
    columns, stats, pids = tokenize_parallel(examples, "sft", chat_tokenizer, template, opts, 2)
    assert (columns, stats) == serial
    assert len(pids) == 2 and os.getpid() not in pids


def test_the_data_config_key_reaches_tokenization(chat_tokenizer, monkeypatch):
    import engine.data.parallel as parallel

    seen = []
    real = parallel.tokenize_parallel

    def spy(*args):
        result = real(*args)
        seen.append(result[2])
        return result

    monkeypatch.setattr(parallel, "tokenize_parallel", spy)
    cfg = build_config({"dataset": "alpaca_small", "dataset_dir": str(FIXTURES), "preprocessing_num_workers": 2,
                        "cutoff_len": 64})
    bundle = get_dataset(cfg, chat_tokenizer, get_template("chatml", chat_tokenizer))
    assert len(bundle.train) == 4 and len(seen[0]) == 2 and os.getpid() not in seen[0]
