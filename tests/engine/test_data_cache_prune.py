"""The tokenized-data cache stays bounded: a size cap with least-recently-used eviction, entries in use and entries
being written kept, incomplete entries never loaded, and `lf-engine cache` to list, prune and clear it."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from engine.cli import EXIT_USER_ERROR, main
from engine.config import build_config
from engine.data import cache as data_cache
from engine.data import cache_prune, get_dataset
from engine.templates import get_template

MB = cache_prune.MB


@pytest.fixture()
def cache_dir(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("LF_ENGINE_CACHE", str(folder))
    monkeypatch.delenv(cache_prune.CAP_ENV, raising=False)
    yield folder
    cache_prune.release()  # this process's holds on entries it loaded


@pytest.fixture()
def tokenized(cache_dir):
    folder = cache_dir / "tokenized"
    folder.mkdir(parents=True)
    return folder


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [{"instruction": f"Say {i}", "input": "", "output": f"The number {i}."} for i in range(20)]
    (folder / "rows.json").write_text(json.dumps(rows))
    (folder / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json"}}))
    return folder


def _entry(tokenized, key: str, size_mb: float, used: float, source: dict | None = None):
    """A complete synthetic entry of about ``size_mb`` MB, last used at ``used`` (epoch seconds)."""
    folder = tokenized / key
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "part.arrow").write_bytes(b"\0" * int(size_mb * MB))
    (folder / "lf_stats.json").write_text("{}")
    (folder / cache_prune.USED).touch()
    meta = {"files": cache_prune.manifest(folder), "source": source or {}}
    (folder / cache_prune.META).write_text(json.dumps(meta))
    os.utime(folder / cache_prune.USED, (used, used))
    return folder


def _keys(tokenized) -> set[str]:
    return {p.name for p in tokenized.iterdir()}


def _run(data_dir, tokenizer, monkeypatch, **extra):
    """get_dataset, counting how often tokenization ran."""
    import engine.data.parallel as parallel

    calls = []
    real = parallel.tokenize_parallel
    monkeypatch.setattr(parallel, "tokenize_parallel", lambda *a: calls.append(1) or real(*a))
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data_dir), "cutoff_len": 64, **extra})
    bundle = get_dataset(cfg, tokenizer, get_template("chatml", tokenizer))
    return bundle, len(calls)


# ------------------------------------------------------------------------------------------------------- the cap
@pytest.mark.parametrize("value, gb", [(None, 20), ("", 20), ("2", 2), ("0.5", 0.5), ("20GB", 20), (" 3 gb ", 3),
                                       ("0", None), ("0.0", None), ("off", None), ("OFF", None), ("none", None),
                                       ("unlimited", None)])
def test_cap_values(value, gb):
    assert cache_prune.parse_cap(value) == (None if gb is None else int(gb * cache_prune.GB))


@pytest.mark.parametrize("value", ["lots", "-1", "inf", "nan", "1TB", "2,5"])
def test_a_bad_cap_is_a_clear_error(value):
    with pytest.raises(cache_prune.CacheError) as err:
        cache_prune.parse_cap(value)
    text = str(err.value)
    assert f"LF_ENGINE_CACHE_MAX_GB={value!r} is not a size in GB" in text and "0 / off for no cap" in text


def test_a_bad_cap_in_a_run_logs_and_keeps_the_default(monkeypatch, caplog):
    monkeypatch.setenv(cache_prune.CAP_ENV, "lots")
    with caplog.at_level(logging.WARNING, logger="engine.data.cache_prune"):
        assert cache_prune.cap_bytes() == 20 * cache_prune.GB
    assert "LF_ENGINE_CACHE_MAX_GB='lots' is not a size in GB" in caplog.text
    assert "Using the default cap of 20 GB" in caplog.text


# -------------------------------------------------------------------------------------------------- eviction
def test_eviction_follows_the_last_use_and_respects_the_cap(tokenized):
    now = time.time()
    for i, key in enumerate("abcde"):
        _entry(tokenized, key, 1, now - 1000 + i * 100)  # a is the least recently used, e the most
    os.utime(tokenized / "b" / cache_prune.USED)  # b was just loaded: now the most recently used
    result = cache_prune.prune(tokenized, int(2.5 * MB))
    assert _keys(tokenized) == {"b", "e"}
    assert result.evicted == 3 and result.total <= 2.5 * MB
    assert result.freed == pytest.approx(3 * MB, rel=0.01)
    assert cache_prune.prune(tokenized, int(2.5 * MB)).evicted == 0  # under the cap: nothing more goes


def test_no_cap_evicts_nothing_and_zero_clears(tokenized):
    for key in "abc":
        _entry(tokenized, key, 1, time.time())
    assert cache_prune.prune(tokenized, None).evicted == 0 and _keys(tokenized) == {"a", "b", "c"}
    assert cache_prune.prune(tokenized, 0).evicted == 3 and _keys(tokenized) == set()


def test_the_entry_just_written_is_never_evicted(tokenized):
    _entry(tokenized, "old", 1, time.time() - 100)
    _entry(tokenized, "new", 3, time.time() - 1000)  # over the cap on its own, and even marked older
    result = cache_prune.prune(tokenized, 2 * MB, keep=("new",))
    assert _keys(tokenized) == {"new"} and result.evicted == 1 and result.total > 2 * MB


def test_an_entry_another_process_reads_is_kept(tokenized):
    _entry(tokenized, "busy", 1, time.time() - 1000)
    _entry(tokenized, "idle", 1, time.time() - 500)
    holder = _lock_in_another_process(cache_prune._lock_path(tokenized, "busy"), "LOCK_SH")
    try:
        result = cache_prune.prune(tokenized, 0)
        assert _keys(tokenized) == {"busy"} and result.kept_in_use == 1
        assert [r["state"] for r in cache_prune.describe(tokenized)] == ["in use"]
    finally:
        holder.kill()
        holder.wait()
    assert cache_prune.prune(tokenized, 0).evicted == 1 and _keys(tokenized) == set()


def _lock_in_another_process(path, mode: str) -> subprocess.Popen:
    """A process that locks ``path`` (fcntl ``mode``) and sleeps until killed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, os, sys, time; fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT); "
         f"fcntl.flock(fd, fcntl.{mode}); print('held', flush=True); time.sleep(60)", str(path)],
        stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    return holder


def test_a_loaded_entry_is_held_and_marked_used(cache_dir, data_dir, chat_tokenizer, monkeypatch):
    _run(data_dir, chat_tokenizer, monkeypatch)
    tokenized = cache_dir / "tokenized"
    (entry,) = tokenized.iterdir()
    os.utime(entry / cache_prune.USED, (1, 1))
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 0 and (entry / cache_prune.USED).stat().st_mtime > time.time() - 60
    assert cache_prune.prune(tokenized, 0).kept_in_use == 1 and entry.is_dir()  # its data is mapped here
    cache_prune.release()
    assert cache_prune.prune(tokenized, 0).evicted == 1 and not entry.exists()


def test_a_write_over_the_cap_evicts_and_logs(cache_dir, data_dir, chat_tokenizer, monkeypatch, caplog):
    monkeypatch.setenv(cache_prune.CAP_ENV, "0.000005")  # about 5 KB: less than one entry (10 KB)
    _run(data_dir, chat_tokenizer, monkeypatch)
    tokenized = cache_dir / "tokenized"
    (first,) = tokenized.iterdir()
    cache_prune.release()
    with caplog.at_level(logging.INFO, logger="engine.data.cache_prune"):
        _run(data_dir, chat_tokenizer, monkeypatch, cutoff_len=32)
    (second,) = tokenized.iterdir()
    assert second != first
    line = next(r.getMessage() for r in caplog.records if "evicted" in r.getMessage())
    assert "evicted 1 least recently used entry" in line and "KB freed" in line
    assert "0.00512 MB cap" in line and "LF_ENGINE_CACHE_MAX_GB" in line and "0 or off: no cap" in line
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch, cutoff_len=32)
    assert calls == 0  # the entry just written stayed
    assert "the entry just written" in caplog.text
    assert "is over the 0.00512 MB cap by itself and is kept" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="engine.data.cache_prune"):  # now held by this process, as in a run
        _run(data_dir, chat_tokenizer, monkeypatch, cutoff_len=48)
    assert "because 1 entry is in use by running jobs" in caplog.text and len(list(tokenized.iterdir())) == 2


# -------------------------------------------------------------------------------- incomplete and unfinished entries
@pytest.mark.parametrize("damage", ["cut", "missing", "no_meta"])
def test_an_incomplete_entry_is_never_loaded_and_is_rebuilt(damage, cache_dir, data_dir, chat_tokenizer,
                                                            monkeypatch, caplog):
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    (entry,) = (cache_dir / "tokenized").iterdir()
    arrow = next(entry.rglob("*.arrow"))
    if damage == "cut":  # a copy or delete stopped half-way
        arrow.write_bytes(arrow.read_bytes()[:100])
    elif damage == "missing":
        arrow.unlink()
    else:
        (entry / cache_prune.META).unlink()
    bundle, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1 and len(bundle.train) == 20
    if damage != "no_meta":
        assert "Ignoring the incomplete tokenized-data cache entry" in caplog.text
    again, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 0 and len(again.train) == 20


def test_a_crash_mid_eviction_leaves_nothing_loadable(cache_dir, data_dir, chat_tokenizer, monkeypatch):
    """Eviction renames the entry out of its name first; a crash after that leaves only a trash folder."""
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    tokenized = cache_dir / "tokenized"
    (entry,) = tokenized.iterdir()
    trash = cache_prune._to_trash(tokenized, entry)  # the crash: renamed, not yet deleted
    assert data_cache.load_entry(entry.name) is None
    assert cache_prune.prune(tokenized, None).leftovers == 1 and not trash.exists()
    cache_prune._to_trash(tokenized, _entry(tokenized, "other", 1, time.time()))
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1 and _keys(tokenized) == {entry.name}  # the prune after the write removed the trash


def test_an_entry_being_written_is_kept_and_cleaned_once_stale(tokenized):
    writing = tokenized / ".k1-abcd"
    (writing / "data").mkdir(parents=True)
    (writing / "data" / "part.arrow").write_bytes(b"\0" * 1000)
    writer = _lock_in_another_process(writing / cache_prune.WRITING_LOCK, "LOCK_EX")
    no_lock = tokenized / ".k2-efgh"  # a writer killed before it took its lock
    no_lock.mkdir()
    try:
        assert {r["state"] for r in cache_prune.describe(tokenized)} == {"being written"}
        assert cache_prune.prune(tokenized, 0).leftovers == 0 and _keys(tokenized) == {".k1-abcd", ".k2-efgh"}
    finally:
        writer.kill()  # SIGKILL: the writer dies mid-write
        writer.wait()
    assert {r["state"] for r in cache_prune.describe(tokenized)} == {"being written"}  # too young to tell yet
    minute_ago = time.time() - cache_prune.YOUNG_S - 1
    os.utime(writing, (minute_ago, minute_ago))
    assert {r["state"] for r in cache_prune.describe(tokenized)} == {"stale write", "being written"}
    assert cache_prune.prune(tokenized, 0).leftovers == 1 and _keys(tokenized) == {".k2-efgh"}
    old = time.time() - cache_prune.STALE_UNLOCKED_S - 10
    os.utime(no_lock, (old, old))
    assert cache_prune.prune(tokenized, None).leftovers == 1 and _keys(tokenized) == set()


def test_a_temporary_folder_is_never_loaded(cache_dir, data_dir, chat_tokenizer, monkeypatch):
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data_dir), "cutoff_len": 64})
    key = data_cache.cache_key(cfg, chat_tokenizer, get_template("chatml", chat_tokenizer))
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    tokenized = cache_dir / "tokenized"
    os.rename(tokenized / key, tokenized / f".{key}-half")  # as a writer leaves it before its final rename
    assert data_cache.load_entry(key) is None
    _, calls = _run(data_dir, chat_tokenizer, monkeypatch)
    assert calls == 1


# ---------------------------------------------------------------------------------------------------- the CLI
def test_cli_lists_prunes_and_clears(cache_dir, data_dir, chat_tokenizer, monkeypatch, capsys):
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    tokenized = cache_dir / "tokenized"
    _entry(tokenized, "f" * 32, 2, time.time() - 3600, {"stage": "dpo", "dataset": "prefs", "tokenizer": "tiny"})
    assert main(["cache"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["KEY", "SIZE", "LAST", "USED", "STATE", "STAGE", "DATA", "TOKENIZER", "TEMPLATE"]
    assert lines[1].split()[:3] == ["ffffffffffff", "2.0", "MB"] and "dpo" in lines[1] and "prefs" in lines[1]
    assert "sft" in lines[2] and "rows" in lines[2] and "chatml" in lines[2]
    assert lines[-1].startswith("2 entries, ") and "20 GB cap" in lines[-1] and str(tokenized) in lines[-1]
    assert main(["cache", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["source"].get("dataset") for r in rows] == ["prefs", "rows"]
    assert rows[1]["source"]["dataset_dir"] == str(data_dir) and rows[0]["size_bytes"] >= 2 * MB

    assert main(["cache", "--prune", "--max-gb", "0.001"]) == 0  # 1 MB: the 2 MB entry goes, the small one stays
    assert "prune: removed 1 entry" in capsys.readouterr().out and len(list(tokenized.iterdir())) == 1
    assert main(["cache", "--clear"]) == 0
    assert "clear: removed 1 entry" in capsys.readouterr().out and list(tokenized.iterdir()) == []
    assert main(["cache"]) == 0
    assert capsys.readouterr().out.startswith("0 entries, 0.0 KB")


def test_cli_bad_values_exit_2(cache_dir, monkeypatch, capsys, caplog):
    assert main(["cache", "--prune", "--max-gb", "much"]) == EXIT_USER_ERROR
    assert "error: --max-gb='much' is not a size in GB" in capsys.readouterr().err
    monkeypatch.setenv(cache_prune.CAP_ENV, "much")
    assert main(["cache", "--prune"]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "LF_ENGINE_CACHE_MAX_GB='much'" in err and "Traceback" not in err
    assert main(["cache"]) == 0  # listing does not need the cap: a warning, and the default
    assert "20 GB cap" in capsys.readouterr().out and "LF_ENGINE_CACHE_MAX_GB='much'" in caplog.text
    assert main(["cache", "--max-gb", "3"]) == EXIT_USER_ERROR
    assert "--max-gb goes with --prune" in capsys.readouterr().err


def test_cli_on_a_cache_that_does_not_exist_yet(cache_dir, capsys):
    assert main(["cache", "--clear"]) == 0 and main(["cache"]) == 0
    assert "clear: removed 0 entries" in capsys.readouterr().out and not cache_dir.exists()


def test_cli_with_the_cache_off(monkeypatch, capsys):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    assert main(["cache", "--clear"]) == 0
    assert "cache is off (LF_ENGINE_CACHE=off)" in capsys.readouterr().out


def test_lock_files_of_gone_entries_are_removed(tokenized):
    _entry(tokenized, "kept", 1, time.time())
    _entry(tokenized, "evicted", 1, time.time() - 100)
    assert cache_prune.hold(tokenized, "kept")
    orphan = cache_prune._lock_path(tokenized, "deleted_by_hand")
    orphan.touch()
    assert cache_prune.prune(tokenized, 1 * MB).evicted == 1
    locks = {p.name for p in orphan.parent.iterdir()}
    assert locks == {"kept.lock"}  # held by this process; the evicted entry's and the orphan's lock are gone


def test_an_entry_loads_where_no_lock_can_be_made(cache_dir, data_dir, chat_tokenizer, monkeypatch, tmp_path):
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    monkeypatch.setattr(cache_prune, "_lock_path", lambda tokenized, key: blocker / f"{key}.lock")
    bundle, calls = _run(data_dir, chat_tokenizer, monkeypatch)  # e.g. a read-only shared cache
    assert calls == 0 and len(bundle.train) == 20


def test_a_second_prune_meanwhile_does_nothing(tokenized, capsys, monkeypatch):
    monkeypatch.setattr(cache_prune, "PRUNE_WAIT_S", 0.2)
    _entry(tokenized, "a", 1, time.time())
    guard = cache_prune._lock(tokenized.parent / cache_prune.LOCKS / "tokenized.prune.lock", shared=False)
    try:
        assert cache_prune.prune(tokenized, 0).busy and _keys(tokenized) == {"a"}
        assert main(["cache", "--clear"]) == 0
        assert "Another process is pruning the cache right now" in capsys.readouterr().out
    finally:
        os.close(guard)
    assert cache_prune.prune(tokenized, 0).evicted == 1


def test_overwrite_keeps_an_entry_another_process_reads(cache_dir, data_dir, chat_tokenizer, monkeypatch, caplog):
    _run(data_dir, chat_tokenizer, monkeypatch)
    cache_prune.release()
    tokenized = cache_dir / "tokenized"
    (entry,) = tokenized.iterdir()
    before = (entry / cache_prune.META).stat().st_mtime_ns
    reader = _lock_in_another_process(cache_prune._lock_path(tokenized, entry.name), "LOCK_SH")
    try:
        with caplog.at_level(logging.INFO, logger="engine.data.cache"):
            _, calls = _run(data_dir, chat_tokenizer, monkeypatch, overwrite_cache=True)
    finally:
        reader.kill()
        reader.wait()
    assert calls == 1 and "is in use by another process; kept it as it is" in caplog.text
    assert _keys(tokenized) == {entry.name} and (entry / cache_prune.META).stat().st_mtime_ns == before
    _run(data_dir, chat_tokenizer, monkeypatch, overwrite_cache=True)  # nobody reads it now: replaced
    assert _keys(tokenized) == {entry.name} and (entry / cache_prune.META).stat().st_mtime_ns != before


_WORKER = """
import json, logging, os, random, sys
from datasets import Dataset
from engine.data import DatasetBundle, cache, cache_prune
logging.basicConfig(level=logging.WARNING)
rng, hits = random.Random(int(sys.argv[1])), 0
for _ in range(25):
    k = rng.randrange(5)
    key = f"k{k}" + "0" * 31
    hit = cache.load_entry(key)
    if hit is None:
        rows = 500 + k
        cache.save_entry(key, DatasetBundle(train=Dataset.from_dict({"ids": [[k] * 8] * rows}), stats={"rows": rows}))
    else:
        assert len(hit.train) == 500 + k and hit.stats == {"rows": 500 + k}, key
        assert hit.train[:]["ids"] == [[k] * 8] * (500 + k), key
        hits += 1
    cache_prune.release(key)
print(json.dumps({"hits": hits}))
"""


def test_processes_writing_reading_and_evicting_at_once(cache_dir, monkeypatch):
    """Three processes load, write and evict the same five keys under a cap of about two entries: every load is whole,
    nothing is logged as unreadable or incomplete, and the cache ends at the cap."""
    env = {**os.environ, "LF_ENGINE_CACHE_MAX_GB": str(2.5 * 30_000 / cache_prune.GB),
           "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parents[2]), os.environ.get("PYTHONPATH", "")]),
           "HF_DATASETS_DISABLE_PROGRESS_BARS": "1"}
    procs = [subprocess.Popen([sys.executable, "-c", _WORKER, str(seed)], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in range(3)]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    for proc, (_out, err) in zip(procs, outputs):
        assert proc.returncode == 0, err[-2000:]
        assert "unreadable" not in err and "incomplete" not in err, err[-2000:]
    assert sum(json.loads(out)["hits"] for out, _ in outputs) > 0
    tokenized = cache_dir / "tokenized"
    assert not [p for p in tokenized.iterdir() if p.name.startswith(".")]  # no temporary or trash folder left
    entries = cache_prune.scan(tokenized)
    assert entries and all(e.complete for e in entries)
    # the last write may have found entries the other two processes were loading at that moment: those stay
    assert sum(e.size for e in entries) <= cache_prune.parse_cap(env["LF_ENGINE_CACHE_MAX_GB"]) + 2 * max(
        e.size for e in entries)
    assert len(entries) < 5  # evictions happened


def test_a_real_process_lists_and_refuses_a_bad_cap(tokenized):
    _entry(tokenized, "a" * 32, 1, time.time(), {"stage": "sft", "dataset": "alpaca_en_demo"})
    env = {**os.environ, "LF_ENGINE_CACHE": str(tokenized.parent), "LF_ENGINE_CACHE_MAX_GB": "ten"}
    root = Path(__file__).resolve().parents[2]
    bad = subprocess.run([sys.executable, "-m", "engine", "cache", "--prune"], cwd=root, env=env,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == EXIT_USER_ERROR and "Traceback" not in bad.stderr
    assert "error: LF_ENGINE_CACHE_MAX_GB='ten' is not a size in GB" in bad.stderr
    listed = subprocess.run([sys.executable, "-m", "engine", "cache"], cwd=root,
                            env={**env, "LF_ENGINE_CACHE_MAX_GB": "5"}, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "alpaca_en_demo" in listed.stdout and "1 entry, 1.0 MB" in listed.stdout
    assert "5 GB cap" in listed.stdout


# ------------------------------------------------------------------------------- scratch folders of killed processes
def test_scratch_folders_of_killed_processes_are_removed(tmp_path, monkeypatch, caplog):
    from engine.data import stream

    prefix = stream.SCRATCH_PREFIX
    dead = tmp_path / f"{prefix}dead"  # its process was killed: the lock file is there, nobody holds it
    dead.mkdir()
    (dead / cache_prune.SCRATCH_LOCK).touch()
    (dead / "tmp1.arrow").write_bytes(b"\0" * 1000)
    live = tmp_path / f"{prefix}live"
    live.mkdir()
    old_engine, young = tmp_path / f"{prefix}old", tmp_path / f"{prefix}young"  # no lock file: an older engine
    old_engine.mkdir()
    young.mkdir()
    os.utime(old_engine, (time.time() - 2 * 86400,) * 2)
    holder = _lock_in_another_process(live / cache_prune.SCRATCH_LOCK, "LOCK_EX")
    minute_ago = time.time() - cache_prune.YOUNG_S - 1
    for folder in (dead, live):
        os.utime(folder, (minute_ago, minute_ago))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(stream, "_SCRATCH", [])
    held = list(cache_prune._SCRATCH_HELD)
    try:
        with caplog.at_level(logging.INFO, logger="engine.data.cache_prune"):
            mine = stream._scratch_dir()
    finally:
        holder.kill()
        holder.wait()
    assert {p.name for p in tmp_path.iterdir()} == {mine.name, live.name, young.name}
    assert "Removed 2 tokenization scratch folders" in caplog.text
    assert cache_prune.claim_scratch(live, prefix) == 0  # a second process: this one's folder is held
    assert mine.exists()
    for fd in cache_prune._SCRATCH_HELD[len(held):]:
        os.close(fd)
    del cache_prune._SCRATCH_HELD[len(held):]


def test_the_listing_shows_an_entry_whose_meta_names_its_source_oddly(tokenized):
    """`lf-engine cache` listed each entry's source as its meta wrote it: a meta whose files check out but whose
    `source` is no object (a damaged or hand-edited file) ended the listing with an AttributeError traceback, and
    datasets given as a list with a TypeError. Such an entry is listed, its source shown as unknown or as text."""
    for key, source in (("a1", ["not", "an", "object"]), ("b2", {"dataset": ["x", "y"], "stage": "sft"})):
        folder = _entry(tokenized, key, 0.01, time.time())
        meta = json.loads((folder / cache_prune.META).read_text())
        (folder / cache_prune.META).write_text(json.dumps({**meta, "source": source}))
    rows = cache_prune.describe(tokenized)
    assert [r["source"] for r in rows if r["key"] == "a1"] == [{}]
    listing = cache_prune.format_listing(tokenized, rows, None)
    assert "['x', 'y']" in listing and "2 entries" in listing


@pytest.mark.parametrize("where", ["root", "tokenized", "above"])
def test_cli_on_a_cache_that_is_a_file_says_so(tmp_path, monkeypatch, capsys, where):
    # LF_ENGINE_CACHE naming a file (or a folder whose `tokenized` is one) was listed as "0 entries, 0.0 KB in
    # <file>/tokenized" and cleared as "removed 0 entries": a cache that can never be written, described as empty
    root = {"root": tmp_path / "cf", "tokenized": tmp_path / "c", "above": tmp_path / "f" / "cache"}[where]
    blocker = {"root": root, "tokenized": root / "tokenized", "above": tmp_path / "f"}[where]
    blocker.parent.mkdir(parents=True, exist_ok=True)
    blocker.write_text("x")
    monkeypatch.setenv("LF_ENGINE_CACHE", str(root))
    for argv in (["cache"], ["cache", "--clear"], ["cache", "--prune"], ["cache", "--json"]):
        assert main(argv) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert f"{blocker} is not a folder" in err and "Point LF_ENGINE_CACHE at a folder" in err
        assert "Traceback" not in err
    assert blocker.read_text() == "x"
