"""A run folder's rank records (ranks/*.json, ranks/*.error), which the board reads to stop a run and the engine to
report another rank's failure, are read only as regular files of at most 1 MB, and their values are checked: a named
pipe there held the board's abort for good, a sparse file of hundreds of MB was read whole, and a pid, start time
or error time that was no number ended the abort (or the run's report) with a ValueError/TypeError traceback."""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import tracemalloc

import pytest

from engine.ranks import RANKS_DIR, live_ranks, rank_errors, read_ranks, signal_ranks


def _within(fn, pipe=None, seconds=10):
    out, done = [], threading.Event()
    threading.Thread(target=lambda: (out.append(fn()), done.set()), daemon=True).start()
    if not done.wait(seconds):
        if pipe is not None:
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))  # lets the reader go
        done.wait(10)
        pytest.fail(f"waited on {pipe} for {seconds} s")
    return out[0]


def test_a_pipe_among_the_records_is_passed_over(tmp_path):
    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    os.mkfifo(ranks / "1.json")
    os.mkfifo(ranks / "1.error")
    (ranks / "0.json").write_text(json.dumps({"rank": 0, "pid": 11}))
    assert [r["pid"] for r in _within(lambda: read_ranks(tmp_path), ranks / "1.json")] == [11]
    assert _within(lambda: rank_errors(tmp_path, since=0), ranks / "1.error") == []


def test_an_outsized_record_is_not_read_whole(tmp_path):
    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    for name in ("1.json", "1.error"):
        with open(ranks / name, "wb") as fh:
            fh.truncate(256 << 20)  # sparse: no disk taken
    tracemalloc.start()
    try:
        assert read_ranks(tmp_path) == [] and rank_errors(tmp_path, since=0) == []
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"{peak:,} bytes held"


def test_values_that_are_no_numbers_name_no_process(tmp_path):
    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    host = socket.gethostname()
    (ranks / "0.json").write_text(json.dumps({"rank": 0, "pid": "x", "host": host}))
    (ranks / "1.json").write_text(json.dumps({"rank": 1, "pid": os.getpid(), "host": host, "started": [1]}))
    (ranks / "2.json").write_text(json.dumps({"rank": 2, "pid": 1, "host": host}))
    (ranks / "0.error").write_text(json.dumps({"rank": 0, "error": "boom", "at": "soon"}))
    (ranks / "1.error").write_text(json.dumps({"rank": 1, "error": "real", "at": time.time()}))
    assert live_ranks(tmp_path) == []  # a start time that is no number names no process either
    assert signal_ranks(tmp_path, 0) == 0
    assert [e["error"] for e in rank_errors(tmp_path, since=0)] == ["real"]


def test_a_rank_writes_its_records_through_no_planted_link(tmp_path, monkeypatch):
    """The records' temp files had predictable names (``.<rank>.<pid>.tmp``) and were opened plainly: a link planted
    under one had the record written into any file the user can write; a link planted as ``ranks`` took the records
    to a folder elsewhere."""
    from engine.ranks import record_rank, record_rank_error
    from engine.run_identity import release_run_folder

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    victim, elsewhere = tmp_path / "victim.txt", tmp_path / "elsewhere"
    victim.write_text("mine")
    elsewhere.mkdir()
    run = tmp_path / "run"
    (run / RANKS_DIR).mkdir(parents=True)
    for name in (f".1.{os.getpid()}.tmp", f".1.{os.getpid()}.error.tmp"):
        (run / RANKS_DIR / name).symlink_to(victim)
    try:
        assert record_rank(run) == run / RANKS_DIR / "1.json"
        record_rank_error(run, "boom")
        assert victim.read_text() == "mine"
        assert read_ranks(run)[0]["pid"] == os.getpid()
        assert [e["error"] for e in rank_errors(run, since=0)] == ["boom"]

        other = tmp_path / "other"
        other.mkdir()
        (other / RANKS_DIR).symlink_to(elsewhere, target_is_directory=True)
        assert record_rank(other) == other / RANKS_DIR / "1.json"
        assert list(elsewhere.iterdir()) == [] and not (other / RANKS_DIR).is_symlink()
    finally:
        release_run_folder()


def test_writing_a_record_never_follows_a_link_under_its_temp_name_nor_leaves_one(tmp_path, monkeypatch):
    """A rank wrote its record to ``ranks/.<rank>.<pid>.tmp`` by name, then renamed it: a link planted there (a run
    folder from elsewhere) had the file it pointed to overwritten with the record, and a full disk left the temp file
    behind. The records now go through the engine's atomic write."""
    from engine.ranks import record_rank, record_rank_error
    from engine.run_identity import release_run_folder
    from tests.full_disk import fill_disk

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    ranks = tmp_path / "run" / RANKS_DIR
    ranks.mkdir(parents=True)
    for name in (f".1.{os.getpid()}.tmp", f".1.{os.getpid()}.error.tmp"):
        (ranks / name).symlink_to(mine)
    assert record_rank(tmp_path / "run") == ranks / "1.json"
    record_rank_error(tmp_path / "run", "rank 1 ran out of memory")
    assert mine.read_text() == "keep me\n"
    assert json.loads((ranks / "1.json").read_text())["pid"] == os.getpid()
    assert json.loads((ranks / "1.error").read_text())["error"] == "rank 1 ran out of memory"

    for name in ranks.iterdir():
        name.unlink()
    fill_disk(monkeypatch, str(ranks))
    assert record_rank(tmp_path / "run") is None
    record_rank_error(tmp_path / "run", "again")
    monkeypatch.undo()
    release_run_folder()
    assert list(ranks.iterdir()) == []


def test_failure_records_whose_rank_is_no_number_are_sorted_all_the_same(tmp_path):
    """rank_errors sorted the failures by their `rank` as written: a damaged record's rank (text, null) beside a
    number ended the run's report of another rank's failure with a TypeError traceback (read_ranks had been fixed)."""
    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    now = time.time()
    for name, rank in (("2", 2), ("x", "x"), ("n", None), ("1", 1)):
        (ranks / f"{name}.error").write_text(json.dumps({"rank": rank, "error": f"e{name}", "at": now}))
    assert [e["error"] for e in rank_errors(tmp_path, since=0)][-2:] == ["e1", "e2"]
