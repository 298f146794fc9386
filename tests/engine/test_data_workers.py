"""preprocessing_num_workers: tokenization runs in that many processes and gives the same result."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

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
    assert 1 <= len(pids) <= 2 and os.getpid() not in pids  # a quick worker may take both shards


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
    assert len(bundle.train) == 4 and 1 <= len(seen[0]) <= 2 and os.getpid() not in seen[0]


def test_workers_end_even_when_the_job_catches_sigterm(tmp_path):
    """A training job turns SIGTERM into a graceful stop; forked workers must not inherit that and hang the pool."""
    import subprocess
    import sys

    script = tmp_path / "probe.py"
    script.write_text(f"""
import os
import signal
from engine.config import build_config
from engine.data import load_examples
from engine.data.parallel import tokenize_parallel
from engine.data.tokenize import TokenizeOptions
from engine.templates import get_template
from tests.engine.conftest import make_tokenizer

signal.signal(signal.SIGTERM, lambda *_: None)  # as the engine's job does while training
tokenizer = make_tokenizer()
cfg = build_config({{"dataset": "alpaca_small", "dataset_dir": {str(FIXTURES)!r}}})
examples = load_examples(cfg.data, cfg.data.dataset, "sft")
for _ in range(5):
    columns, stats, pids = tokenize_parallel(examples, "sft", tokenizer, get_template("chatml", tokenizer),
                                             TokenizeOptions(cutoff_len=64), 2)
    assert pids and os.getpid() not in pids
    from engine.data.stream import tokenize_to_arrow

    dataset, stats = tokenize_to_arrow(examples, "sft", tokenizer, get_template("chatml", tokenizer),
                                       TokenizeOptions(cutoff_len=64), 2, chunk_rows=1)
    assert len(dataset) == stats["kept"] == len(examples)
print("done")
""")
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run([sys.executable, str(script)], cwd=root, capture_output=True, text=True, timeout=120,
                            env={**os.environ, "PYTHONPATH": str(root)})
    assert result.returncode == 0 and result.stdout.strip() == "done", result.stderr[-2000:]


@pytest.mark.parametrize("batch_size, workers", [(7, None), (7, 3), (None, 2), (1000, 4)])
def test_pretraining_blocks_join_texts_within_llama_factorys_preprocessing_batches(tmp_path, chat_tokenizer,
                                                                                  monkeypatch, batch_size, workers):
    """The blocks of a pt dataset equal those of LLaMA-Factory's pre-training map, run here through the same
    ``datasets`` map (its batch size and processes), with its block rule."""
    from datasets import Dataset

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    texts = [" ".join(f"word{i}x{k}" for k in range(3 + i % 9)) for i in range(40)]
    (tmp_path / "texts.json").write_text(json.dumps([{"text": t} for t in texts]), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"texts": {"file_name": "texts.json",
                                                                      "columns": {"prompt": "text"}}}))
    cfg = build_config({"model_name_or_path": "unused", "stage": "pt", "dataset": "texts", "dataset_dir": str(tmp_path),
                        "cutoff_len": 16, "preprocessing_batch_size": batch_size,
                        "preprocessing_num_workers": workers})
    ours = get_dataset(cfg, chat_tokenizer, get_template("chatml")).train["input_ids"]

    def blocks(batch):  # llamafactory/data/processor/pretrain.py, packing: text + EOS, joined, whole blocks only
        ids = chat_tokenizer([t + chat_tokenizer.eos_token for t in batch["text"]], add_special_tokens=False)
        stream = [token for row in ids["input_ids"] for token in row]
        whole = len(stream) // 16 * 16
        return {"input_ids": [stream[i:i + 16] for i in range(0, whole, 16)]}

    theirs = Dataset.from_dict({"text": texts}).map(blocks, batched=True, batch_size=batch_size or 1000,
                                                     num_proc=workers, remove_columns=["text"])["input_ids"]
    assert ours == theirs and len(ours) > 3
