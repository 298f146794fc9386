"""A board-started chat worker ends once no board has held its workspace for the grace period."""

from __future__ import annotations

import fcntl
import threading
import time

import pytest

from app.workspace import Workspace, WorkspaceBusy
from engine.infer.board_watch import BoardWatch, board_holds


def test_board_holds_sees_an_exclusive_flock_from_another_open_file(tmp_path):
    lock = tmp_path / ".board.lock"
    assert board_holds(lock) is False  # no file: no board
    lock.write_text("123")
    assert board_holds(lock) is False  # a file nobody holds
    with open(lock, "a+") as board:
        fcntl.flock(board, fcntl.LOCK_EX | fcntl.LOCK_NB)
        assert board_holds(lock) is True
        assert board_holds(lock) is True  # the probe leaves the board's lock as it was
        fcntl.flock(board, fcntl.LOCK_UN)
    assert board_holds(lock) is False


def test_a_workspace_lock_is_seen_and_not_disturbed_by_the_probe(tmp_path):
    ws = Workspace(tmp_path / "ws")
    held = ws.lock()
    try:
        assert board_holds(ws.lock_path) is True
        with pytest.raises(WorkspaceBusy):
            Workspace(tmp_path / "ws").lock(wait=0.1)  # still one board per workspace
    finally:
        held.close()
    assert board_holds(ws.lock_path) is False


def test_a_board_starting_during_a_probe_waits_for_it_instead_of_refusing(tmp_path):
    ws = Workspace(tmp_path / "ws")
    ws.lock().close()
    probe = open(ws.lock_path)  # a worker's probe holding the shared lock longer than any real probe does
    fcntl.flock(probe, fcntl.LOCK_SH | fcntl.LOCK_NB)
    threading.Timer(0.3, probe.close).start()
    with pytest.raises(WorkspaceBusy):
        ws.lock(wait=0.0)
    started = time.monotonic()
    handle = ws.lock(wait=2.0)
    assert 0.1 < time.monotonic() - started < 2.0
    assert board_holds(ws.lock_path) is True
    handle.close()


def test_the_watch_fires_once_after_the_grace_and_a_returning_board_resets_it(clock):
    held, gone = {"value": True}, []
    watch = BoardWatch("unused", 600, gone.append, clock=clock, probe=lambda path: held["value"])
    assert watch.poll() is False and watch.gone_since is None
    held["value"] = False
    assert watch.poll() is False and watch.gone_since == 1000.0
    clock.now += 599
    assert watch.poll() is False and gone == []
    held["value"] = True  # a restarted board took the workspace again
    clock.now += 5
    assert watch.poll() is False and watch.gone_since is None
    held["value"] = False
    assert watch.poll() is False
    clock.now += 600
    assert watch.poll() is True and gone == [600]
    clock.now += 600
    assert watch.poll() is True and gone == [600]  # once


def test_a_system_that_cannot_tell_never_stops_the_server(clock):
    gone = []
    watch = BoardWatch("unused", 1, gone.append, clock=clock, probe=lambda path: None)
    for _ in range(5):
        clock.now += 100
        assert watch.poll() is False
    assert gone == []


def test_the_watch_thread_calls_back_when_the_lock_is_free(tmp_path):
    lock = tmp_path / ".board.lock"
    board = open(lock, "a+")
    fcntl.flock(board, fcntl.LOCK_EX | fcntl.LOCK_NB)
    fired = threading.Event()
    watch = BoardWatch(lock, 0.4, lambda seconds: fired.set()).start()
    try:
        assert not fired.wait(1.0)  # a board holds it: nothing happens
        board.close()
        assert fired.wait(5.0)
    finally:
        watch.stop()
