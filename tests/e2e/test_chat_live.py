"""The Chat tab's path with the real engine: a chat server subprocess for the demo model, a streamed reply,
two servers answering side by side, and unload."""

from __future__ import annotations

import threading
import time

import pytest

from app import forms
from app.chat_client import ChatError, merge_streams, stream_chat
from app.chat_workers import client_of
from app.context import Board
from app.jobs import JobManager
from app.tabs import chat
from app.workspace import Workspace

pytestmark = pytest.mark.slow


def wait_ready(board: Board, servers: dict[str, str], timeout: float = 300) -> dict[str, dict]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        live = chat.live_servers(board, servers)
        if len(live) == len(servers) and all(s.get("ready") and s.get("port") for s in live.values()):
            return live
        for run_id in servers.values():
            status = board.jobs.status(run_id)
            assert status["status"] in ("queued", "running"), status["error"]
        time.sleep(0.5)
    raise AssertionError("the chat servers did not become ready")


def test_stream_compare_and_unload(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    board = Board(ws, JobManager(ws.runs_dir, poll_interval=0.2).start())
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers = {}
    try:
        servers, problems = chat.start_servers(board, top, {"max_new_tokens": 16, "temperature": 0.7}, compare=False)
        assert not problems
        # a second server for the same base model stands in for the "base" side of the comparison
        base, _ = chat.start_servers(board, top, {"max_new_tokens": 16}, compare=False)
        servers["base"] = base["main"]
        live = wait_ready(board, servers)
        messages = chat.openai_messages([{"role": "user", "content": "Who are you?"}], "Answer briefly.")
        url, key = client_of(board, live["main"])
        with pytest.raises(ChatError, match="API key"):  # the worker requires its key
            list(stream_chat(url, messages, max_tokens=4))
        pieces = list(stream_chat(url, messages, max_tokens=16, temperature=0.7, api_key=key))
        assert pieces and all("content" in p for p in pieces)
        assert "".join(p["content"] for p in pieces).strip()

        stop = threading.Event()
        streams = {
            side: stream_chat(*client_of(board, s)[:1], messages, max_tokens=12, stop=stop,
                              api_key=client_of(board, s)[1])
            for side, s in live.items()
        }
        got = {"main": "", "base": ""}
        ended = set()
        for side, delta in merge_streams(streams, stop):
            assert not isinstance(delta, ChatError), delta
            if delta is None:
                ended.add(side)
            else:
                got[side] += delta.get("content", "")
        assert ended == {"main", "base"} and got["main"] and got["base"]

        with pytest.raises(ChatError, match="temperature"):
            list(stream_chat(url, messages, temperature=9, api_key=key))
    finally:
        stopped = chat.unload(board, servers)
        for run_id in servers.values():
            assert board.jobs.wait(run_id, 60) == "aborted"
        board.jobs.shutdown()
    assert set(stopped) == set(servers.values())
