"""The tokenized-data cache: a second run with the same data and settings reuses it; any change re-tokenizes."""

from __future__ import annotations

import json
import os
import time

import pytest

from engine.config import build_config
from engine.data import cache as data_cache
from engine.data import get_dataset
from engine.templates import get_template


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("LF_ENGINE_CACHE", str(folder))
    return folder


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [{"instruction": f"Say {i}", "input": "", "output": f"The number {i}."} for i in range(20)]
    (folder / "rows.json").write_text(json.dumps(rows))
    (folder / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json"}}))
    return folder


def _run(data_dir, tokenizer, monkeypatch, **extra):
    """get_dataset, counting how often tokenization ran."""
    import engine.data.parallel as parallel

    calls = []
    real = parallel.tokenize_parallel
    monkeypatch.setattr(parallel, "tokenize_parallel", lambda *a: calls.append(1) or real(*a))
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data_dir), "cutoff_len": 64, **extra})
    bundle = get_dataset(cfg, tokenizer, get_template("chatml", tokenizer))
    return bundle, len(calls)


def test_second_run_reuses_the_cache_with_identical_rows(cache_dir, data_dir, chat_tokenizer, monkeypatch):
    first, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1
    entries = list((cache_dir / "tokenized").iterdir())
    assert len(entries) == 1 and (entries[0] / "lf_stats.json").is_file()
    second, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 0
    assert second.train.to_dict() == first.train.to_dict()
    assert second.stats == first.stats
    assert not [p for p in (cache_dir / "tokenized").iterdir() if p.name.startswith(".")]  # no temp folders left


@pytest.mark.parametrize("change", ["cutoff_len", "file", "overwrite_cache", "template", "tokenizer"])
def test_a_change_tokenizes_again(change, cache_dir, data_dir, chat_tokenizer, monkeypatch):
    _run(data_dir, chat_tokenizer, monkeypatch)
    extra: dict = {}
    tokenizer = chat_tokenizer
    if change == "cutoff_len":
        extra["cutoff_len"] = 32
    elif change == "file":
        rows = json.loads((data_dir / "rows.json").read_text())[:10]
        time.sleep(0.01)
        (data_dir / "rows.json").write_text(json.dumps(rows))
    elif change == "overwrite_cache":
        extra["overwrite_cache"] = True
    elif change == "template":
        extra["default_system"] = "Be brief."
    else:
        import copy

        tokenizer = copy.deepcopy(chat_tokenizer)
        tokenizer.add_tokens(["<|brand_new|>"], special_tokens=True)
    bundle, calls = _run(data_dir, tokenizer, monkeypatch, **extra)
    assert calls == 1
    if change == "file":
        assert len(bundle.train) == 10


def test_off_disables_the_cache(tmp_path, data_dir, chat_tokenizer, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    _run(data_dir, chat_tokenizer, monkeypatch)
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1


def test_a_damaged_entry_is_rebuilt(cache_dir, data_dir, chat_tokenizer, monkeypatch):
    _run(data_dir, chat_tokenizer, monkeypatch)
    entry = next((cache_dir / "tokenized").iterdir())
    for arrow in entry.rglob("*.arrow"):
        arrow.write_bytes(b"torn")
    bundle, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1 and len(bundle.train) == 20
    again, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 0 and len(again.train) == 20


def test_an_unwritable_cache_only_warns(tmp_path, data_dir, chat_tokenizer, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("LF_ENGINE_CACHE", str(blocker))
    bundle, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1 and len(bundle.train) == 20
    assert "not cached" in caplog.text


def test_the_key_is_stable_across_processes(data_dir, chat_tokenizer, cache_dir):
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data_dir)})
    template = get_template("chatml", chat_tokenizer)
    key = data_cache.cache_key(cfg, chat_tokenizer, template)
    assert key == data_cache.cache_key(cfg, chat_tokenizer, get_template("chatml", chat_tokenizer))
    assert "0x" not in data_cache._template_stamp(template)  # no object addresses in the key
    assert os.fspath(data_cache.entry_path(key)).startswith(os.fspath(cache_dir))


def test_preprocessing_batch_size_sets_the_chunk_and_keeps_the_tokens_and_the_cache(cache_dir, data_dir,
                                                                                     chat_tokenizer, monkeypatch):
    import engine.data.stream as stream

    whole, _ = _run(data_dir, chat_tokenizer, monkeypatch)
    chunks, real = [], stream.tokenize_to_arrow
    monkeypatch.setattr(stream, "tokenize_to_arrow", lambda *a: chunks.append(a[6]) or real(*a))
    chunked, _ = _run(data_dir, chat_tokenizer, monkeypatch, preprocessing_batch_size=6, overwrite_cache=True)
    assert chunks == [6]  # 20 rows in chunks of 6
    assert chunked.train.to_dict() == whole.train.to_dict()
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch, preprocessing_batch_size=7)  # the same tokens: reused
    assert calls == 0


def test_one_entry_for_every_spelling_of_the_dataset_folder(data_dir, chat_tokenizer, cache_dir, monkeypatch):
    """`data`, `./data/` and the folder's absolute path name the same files: one cache entry, not three."""
    monkeypatch.chdir(data_dir.parent)
    template = get_template("chatml", chat_tokenizer)
    keys = {data_cache.cache_key(build_config({"dataset": "rows", "dataset_dir": spelling}), chat_tokenizer, template)
            for spelling in (data_dir.name, f"./{data_dir.name}/", str(data_dir))}
    assert len(keys) == 1
