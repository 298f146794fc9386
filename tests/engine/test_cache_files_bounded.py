"""The small JSON files of the tokenized-data cache and of a ``tokenized_path`` (an entry's lf_meta.json and
lf_stats.json, a quick-key record, lf_tokenized.json, datasets' state.json and dataset_info.json of a saved split)
are read only as regular files of a bounded size. A sparse file of hundreds of MB was read whole, and a named pipe
held its reader (``lf-engine data``, a training job, the board's pre-flight check) until a writer came. Each is now
refused at once and counts as a stale cache (tokenized again) or is named and left out."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc
from pathlib import Path
from types import SimpleNamespace

import pytest

SIZE = 256 << 20
"""Past every bound these files are read to (16 MB; a quick-key record's 64 KB)."""


def plant(path: Path, kind: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.unlink(missing_ok=True)
    if kind == "pipe":
        os.mkfifo(path)
    else:
        with open(path, "wb") as fh:
            fh.truncate(SIZE)  # sparse: no disk taken


def bounded(fn, pipe: Path | None = None, seconds: float = 20):
    """``fn()``'s result; fails when it waits on ``pipe`` past ``seconds`` (the pipe then gets a writer that closes
    at once, so the reader goes) or holds more than 40 MB of memory at its peak."""
    result, errors, done = [], [], threading.Event()

    def run():
        tracemalloc.start()
        try:
            result.append(fn())
            result.append(tracemalloc.get_traced_memory()[1])
        except BaseException as err:  # raised again in the test's thread
            errors.append(err)
        finally:
            tracemalloc.stop()
            done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(seconds):
        if pipe is not None:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        done.wait(10)
        pytest.fail(f"still waiting on {pipe} after {seconds} s")
    if errors:
        raise errors[0]
    value, peak = result
    assert peak < 40 << 20, f"{peak:,} bytes held"
    return value


@pytest.fixture(autouse=True)
def _imported():
    import datasets  # noqa: F401 - imported before memory is counted

    import engine.data.cache_prune  # noqa: F401
    import engine.preflight  # noqa: F401
    import engine.small_json  # noqa: F401


KINDS = ["sparse", "pipe"]


@pytest.mark.parametrize("kind", KINDS)
def test_an_entrys_meta_file(tmp_path, kind, caplog):
    from engine.data.cache_prune import META, read_meta

    plant(tmp_path / META, kind)
    assert bounded(lambda: read_meta(tmp_path), tmp_path / META) is None
    assert "is not a cache entry's meta file" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_quick_key_record(tmp_path, kind):
    from engine.data.quick_key import QUICK, forget_evicted

    record = tmp_path / QUICK / ("0" * 32 + ".json")
    plant(record, kind)
    assert bounded(lambda: forget_evicted(tmp_path), record) == 1  # of no use: removed
    assert not os.path.lexists(record)


@pytest.mark.parametrize("kind", KINDS)
def test_the_cached_counts_of_lf_engine_data(tmp_path, kind, monkeypatch, caplog):
    import logging

    from engine import prepare_data
    from engine.data import quick_key

    monkeypatch.setattr(quick_key, "lookup", lambda cfg: tmp_path)
    plant(tmp_path / "lf_stats.json", kind)
    cfg = SimpleNamespace(data=SimpleNamespace(streaming=False, cutoff_len=64))
    with caplog.at_level(logging.INFO, logger="engine.prepare_data"):
        assert bounded(lambda: prepare_data.quick_report(cfg), tmp_path / "lf_stats.json") is None  # tokenize
    assert "lf_stats.json cannot be read" in caplog.text


def _saved(folder: Path) -> None:
    from datasets import Dataset, DatasetDict

    DatasetDict({"train": Dataset.from_dict({"input_ids": [[1, 2]], "labels": [[1, 2]]})}).save_to_disk(str(folder))


@pytest.mark.parametrize("kind", KINDS)
def test_a_tokenized_paths_counts(tmp_path, kind, caplog):
    from engine.data import _load_tokenized

    _saved(tmp_path / "saved")
    plant(tmp_path / "saved" / "lf_stats.json", kind)
    bundle = bounded(lambda: _load_tokenized(tmp_path / "saved"), tmp_path / "saved" / "lf_stats.json")
    assert bundle.stats == {} and len(bundle.train) == 1  # the data loads; its counts are left out
    assert "lf_stats.json cannot be read" in caplog.text and "overwrite_cache: true" in caplog.text


def test_a_tokenized_paths_counts_that_are_no_objects_are_left_out_of_the_report(tmp_path):
    """lf_stats.json read back as any JSON object: a split's counts that were a number or text ended `lf-engine data`'s
    report with an AttributeError traceback. Such a split has no line; the others keep theirs."""
    import json

    from engine.data import _load_tokenized
    from engine.prepare_data import split_lines

    _saved(tmp_path / "saved")
    (tmp_path / "saved" / "lf_stats.json").write_text(json.dumps({"train": 5, "eval": "x"}))
    assert split_lines(_load_tokenized(tmp_path / "saved").stats, 8) == []
    lines = split_lines({"train": [1], "eval": {"rows": 3, "kept": 2}}, 8)
    assert len(lines) == 1 and lines[0].startswith("eval: 3 rows -> 2 sequences")


@pytest.mark.parametrize("kind", KINDS)
def test_what_a_tokenized_path_was_made_with(tmp_path, kind, caplog):
    from engine.data.saved_fit import MADE_WITH, _saved

    plant(tmp_path / MADE_WITH, kind)
    assert bounded(lambda: _saved(tmp_path), tmp_path / MADE_WITH) == {}
    assert f"{MADE_WITH} cannot be read" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_saved_splits_dataset_info_in_the_preflight_check(tmp_path, kind):
    from engine.preflight import _saved_packed_rows

    plant(tmp_path / "train" / "dataset_info.json", kind)
    cfg = SimpleNamespace(data=SimpleNamespace(tokenized_path=str(tmp_path), overwrite_cache=False))
    assert bounded(lambda: _saved_packed_rows(cfg), tmp_path / "train" / "dataset_info.json") is False


@pytest.mark.parametrize("features", [5, "position_ids", ["position_ids"], {"position_ids": {}}])
def test_a_saved_splits_features_that_are_no_object_are_no_packed_rows(tmp_path, features):
    """The check took `features` as it came: a number ended the pre-flight report (in the board's process too) with
    a TypeError traceback, and a text holding "position_ids" read as packed rows. Only datasets' object of columns
    counts."""
    import json

    from engine.preflight import _saved_packed_rows

    (tmp_path / "train").mkdir()
    (tmp_path / "train" / "dataset_info.json").write_text(json.dumps({"features": features}))
    cfg = SimpleNamespace(data=SimpleNamespace(tokenized_path=str(tmp_path), overwrite_cache=False))
    assert _saved_packed_rows(cfg) is isinstance(features, dict)


@pytest.mark.parametrize("kind", [*KINDS, "outside"])
def test_the_state_json_of_a_split_saved_by_copying(tmp_path, kind, monkeypatch, caplog):
    """save_splits reads the state.json datasets has just written; one replaced meanwhile (or naming a file outside
    the split's folder) has the split written by datasets itself."""
    import pyarrow as pa
    from datasets import Dataset, DatasetDict, load_from_disk

    from engine.data.stream import save_splits

    arrow = tmp_path / "rows.arrow"
    table = pa.table({"input_ids": [[1, 2, 3], [4, 5]]})
    with pa.OSFile(str(arrow), "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    rows = Dataset.from_file(str(arrow))
    state = tmp_path / "out" / "train" / "state.json"
    real = DatasetDict.save_to_disk

    def save_then_replace(self, path, **kwargs):
        real(self, path, **kwargs)
        if kind == "outside":
            saved = json.loads(state.read_text())
            saved["_data_files"] = [{"filename": str(tmp_path / "elsewhere.arrow")}]
            state.write_text(json.dumps(saved))
        else:
            plant(state, kind)

    monkeypatch.setattr(DatasetDict, "save_to_disk", save_then_replace)
    bounded(lambda: save_splits({"train": rows}, tmp_path / "out"), state, seconds=60)
    monkeypatch.undo()
    assert load_from_disk(str(tmp_path / "out"))["train"].to_dict() == {"input_ids": [[1, 2, 3], [4, 5]]}
    assert not (tmp_path / "elsewhere.arrow").exists()
    assert "state.json cannot be read" in caplog.text


@pytest.mark.parametrize("kind", KINDS)
def test_a_cache_entrys_counts_make_it_stale(tmp_path, kind, monkeypatch, chat_tokenizer):
    """An entry whose lf_stats.json was replaced (its meta changed to match) is tokenized again and replaced."""
    from engine.config import build_config
    from engine.data import get_dataset
    from engine.data import parallel as data_parallel
    from engine.data.cache_prune import META
    from engine.templates import get_template

    monkeypatch.setenv("LF_ENGINE_CACHE", str(tmp_path / "cache"))
    (tmp_path / "rows.json").write_text(json.dumps([{"instruction": f"Say {i}", "output": f"{i}."} for i in range(8)]))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json"}}))
    cfg = build_config({"dataset": "rows", "dataset_dir": str(tmp_path), "cutoff_len": 64})
    calls = []
    real = data_parallel.tokenize_parallel
    monkeypatch.setattr(data_parallel, "tokenize_parallel", lambda *a: calls.append(1) or real(*a))
    template = get_template("chatml", chat_tokenizer)
    first = get_dataset(cfg, chat_tokenizer, template)
    entry = next((tmp_path / "cache" / "tokenized").iterdir())
    plant(entry / "lf_stats.json", kind)
    meta = json.loads((entry / META).read_text())
    meta["files"]["lf_stats.json"] = os.stat(entry / "lf_stats.json").st_size
    (entry / META).write_text(json.dumps(meta))
    again = bounded(lambda: get_dataset(cfg, chat_tokenizer, template), entry / "lf_stats.json", seconds=60)
    assert len(calls) == 2 and again.stats == first.stats  # tokenized again
    get_dataset(cfg, chat_tokenizer, template)
    assert len(calls) == 2  # and the new entry is reused
