"""A resumed run drops the lines its event files hold for the steps it repeats, reading them one line at a time: the
files were read whole (a long run's events.jsonl, a sparse run of zero bytes a crash left: hundreds of MB held), and
a named pipe in their place held the resume for good."""

from __future__ import annotations

import json
import os
import threading
import tracemalloc

import pytest

from engine.resumed_events import forget_steps_after


def _log(step):
    return (json.dumps({"event": "log", "step": step, "loss": 1.0}) + "\n").encode()


def test_a_sparse_line_is_kept_as_it_is_without_being_held(tmp_path):
    events = tmp_path / "events.jsonl"
    zeros = 256 << 20
    with open(events, "wb") as fh:
        fh.write(_log(1) + _log(2))
        fh.truncate(fh.tell() + zeros)  # a run of zero bytes, as a crash can leave (no disk taken)
        fh.seek(0, os.SEEK_END)
        fh.write(b"\n" + _log(3) + _log(4))
    before = events.stat().st_size
    tracemalloc.start()
    try:
        assert forget_steps_after(tmp_path, 2) == 2
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 40 << 20, f"{peak:,} bytes held"
    assert events.stat().st_size == before - 2 * len(_log(3))
    with open(events, "rb") as fh:
        assert fh.read(len(_log(1) + _log(2))) == _log(1) + _log(2)
        fh.seek(-2, os.SEEK_END)
        assert fh.read() == b"\0\n"  # the zeros' line ends the file: the steps after 2 are gone


def test_the_zeros_come_through_byte_for_byte(tmp_path):
    events = tmp_path / "events.jsonl"
    blob = b"\0" * (9 << 20)  # past the 4 MB line bound: copied through in pieces
    events.write_bytes(_log(1) + blob + b"\n" + _log(2) + _log(5))
    assert forget_steps_after(tmp_path, 2) == 1
    assert events.read_bytes() == _log(1) + blob + b"\n" + _log(2)


def test_a_file_with_nothing_to_drop_is_not_written(tmp_path):
    events = tmp_path / "events.jsonl"
    events.write_bytes(_log(1) + _log(2))
    inode = events.stat().st_ino
    assert forget_steps_after(tmp_path, 2) == 0
    assert events.stat().st_ino == inode


def test_a_pipe_in_place_of_the_events_is_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / "events.jsonl")
    out, done = [], threading.Event()
    threading.Thread(target=lambda: (out.append(forget_steps_after(tmp_path, 2)), done.set()), daemon=True).start()
    if not done.wait(10):
        os.close(os.open(tmp_path / "events.jsonl", os.O_WRONLY | os.O_NONBLOCK))  # lets the reader go
        done.wait(10)
        pytest.fail("the resume waited on a named pipe")
    assert out == [0]
