"""Chat workers get a per-worker key through the environment, and a restarted board re-adopts and unloads them."""

from __future__ import annotations

import hashlib
import sys
import time

from app import chat_workers
from app.api import Automation
from app.context import Board
from app.jobs import JobManager
from app.tabs import chat
from tests.app.conftest import FAKE_ENGINE

LONG = {"model_name_or_path": "demo", "template": "chatml", "fake_steps": 4000, "fake_sleep": 0.05}


def wait_ready(board, run_id, timeout=60):
    deadline = time.time() + timeout
    while not board.jobs.folder(run_id).info().get("ready"):
        assert time.time() < deadline, board.jobs.folder(run_id).info()
        time.sleep(0.05)
    return board.jobs.folder(run_id).info()


def start_worker(board, side="main"):
    run_id = board.jobs.new_run_id("chat")
    return board.jobs.submit("chat", LONG, run_id=run_id, args=["--host", "127.0.0.1", "--port", "0"],
                             meta={"side": side}, env=chat_workers.worker_env(board, run_id))


def test_worker_key_reaches_the_process_by_environment_only(board):
    run_id = start_worker(board)
    info = wait_ready(board, run_id)
    key = chat_workers.worker_key(board, run_id)
    assert info["key_sha256"] == hashlib.sha256(key.encode()).hexdigest()
    assert len(key) == 64 and key != chat_workers.worker_key(board, run_id + "x")
    folder = board.jobs.folder(run_id).path
    for path in folder.rglob("*"):
        assert key not in path.read_text(errors="replace"), path  # not in argv (run.json command), config or log
    assert chat.unload(board, {"main": run_id}) == [run_id]


def test_api_chat_runs_get_their_key_too(board, monkeypatch):
    from app import forms

    checked = forms.validate({"model_name_or_path": "demo", "template": "chatml"}, "api")
    monkeypatch.setattr(forms, "validate", lambda mapping, command, run_folder=None: checked)  # keep the fake engine running
    monkeypatch.setattr(forms, "resolved_mapping", lambda cfg, out: {**LONG, "output_dir": str(out)})
    run_id = Automation(board).submit_run("model_name_or_path: demo\ntemplate: chatml\n", "chat")
    info = wait_ready(board, run_id)
    assert info["key_sha256"] == hashlib.sha256(chat_workers.worker_key(board, run_id).encode()).hexdigest()
    chat.unload(board, {})


def test_a_restarted_board_adopts_and_unloads_the_workers_it_left(workspace):
    first = Board(workspace, JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)], kill_grace=1.0,
                                        poll_interval=0.05).start())
    main, base = start_worker(first, "main"), start_worker(first, "base")
    wait_ready(first, main), wait_ready(first, base)
    first.jobs.shutdown()  # the board stops; its workers keep running

    second = Board(workspace, JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)], kill_grace=1.0,
                                         poll_interval=0.05).start())
    try:
        assert set(second.jobs.running()) == {main, base}
        assert chat_workers.adopt(second) == {"main": main, "base": base}
        # the page of the new board knows no servers (its browser state is empty): Unload still frees them
        assert set(chat.unload(second, {})) == {main, base}
        for run_id in (main, base):
            assert second.jobs.wait(run_id, 60) == "aborted"
        assert chat_workers.live_chat_runs(second) == []
        assert chat.unload(second, {}) == []
    finally:
        second.jobs.shutdown()


def test_load_after_unload_does_not_pile_up_servers(board):
    first = start_worker(board)
    stray = start_worker(board)  # e.g. left by another tab
    wait_ready(board, first), wait_ready(board, stray)
    assert set(chat.unload(board, {"main": first})) == {first, stray}


def test_the_chat_line_names_what_is_served_in_the_page_language(board):
    """A page that finds a running worker says which model and adapter it serves (the top bar, as a page opens, shows
    no adapter), and says it in the page's language: the line was composed on load, before the page's language
    was known, and a Chinese page kept it in English."""
    from app.ui import build_ui

    run_id = board.jobs.new_run_id("chat")
    board.jobs.submit("chat", {**LONG, "adapter_name_or_path": "/ws/runs/r1/checkpoint-84"}, run_id=run_id,
                      args=["--host", "127.0.0.1", "--port", "0"], meta={"side": "main"},
                      env=chat_workers.worker_env(board, run_id))
    wait_ready(board, run_id)
    demo = build_ui(board)
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    status = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-chat-status")
    fns = [f for f in demo.fns.values() if status in f.outputs and (lang._id, "change") in f.targets
           and any(t[1] == "load" for t in f.targets)]  # (app.page_memory's restore also writes it: not on load)
    assert len(fns) == 1, "the chat line is not composed again when the page's language is set"
    fn = fns[0]
    assert any(t[1] == "load" for t in fn.targets)

    def call(servers, code):
        out = fn.fn(*[servers if b is not lang else code for b in fn.inputs])
        return out[fn.outputs.index(status)], out

    line, out = call({}, "zh")  # a new browser: the worker is adopted
    assert line.startswith("已重新连接") and "demo" in line and "/ws/runs/r1/checkpoint-84" in line, line
    servers = out[1]
    assert servers == {"main": run_id}
    line, _ = call(servers, "en")  # the page already knew it: the same state, in English now
    assert line.startswith("Ready: demo with adapter /ws/runs/r1/checkpoint-84"), line
    assert chat.unload(board, servers) == [run_id]
