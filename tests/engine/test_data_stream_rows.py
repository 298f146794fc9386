"""Rows streamed from files into an Arrow file of canonical examples: the same examples, mixes, splits, errors and
tokenized ids as the list implementation this replaced, with memory that does not grow with the row count."""

from __future__ import annotations

import csv
import gc
import json
import logging
import pickle
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.data import DatasetError, load_examples, split_eval
from engine.data import examples as examples_module
from engine.data.convert_driver import convert_rows
from engine.data.converters import detect_format
from engine.data.examples import Examples, ExampleWriter, concat, count_media, dump, load, media_dataset_names
from engine.data.loader import check_stage, load_dataset_examples, mix_examples
from engine.data.parallel import tokenize_parallel
from engine.data.preview import preview_dataset
from engine.data.registry import check_datasets, resolve_dataset
from engine.data.rows import iter_json, iter_rows
from engine.data.stream import _scratch_dir, save_splits, tokenize_to_arrow
from engine.data.tokenize import TokenizeOptions
from engine.templates import get_template


def args(dataset_dir, **kw):
    return SimpleNamespace(dataset_dir=str(dataset_dir), max_samples=kw.get("max_samples"),
                           mix_strategy=kw.get("mix_strategy", "concat"), interleave_probs=kw.get("probs"),
                           cutoff_len=64)


# ------------------------------------------------------------- the list implementation this replaced (reference)
def old_read_json(path: Path) -> list:
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if text.lstrip().startswith("{") and err.msg == "Extra data":
            rows = []
            for number, line in enumerate(text.splitlines(), start=1):
                if line.strip():
                    try:
                        rows.append(json.loads(line))
                    except json.JSONDecodeError as line_err:
                        raise DatasetError(f"{path} is not valid JSON: {line_err.msg} at line "
                                           f"{line_err.lineno + number - 1}, column {line_err.colno}. Fix the file (a "
                                           "JSON list of objects, or one object per line in a .jsonl file).") from None
            data = rows
        else:
            raise DatasetError(f"{path} is not valid JSON: {err.msg} at line {err.lineno}, column {err.colno}. Fix "
                               "the file (a JSON list of objects, or one object per line in a .jsonl file).") from None
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(data) == 1 and lists:
            data = lists[0]
        else:
            raise DatasetError(f"{path} holds one JSON object; expected a list of row objects.")
    if not isinstance(data, list):
        raise DatasetError(f"{path} must hold a JSON list of row objects.")
    for index, row in enumerate(data):
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: row {index} is a {type(row).__name__}, not an object with named columns.")
    return data


def old_load(name: str, dataset_dir: Path, stage: str, max_samples: int | None = None) -> list[dict]:
    """The list implementation, with dataset_info's num_samples as LLaMA-Factory 0.9.5 applies it (numpy's global
    generator seeded with the seed, 42 here: a permutation's first rows, then random ones to make up the count)."""
    import numpy as np

    spec = resolve_dataset(name, dataset_dir)
    rows = old_read_json(spec.path)
    if spec.num_samples:
        np.random.seed(42)
        indexes = np.random.permutation(len(rows))[:spec.num_samples]
        if spec.num_samples > len(rows):
            indexes = np.concatenate((indexes, np.random.choice(len(rows), spec.num_samples - len(rows))))
        rows = [rows[i] for i in indexes]
    if max_samples:
        rows = rows[:max_samples]
    spec = detect_format(spec, rows)
    check_stage(spec, stage, rows[0])
    examples = convert_rows(rows, spec, stage)
    for example in examples:
        example["_dataset"] = name
    return examples


def old_mix(groups, strategy="concat", probs=None, seed=42):
    """LLaMA-Factory's mixing (datasets' concatenate / interleave_datasets), on the list implementation's rows;
    weights not summing to 1 scaled as ours does (LLaMA-Factory would stop there)."""
    from datasets import Dataset, interleave_datasets

    if len(groups) == 1 or strategy == "concat":
        return [example for group in groups for example in group]
    if probs is not None and abs(sum(probs) - 1) > 1e-8:
        probs = [w / sum(probs) for w in probs]
    parts = [Dataset.from_dict({"g": [k] * len(g), "i": list(range(len(g)))}) for k, g in enumerate(groups)]
    mixed = interleave_datasets(parts, probabilities=probs, seed=seed,
                                stopping_strategy="first_exhausted" if strategy == "interleave_under" else "all_exhausted")
    return [groups[g][i] for g, i in zip(mixed["g"], mixed["i"])]


def old_split(examples, val_size, seed=42):
    """LLaMA-Factory's split: train_test_split(test_size=val_size, or int(val_size) above 1, seed)."""
    from datasets import Dataset

    split = Dataset.from_dict({"i": list(range(len(examples)))}).train_test_split(
        test_size=int(val_size) if val_size > 1 else val_size, seed=seed)
    return [examples[i] for i in split["train"]["i"]], [examples[i] for i in split["test"]["i"]]


# ---------------------------------------------------------------------------------------------- test data
def alpaca_rows(count: int, start: int = 0) -> list[dict]:
    rows = []
    for i in range(start, start + count):
        row = {"instruction": f"Question {i}: what is {i} + {i}? {{\"not\": [json]}}", "input": "" if i % 3 else "ctx",
               "output": f"It is {2 * i}. \\ \"quoted\" ] }}"}
        if i % 11 == 0:
            row["history"] = [[f"earlier {i}", f"reply {i}"]]
        if i % 17 == 5:
            row["history"] = [["a pair of one"]]  # skipped: a history pair that is not [prompt, response]
        rows.append(row)
    return rows


@pytest.fixture
def big_dir(tmp_path):
    """Two alpaca datasets (1,300 and 700 rows, a few unusable) and a dataset_info.json."""
    (tmp_path / "a.json").write_text(json.dumps(alpaca_rows(1300), indent=1), encoding="utf-8")
    (tmp_path / "b.json").write_text(json.dumps(alpaca_rows(700, 5000)), encoding="utf-8")
    columns = {"prompt": "instruction", "query": "input", "response": "output", "history": "history"}
    info = {"a": {"file_name": "a.json", "columns": columns}, "b": {"file_name": "b.json", "columns": columns},
            "b100": {"file_name": "b.json", "num_samples": 100, "columns": columns},
            "b1500": {"file_name": "b.json", "num_samples": 1500, "columns": columns}}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return tmp_path


@pytest.fixture
def small_chunks(monkeypatch):
    """Record batches (and reads) of 64 examples, so a small set spans many of them."""
    monkeypatch.setattr(examples_module, "CHUNK_ROWS", 64)


# ------------------------------------------------------------------------------------- streaming JSON parser
AWKWARD = [
    '[{"a": "x]}{[\\"\\\\"}, {"b": [1, {"c": "}"}]}]',  # brackets and braces inside strings, escapes
    '\ufeff \n [ {"a":1} ,\n\t {"a":2}\n]\n\n',  # BOM and whitespace everywhere
    '[{"a": 12345}, {"b": 1.5e10, "c": -0.0, "d": true, "e": null, "f": "é€😀"}]',  # numbers, literals, non-ASCII
    '[ ]', '{"rows": [{"a": 1}, {"a": 2}]}', '{"a": 1}\n{"a": 2}\n', '[{"a": 1}]   ',
    # errors: each must read exactly as json.loads of the whole file reports it (message, line, column)
    '[{"a":1},]', '[{"a":1} {"a":2}]', '[{"a":1},\n{"a": tru}]', '[{"a":1}', '[', '', '  ', '[{"a":1}] x',
    '{"a":1}\n{"a":2', '5', '[1]', '[{"a":"\n"}]', '[\n\n  {"a": 1},\n  {"a": "unterminated\n}]', '{"a":1, "b": [1]}',
    '[{"a":1},\n  ]', '[{"a":1}]\n\n\n  {', '{"a": {"b": 1}', '[{"a":1}, 2]', '[{"a": true}, {"b": nul}]',
    '[{"a": 1} , {"a": 2}, {"a": [1,2,]}]', '[{"a": 1}, {"a": 12',
]


def _outcome(read):
    try:
        return "rows", read()
    except DatasetError as err:
        return "error", str(err)


@pytest.mark.parametrize("text", AWKWARD)
def test_streaming_json_equals_reading_the_whole_file(text, tmp_path):
    path = tmp_path / "t.json"
    path.write_bytes(b"\xef\xbb\xbf" + text[1:].encode() if text.startswith("\ufeff") else text.encode())
    expected = _outcome(lambda: old_read_json(path))
    for size in (1, 2, 3, 5, 16, 1 << 20):  # tiny buffers split every object across reads
        assert _outcome(lambda size=size: list(iter_json(path, size))) == expected, size


def test_json_errors_name_the_line_and_column_far_into_the_file(tmp_path):
    rows = [{"instruction": f"q{i}", "output": "a"} for i in range(3000)]
    text = json.dumps(rows, indent=1)
    cut = text.index('"q2500"')
    broken = text[:cut] + '"q2500" oops' + text[cut + len('"q2500"'):]
    path = tmp_path / "rows.json"
    path.write_text(broken, encoding="utf-8")
    line = broken.count("\n", 0, cut) + 1
    column = cut - broken.rfind("\n", 0, cut) + len('"q2500" ')
    with pytest.raises(DatasetError) as err:
        list(iter_json(path, 4096))
    assert f"Expecting ',' delimiter at line {line}, column {column}." in str(err.value) and line > 10_000
    assert _outcome(lambda: list(iter_json(path, 7))) == _outcome(lambda: old_read_json(path))
    reader = iter_json(path, 4096)
    assert [next(reader)["instruction"] for _ in range(3)] == ["q0", "q1", "q2"]  # rows come before the error


def test_rows_of_every_file_type_stream(tmp_path):
    rows = [{"instruction": f"q{i}", "output": f"a{i}"} for i in range(5)]
    (tmp_path / "r.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    with (tmp_path / "r.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, ["instruction", "output"])
        writer.writeheader()
        writer.writerows(rows)
    (tmp_path / "r.txt").write_text("one\n\n two\n", encoding="utf-8")
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "r.parquet", row_group_size=2)
    for suffix in ("jsonl", "csv", "parquet"):
        stream = iter_rows(tmp_path / f"r.{suffix}")
        assert next(stream) == rows[0] and list(stream) == rows[1:]
    assert list(iter_rows(tmp_path / "r.txt")) == [{"text": "one"}, {"text": ""}, {"text": " two"}]  # as datasets
    (tmp_path / "bad.jsonl").write_text('{"a": 1}\n{"a": }\n', encoding="utf-8")
    stream = iter_rows(tmp_path / "bad.jsonl")
    assert next(stream) == {"a": 1}
    with pytest.raises(DatasetError, match="Expecting value at line 2, column 7"):
        next(stream)


def test_a_jsonl_file_holding_a_list_reads_as_a_json_list(tmp_path):
    """datasets gives .json and .jsonl files to one JSON reader: a list in a .jsonl file is read (by pandas, its
    fractions as pandas reads them, NaN as null) as the same list in a .json file is; it was refused here."""
    rows = [{"instruction": "q", "output": "a", "x": 0.7071067811865476, "y": float("nan")}, {"instruction": "r"}]
    (tmp_path / "list.jsonl").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    (tmp_path / "list.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
    expected = [{"instruction": "q", "output": "a", "x": 0.707106781186547, "y": None}, {"instruction": "r"}]
    assert list(iter_rows(tmp_path / "list.jsonl")) == list(iter_rows(tmp_path / "list.json")) == expected
    (tmp_path / "lines.jsonl").write_text('{"x": 0.7071067811865476}\n', encoding="utf-8")
    assert list(iter_rows(tmp_path / "lines.jsonl")) == [{"x": 0.7071067811865476}]  # JSON lines: exact, as pyarrow


def test_a_file_that_is_not_utf8_names_the_byte_in_the_whole_file(tmp_path):
    path = tmp_path / "latin.jsonl"
    good = b'{"text": "fine"}\n' * 5000
    path.write_bytes(good + b'{"text": "caf\xe9"}\n')
    with pytest.raises(DatasetError, match=rf"not UTF-8 text \(invalid continuation byte at byte {len(good) + 13}\)"):
        list(iter_rows(path))


# ------------------------------------------------------------------------------------------------- Examples
class Text(str):
    """A str subclass: marshal refuses it, so the example is pickled (and keeps the type)."""


def test_examples_round_trip_exactly_and_index_like_a_list(small_chunks):
    items = [{"i": i, "f": i / 3, "b": i % 2 == 0, "none": None, "nested": [{"t": (i, "x")}], "s": "é" * i}
             for i in range(300)]
    items[7]["odd"] = Text("kept as its own type")
    writer = ExampleWriter("demo")
    for item in items:
        writer.add(item)
    examples = writer.finish()
    assert len(examples) == 300 and examples == items and list(examples) == items
    assert type(examples[7]["odd"]) is Text and examples[7]["nested"][0]["t"] == (7, "x")
    assert examples[-1] == items[-1] and examples[63:130] == items[63:130] and examples[::7] == items[::7]
    assert examples[290:400] == items[290:400] and examples[5:5] == []
    with pytest.raises(IndexError):
        examples[300]
    view = examples.take([299, 0, 64, 65, 63, 128])
    assert list(view) == [items[i] for i in (299, 0, 64, 65, 63, 128)]
    assert view.take([1, 0]) == [items[0], items[299]]
    assert concat([examples, view])[298:302] == [items[298], items[299], items[299], items[0]]
    assert load(dump({"k": [True, 1.0]})) == {"k": [True, 1.0]} and type(load(dump(True))) is bool
    assert pickle.loads(pickle.dumps(view)) == view  # a view pickles by path (its files stay where they are)


def test_the_file_goes_when_the_last_view_does():
    writer = ExampleWriter("x")
    writer.add({"a": 1})
    examples = writer.finish()
    path = examples._sources[0].path
    view = examples.take([0])
    del examples
    gc.collect()
    assert path.exists() and view[0] == {"a": 1}
    del view
    gc.collect()
    assert not path.exists()


# ------------------------------------------------------------------------------ the loader equals the old one
@pytest.mark.parametrize("max_samples", [None, 1000])
def test_loading_equals_the_list_implementation(big_dir, small_chunks, max_samples, caplog):
    with caplog.at_level(logging.WARNING):
        old = old_load("a", big_dir, "sft", max_samples)
    old_warning = [r.getMessage() for r in caplog.records]
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        new = load_dataset_examples("a", str(big_dir), "sft", max_samples)
    assert isinstance(new, Examples) and len(new) == len(old) and new == old
    assert [r.getMessage() for r in caplog.records] == old_warning and "skipped" in old_warning[0]
    assert {e["_dataset"] for e in new} == {"a"}
    assert load_dataset_examples("b100", str(big_dir), "sft") == old_load("b100", big_dir, "sft")  # num_samples
    oversampled = load_dataset_examples("b1500", str(big_dir), "sft")  # more than its 700 rows: drawn again
    assert oversampled == old_load("b1500", big_dir, "sft") and len(oversampled) > 1400
    assert load_dataset_examples("b1500", str(big_dir), "sft", 50) == old_load("b1500", big_dir, "sft", 50)


@pytest.mark.parametrize(("strategy", "probs"), [("concat", None), ("interleave_under", None),
                                                 ("interleave_over", "0.3,0.7"), ("interleave_under", "1,0.2")])
@pytest.mark.parametrize("seed", [1, 42])
def test_mixing_and_the_eval_split_choose_the_same_rows(big_dir, small_chunks, strategy, probs, seed):
    groups = [old_load("a", big_dir, "sft"), old_load("b", big_dir, "sft")]
    weights = [float(p) for p in probs.split(",")] if probs else None
    # LLaMA-Factory mixes the unusable rows (i % 17 == 5) too and drops them afterwards
    holed = [[None if i % 17 == 5 else next(kept) for i in range(start, start + count)]
             for kept, start, count in ((iter(groups[0]), 0, 1300), (iter(groups[1]), 5000, 700))]
    expected = [example for example in old_mix(holed, strategy, weights, seed) if example is not None]
    mixed = load_examples(args(big_dir, mix_strategy=strategy, probs=probs), "a,b", "sft", seed)
    assert isinstance(mixed, Examples) and mixed == expected
    listed = old_mix(groups, strategy, weights, seed)
    assert mix_examples(groups, strategy, weights, seed) == listed  # lists still mix as lists (no skipped rows)
    for val_size in (0.1, 37):
        train, held = split_eval(mixed, val_size, seed)
        old_train, old_held = old_split(expected, val_size, seed)
        assert isinstance(train, Examples) and train == old_train and held == old_held
        assert split_eval(expected, val_size, seed) == (old_train, old_held)


def test_errors_keep_their_text(big_dir, tmp_path):
    (tmp_path / "empty.json").write_text("[]", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"is empty; add rows to it"):
        load_examples(args(tmp_path), str(tmp_path / "empty.json"), "sft")
    (tmp_path / "useless.json").write_text(json.dumps([{"instruction": "q", "output": "x", "system": ["a"]}] * 3),
                                           encoding="utf-8")
    with pytest.raises(DatasetError, match=r"no usable rows for stage sft \(3 rows read; first problem: the system "
                                           r"column is a list"):
        load_examples(args(tmp_path), str(tmp_path / "useless.json"), "sft")
    with pytest.raises(DatasetError, match="needs preference pairs"):
        load_examples(args(big_dir), "a", "dpo")
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps(alpaca_rows(50))[:-40], encoding="utf-8")
    before = set(_scratch_dir().glob("*.examples.arrow"))
    with pytest.raises(DatasetError) as err:
        load_examples(args(tmp_path), str(broken), "sft")
    assert str(err.value) == _outcome(lambda: old_read_json(broken))[1]
    assert set(_scratch_dir().glob("*.examples.arrow")) <= before  # the half-written file is gone


def test_media_rows_are_counted_without_loading_them(fixture_data_dir):
    both = load_examples(args(fixture_data_dir), "mm_small,alpaca_small", "sft")
    with_media = [e for e in both if any(e.get(k) for k in ("images", "videos", "audios"))]
    assert count_media(both) == len(with_media) > 0 and count_media(list(both)) == len(with_media)
    assert media_dataset_names(both) == media_dataset_names(list(both)) == ["mm_small"]
    train, held = split_eval(both, 2, seed=0)
    assert count_media(train) + count_media(held) == len(with_media)


# ----------------------------------------------------------------------- tokenization, workers, preview, checks
@pytest.mark.parametrize("workers", [None, 2])
def test_tokenized_ids_equal_the_list_path(big_dir, small_chunks, workers, chat_tokenizer):
    examples = load_examples(args(big_dir, mix_strategy="interleave_over"), "a,b", "sft", seed=3)
    train, _ = split_eval(examples, 0.05, seed=3)
    template = get_template("chatml", chat_tokenizer)
    opts = TokenizeOptions(cutoff_len=48)
    columns, stats, _ = tokenize_parallel(list(train), "sft", chat_tokenizer, template, opts, None)
    dataset, streamed = tokenize_to_arrow(train, "sft", chat_tokenizer, template, opts, workers, chunk_rows=300)
    assert streamed == stats and dataset.to_dict() == columns  # forked workers read the view's file themselves


def test_a_streamed_set_is_saved_by_copying_its_file(big_dir, chat_tokenizer, tmp_path):
    from datasets import DatasetDict, load_from_disk

    examples = load_examples(args(big_dir), "a", "sft")
    template = get_template("chatml", chat_tokenizer)
    streamed, _ = tokenize_to_arrow(examples, "sft", chat_tokenizer, template, TokenizeOptions(cutoff_len=48),
                                    chunk_rows=500)
    small = streamed.select(range(3))  # not one whole file: saved by datasets itself
    save_splits({"train": streamed, "eval": small}, tmp_path / "fast")
    DatasetDict({"train": streamed, "eval": small}).save_to_disk(str(tmp_path / "plain"))
    fast, plain = load_from_disk(str(tmp_path / "fast")), load_from_disk(str(tmp_path / "plain"))
    for split in ("train", "eval"):
        assert fast[split].features == plain[split].features and fast[split].to_dict() == plain[split].to_dict()
    copied = tmp_path / "fast" / "train" / "data-00000-of-00001.arrow"
    assert copied.read_bytes() == Path(streamed.cache_files[0]["filename"]).read_bytes()


def test_preview_reads_only_the_rows_it_shows(tmp_path, chat_tokenizer):
    rows = json.dumps(alpaca_rows(2600))
    (tmp_path / "big.json").write_text(rows[:-1] + ', {"instruction": oops}]', encoding="utf-8")  # broken at the end
    (tmp_path / "dataset_info.json").write_text(json.dumps({"big": {"file_name": "big.json"}}), encoding="utf-8")
    data = SimpleNamespace(**vars(args(tmp_path)), dataset="big")
    template = get_template("chatml", chat_tokenizer)
    preview = preview_dataset(data, "sft", chat_tokenizer, template, n=3)
    assert len(preview["rows"]) == 3 and len(preview["lengths"]) == 2000
    assert preview["sampled"] and preview["num_examples"] is None
    assert check_datasets(str(tmp_path), "big", "sft") == []  # the layout check needs the first row only
    with pytest.raises(DatasetError, match="Expecting value"):  # training reads it all
        load_examples(data, "big", "sft")


# ------------------------------------------------------------------------------------------------- memory
def _load_old(path: Path) -> int:
    return len(old_load(str(path), path.parent, "sft"))


def test_memory_does_not_grow_with_the_rows(tmp_path):
    """20,000 rows: the old list path holds every row and example at once (tens of MB of Python objects); the
    streamed path holds a chunk, so its peak stays under a bound that the old path exceeds several times over."""
    path = tmp_path / "rows.json"
    path.write_text(json.dumps(alpaca_rows(20_000)), encoding="utf-8")
    data = args(tmp_path)
    load_examples(data, str(path), "sft")  # imports and first-use caches out of the measurement
    bound = 12 * 2**20

    def peak(load):
        gc.collect()
        tracemalloc.start()
        try:
            kept = load()
            return tracemalloc.get_traced_memory()[1], kept
        finally:
            tracemalloc.stop()

    new_peak, examples = peak(lambda: load_examples(data, str(path), "sft"))
    old_peak, old_count = peak(lambda: _load_old(path))
    assert len(examples) == old_count > 18_000
    assert new_peak < bound < old_peak, (new_peak, old_peak)
    before = len(gc.get_objects())
    again = load_examples(data, str(path), "sft")
    assert len(gc.get_objects()) - before < 1000 and len(again) == old_count  # no object per example stays alive
