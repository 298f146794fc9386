"""Plain HTTP calls to the automation API do not pile up gradio sessions (0.8 MB each) in the board."""

from __future__ import annotations

import json
import socket
import urllib.request

import gradio as gr

from app import api_sessions
from app.api import register


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _call(url: str, route: str, data: list) -> str:
    body = json.dumps({"data": data}).encode()
    request = urllib.request.Request(f"{url}gradio_api/call/{route}", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        event_id = json.loads(response.read())["event_id"]
    with urllib.request.urlopen(f"{url}gradio_api/call/{route}/{event_id}", timeout=60) as response:
        return response.read().decode()


def test_api_only_sessions_are_dropped_and_ui_sessions_kept(board, monkeypatch):
    monkeypatch.setattr(api_sessions, "KEEP_SECONDS", 0.0)
    with gr.Blocks() as demo:
        gr.Textbox(label="a component, so each session has config to copy")
        register(board)
    demo.queue()
    _, url, _ = demo.launch(server_port=_free_port(), prevent_thread_lock=True, quiet=True)
    try:
        holder = demo.state_holder
        browser = holder["a-browser-tab"]  # a UI session (never calls the API endpoints)
        for _ in range(15):
            assert "event: complete" in _call(url, "list_runs", [])
        sessions = set(holder.session_data)
        assert "a-browser-tab" in sessions and holder["a-browser-tab"] is browser
        assert len(sessions) <= 3, len(sessions)  # 15 plain calls, 15 session hashes: all but the latest dropped
    finally:
        demo.close()


def test_sessions_are_kept_while_recent():
    class Holder:
        def __init__(self):
            import threading

            self.lock = threading.Lock()
            self.session_data = {"api": 1, "ui": 2}
            self.time_last_used = {"api": 0, "ui": 0}

    class Blocks:
        state_holder = Holder()

    class Request:
        session_hash = "api"

    tracker = api_sessions.ApiSessions(Blocks(), keep_seconds=60)
    tracker.seen(Request())
    assert set(Blocks.state_holder.session_data) == {"api", "ui"}  # recent: kept
    tracker.keep_seconds = -1
    tracker.seen(None)
    assert set(Blocks.state_holder.session_data) == {"ui"}


def test_a_fast_caller_keeps_at_most_max_sessions():
    """Idle time alone does not bound a client calling many times a second: the least recently used API sessions
    beyond the cap go at once, never the current call's, and a session in use stays (moved to the end)."""
    import threading

    class Holder:
        def __init__(self):
            self.lock = threading.Lock()
            self.session_data = {"ui": 0}
            self.time_last_used = {"ui": 0}

    class Blocks:
        state_holder = Holder()

    class Request:
        def __init__(self, session_hash):
            self.session_hash = session_hash

    holder = Blocks.state_holder
    tracker = api_sessions.ApiSessions(Blocks(), keep_seconds=3600, max_sessions=4)
    for i in range(50):
        name = "client" if i % 5 == 0 else f"call-{i}"  # a gradio_client polling with its one session, and curls
        holder.session_data[name] = i
        holder.time_last_used[name] = i
        tracker.seen(Request(name))
        assert name in holder.session_data  # the current call's session is never dropped
        assert len(holder.session_data) <= 1 + 4  # the UI session and at most four API sessions
    assert "ui" in holder.session_data and set(holder.time_last_used) == set(holder.session_data)
    assert list(tracker.last_call) == ["call-46", "call-47", "call-48", "call-49"]
    tracker.seen(Request("client"))  # a dropped session comes back with its next call
    assert "client" in tracker.last_call and len(tracker.last_call) == 4


def test_sessions_of_tabs_closed_long_ago_are_dropped_by_an_open_tabs_tick(board):
    """gradio keeps every browser tab's session (0.8 MB of page config) until 10,000 exist, even after the tab
    closed: each page load grew the board for good. An open tab's tick now drops the sessions gradio marked closed
    an hour ago, and any silent for a day; a recently closed tab (its connection may come back) and open ones stay."""
    import datetime

    from app import topbar

    with gr.Blocks() as demo:
        bar = topbar.build(board)
        topbar.wire(bar, board, demo)
    demo.queue()
    demo.launch(server_port=_free_port(), prevent_thread_lock=True, quiet=True)
    try:
        holder = demo.state_holder
        now = datetime.datetime.now()
        ages = {"open": 0, "closed-now": 60, "closed-long": 2 * 3600, "silent-day": 25 * 3600, "open-hour": 3600}
        for name, seconds in ages.items():
            holder[name].is_closed = name.startswith("closed")
            holder.time_last_used[name] = now - datetime.timedelta(seconds=seconds)
        [tick] = [fn for fn in demo.fns.values() if getattr(fn.fn, "__name__", "") == "on_refresh"]
        tick.fn([], {}, "en", "", None)  # known checkpoints, what the page shows, the language, picker, run followed
        assert sorted(holder.session_data) == ["closed-now", "open", "open-hour"]
        assert sorted(holder.time_last_used) == ["closed-now", "open", "open-hour"]
    finally:
        demo.close()
