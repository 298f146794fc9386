"""A run folder's files replaced by a named pipe or a link to a device while the board reads them: opening a pipe
waited for a writer forever, and reading /dev/zero never ended, so the board's tick (and the page that asked) hung.
Such a file now reads as unreadable at once."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from engine.runs import EVENTS_FILE, LOG_FILE, RUN_FILE, EventReader, RunFolder, TextFollower, read_json, tail_text


def within(seconds: float, fn, *pipes: Path):
    """``fn()``'s result if it returns within ``seconds``; else fail (and let the reader go by ending its pipes)."""
    result, errors, done = [], [], threading.Event()

    def run():
        try:
            result.append(fn())
        except BaseException as err:  # raised again in the test's thread
            errors.append(err)
        done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(seconds):
        for pipe in pipes:  # a writer that closes at once ends the blocked open with end-of-file
            os.close(os.open(pipe, os.O_WRONLY | os.O_NONBLOCK))
        done.wait(5)
        pytest.fail(f"{getattr(fn, '__name__', fn)} still waited on a pipe after {seconds} s")
    if errors:
        raise errors[0]
    return result[0]


@pytest.fixture
def piped(tmp_path):
    folder = tmp_path / "run-1"
    folder.mkdir()
    for name in (RUN_FILE, EVENTS_FILE, LOG_FILE):
        os.mkfifo(folder / name)
    return folder


def test_a_pipe_in_place_of_run_files_reads_as_nothing(piped):
    pipes = [piped / n for n in (RUN_FILE, EVENTS_FILE, LOG_FILE)]
    assert within(5, lambda: read_json(piped / RUN_FILE), *pipes) == {}
    assert within(5, lambda: RunFolder(piped).info(), *pipes) == {}
    assert within(5, lambda: RunFolder(piped).log_tail(), *pipes) == ""
    assert within(5, lambda: EventReader(piped / EVENTS_FILE).read_new(), *pipes) == []
    assert within(5, lambda: TextFollower(piped / LOG_FILE).read_new(), *pipes) == ""


def test_devices_and_pipes_are_refused_by_the_reader(tmp_path):
    from engine.runs import open_regular, read_regular

    (tmp_path / "zero").symlink_to("/dev/zero")
    os.mkfifo(tmp_path / "pipe")
    for name in ("zero", "pipe"):
        with pytest.raises(OSError, match="not a regular file"):
            within(5, lambda name=name: read_regular(tmp_path / name), tmp_path / "pipe")
    assert tail_text(tmp_path / "zero") == ""
    assert EventReader(tmp_path / "zero").read_new() == []
    regular = tmp_path / "events.jsonl"
    regular.write_bytes(b'{"a": 1}\n{"b"')
    (tmp_path / "link").symlink_to(regular)  # a link to a regular file is read as before
    assert EventReader(tmp_path / "link").read_new() == [{"a": 1}]
    assert read_regular(regular, 1, 3) == b'"a"'
    with open_regular(regular) as fh:
        assert fh.read() == regular.read_bytes()


def test_an_overlong_events_line_is_skipped_not_kept(tmp_path, monkeypatch):
    """A line with no end (a file from elsewhere, a crash's run of zero bytes) was kept whole as the partial line and
    copied again with every chunk read (quadratic: minutes of a core per GB); it is now dropped past the bound."""
    from engine import runs

    monkeypatch.setattr(runs, "MAX_EVENT_LINE", 1000, raising=False)
    path = tmp_path / "events.jsonl"
    path.write_bytes(b'{"step": 1}\n' + b"\0" * 2500)
    reader = EventReader(path)
    assert list(reader.iter_new(chunk_bytes=600)) == [{"step": 1}]
    assert len(reader._partial) <= 1000
    with open(path, "ab") as fh:
        fh.write(b"\0" * 3000 + b'\n{"step": 2}\n{"st')
    assert reader.read_new() == [{"step": 2}]
    with open(path, "ab") as fh:
        fh.write(b'ep": 3}\n')
    assert reader.read_new() == [{"step": 3}]


def test_a_huge_run_json_is_not_read_whole(tmp_path):
    """A run.json grown past any the engine writes (sparse here: 512 MB of nothing on disk) was read whole into the
    board's memory, and again on every tick, since it never parses and so is never cached."""
    import tracemalloc

    folder = tmp_path / "run-1"
    folder.mkdir()
    with open(folder / RUN_FILE, "wb") as fh:
        fh.write(b'{"id": "run-1", "status": "running"')
        fh.truncate(512 << 20)
    tracemalloc.start()
    try:
        assert RunFolder(folder).info() == {} and read_json(folder / RUN_FILE) == {}
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


def test_an_outsized_dataset_info_is_refused_without_being_read_whole(tmp_path):
    """A dataset_info.json past any real one (sparse: 256 MB of nothing on disk) was read whole and parsed, in the
    board's own process when it lists datasets or checks a config (1 GB took 2.3 GB and 24 s)."""
    import tracemalloc

    from app import catalog
    from engine.data.errors import DatasetError
    from engine.data.registry import load_dataset_info

    with open(tmp_path / "dataset_info.json", "wb") as fh:
        fh.write(b'{"rows": {"file_name": "rows.json"}}')
        fh.truncate(256 << 20)
    tracemalloc.start()
    try:
        with pytest.raises(DatasetError, match=r"dataset_info\.json is 268,435,456 bytes, more than any "):
            load_dataset_info(tmp_path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 48 << 20
    found, note = catalog.datasets(tmp_path)  # the board's dataset picker says so
    assert found == {} and "268,435,456 bytes" in note
