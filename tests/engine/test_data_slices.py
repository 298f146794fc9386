"""dataset_info.json's ``split`` on local files: the rows ``datasets.load_dataset(..., split=...)`` gives LLaMA-Factory."""

from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest

from engine.data import DatasetError, load_examples, resolve_dataset
from engine.data.registry import check_datasets
from engine.data.rows import iter_rows
from engine.data.slices import absolute_bounds, parse_split, split_rows


def _args(folder, **kw):
    return SimpleNamespace(dataset_dir=str(folder), max_samples=kw.get("max_samples"), mix_strategy="concat",
                           interleave_probs=None)


def _data(tmp_path, count=40, entries=None, tail=""):
    rows = [{"instruction": f"q{i}", "output": f"a{i}"} for i in range(count)]
    (tmp_path / "d.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + tail, encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps(entries or {}), encoding="utf-8")
    return rows


def _numbers(examples):
    return [int(e["messages"][0]["content"][1:]) for e in examples]


def test_the_split_slices_a_local_file_as_llama_factory_does(tmp_path):
    _data(tmp_path, entries={"first10": {"file_name": "d.jsonl", "split": "train[:10]"},
                             "quarter": {"file_name": "d.jsonl", "split": "train[75%:]"},
                             "two": {"file_name": "d.jsonl", "split": "train[:3]+train[-2:]"},
                             "whole": {"file_name": "d.jsonl", "split": "train"}})
    assert _numbers(load_examples(_args(tmp_path), "first10", "sft")) == list(range(10))
    assert _numbers(load_examples(_args(tmp_path), "quarter", "sft")) == list(range(30, 40))
    assert _numbers(load_examples(_args(tmp_path), "two", "sft")) == [0, 1, 2, 38, 39]
    assert _numbers(load_examples(_args(tmp_path), "whole", "sft")) == list(range(40))
    # max_samples keeps the first of the split's rows
    assert _numbers(load_examples(_args(tmp_path, max_samples=4), "quarter", "sft")) == [30, 31, 32, 33]


def test_num_samples_draws_from_the_split_rows(tmp_path):
    _data(tmp_path, entries={"s": {"file_name": "d.jsonl", "split": "train[20:30]", "num_samples": 4}})
    expected = [20 + int(i) for i in np.random.RandomState(42).permutation(10)[:4]]
    assert _numbers(load_examples(_args(tmp_path), "s", "sft", seed=42)) == expected


def test_a_num_samples_that_would_repeat_rows_past_the_bound_is_refused_with_the_fix(tmp_path):
    """A dataset_info.json from elsewhere with `num_samples: 10000000000` over 40 rows ended in numpy's "Unable to
    allocate 74.5 GiB" traceback (100,000,000 took gigabytes for minutes instead); drawing fewer rows than the file
    holds, or repeating them up to the bound, is LLaMA-Factory's sampling as before."""
    from engine.data.loader import MAX_SAMPLED_ROWS

    _data(tmp_path, entries={"huge": {"file_name": "d.jsonl", "num_samples": 10_000_000_000},
                             "over": {"file_name": "d.jsonl", "num_samples": MAX_SAMPLED_ROWS + 1},
                             "twice": {"file_name": "d.jsonl", "num_samples": 80}})
    for name, count in (("huge", "10,000,000,000"), ("over", f"{MAX_SAMPLED_ROWS + 1:,}")):
        with pytest.raises(DatasetError, match=rf"Dataset '{name}': `num_samples: {count}` in dataset_info.json would "
                                               rf"repeat its 40 rows .*lower num_samples"):
            load_examples(_args(tmp_path), name, "sft", seed=42)
    assert len(load_examples(_args(tmp_path), "twice", "sft", seed=42)) == 80


def test_a_slice_with_a_known_end_reads_no_further(tmp_path):
    _data(tmp_path, count=5, tail='{"instruction": broken\n',
          entries={"head": {"file_name": "d.jsonl", "split": "train[:3]"},
                   "pct": {"file_name": "d.jsonl", "split": "train[:50%]"}})
    assert _numbers(load_examples(_args(tmp_path), "head", "sft")) == [0, 1, 2]
    with pytest.raises(DatasetError, match="line 6"):  # a percentage counts the rows first
        load_examples(_args(tmp_path), "pct", "sft")


def test_a_split_datasets_refuses_is_named_with_the_fix(tmp_path):
    _data(tmp_path, entries={"t": {"file_name": "d.jsonl", "split": "test"},
                             "bad": {"file_name": "d.jsonl", "split": "train[:5](closest)"},
                             "none": {"file_name": "d.jsonl", "split": "train[40:]"},
                             "pct1": {"file_name": "d.jsonl", "split": "train[:10%](pct1_dropremainder)"}})
    with pytest.raises(DatasetError, match=r"Dataset 't': `split: test` .*Unknown split \"test\". Should be one of "
                                           r"\['train'\].*write `train`, a slice of it"):
        resolve_dataset("t", tmp_path)
    problems = check_datasets(tmp_path, "t,bad", "sft")
    assert len(problems) == 2 and "rounding if not using percent slicing" in problems[1]
    with pytest.raises(DatasetError, match=r"`split: train\[40:\]` .*selects no rows.*corresponds to no data"):
        load_examples(_args(tmp_path), "none", "sft")
    with pytest.raises(DatasetError, match="less than 100 elements"):
        load_examples(_args(tmp_path), "pct1", "sft")


SPECS = ["train", "all", "train[:10]", "train[75%:]", "train[:10]+train[20:30]", "train[-5:]", "train[:-35]",
         "train[10:5]", "train[10:9]", "train[-1:-2]", "train[2%:1%]", "train[3%:-3%]", "train[:10%]+train[-10:]",
         "train[50:]", "train[5:5]", "train[:10]+train[50:]", "train+train[:2]", "train[:1_0]",
         "train[:1] +train[:2]", "train[:10] + train[:5]", "test", "train[:2]+all", "train[2:4](closest)",
         "train[101%:]", "train[:10%](pct1_dropremainder)", "train[:10%](pct1_dropremainder)+train[:5%]"]


def _outcome(run):
    try:
        return run()
    except (ValueError, DatasetError) as err:
        text = str(err)
        for needle in ("Unknown split", "Split name should match", "rounding", "Percent slice", "no data",
                       "less than 100", "Unrecognized", "forbidden to sum"):
            if needle in text:
                return needle
        return text


def test_rows_equal_datasets_load_dataset(tmp_path):
    """Every spec gives the rows (or the refusal) datasets gives for the same file."""
    datasets = pytest.importorskip("datasets")
    _data(tmp_path)
    path = tmp_path / "d.jsonl"
    for spec in SPECS:
        theirs = _outcome(lambda spec=spec: [int(q[1:]) for q in datasets.load_dataset(
            "json", data_files=[str(path)], split=spec, cache_dir=str(tmp_path / "cache"))["instruction"]])
        ours = _outcome(lambda spec=spec: [int(r["instruction"][1:])
                                           for r in split_rows(lambda: iter_rows(path), spec, "d")])
        assert ours == theirs, spec


@pytest.mark.parametrize("rows", [0, 1, 7, 10, 30, 99, 100, 250, 1001])
def test_bounds_equal_datasets_read_instruction(rows):
    """The absolute bounds of datasets' ReadInstruction, percent rounding (closest and pct1_dropremainder) and
    negative bounds included."""
    datasets = pytest.importorskip("datasets")
    specs = ["train[:5%]", "train[25%:75%]", "train[-33%:]", "train[:-1%]", "train[15%:16%]", "train[-7:-2]",
             "train[3:]", "train[:1000]", "train[-2000:]", "train[33%:](pct1_dropremainder)",
             "train[:-50%](pct1_dropremainder)+train[1%:2%](pct1_dropremainder)", "train[:10]+train[-10%:]"]
    for spec in specs:
        theirs = _outcome(lambda spec=spec: [(i.from_, i.to) for i in
                                             datasets.ReadInstruction.from_spec(spec).to_absolute({"train": rows})])
        ours = _outcome(lambda spec=spec: absolute_bounds(parse_split(spec), rows))
        assert ours == theirs, (spec, rows)


def test_interleave_over_weights_that_never_end_or_draw_billions_are_refused_with_the_fix():
    """`mix_strategy: interleave_over` with `interleave_probs: 1,0` ended in datasets' ValueError traceback, and with
    `0.9999999999,0.0000000001` drew for minutes (9 GB and growing) before a row was tokenized. Weights that end
    within the bound mix exactly as datasets.interleave_datasets does."""
    import time

    from engine.data.loader import mix_order

    started = time.monotonic()
    with pytest.raises(DatasetError, match=r"dataset 2 of 2 .* weighs 0 in interleave_probs, so it is never drawn"):
        mix_order([32, 93], "interleave_over", [1.0, 0.0])
    with pytest.raises(DatasetError, match=r"dataset 2 of 2 .* holds 93 rows at a weight of 1e-10, about "
                                           r"930,000,000,000 draws.*raise its weight in interleave_probs"):
        mix_order([32, 93], "interleave_over", [0.9999999999, 1e-10])
    assert time.monotonic() - started < 5
    order = mix_order([32, 93], "interleave_over", [0.7, 0.3])
    assert {d for d, _ in order} == {0, 1} and len({(d, r) for d, r in order if d == 1}) == 93
    assert mix_order([32, 93], "interleave_under", [1.0, 0.0]) is not None  # ends when the first is drawn whole
