"""The Chat tab's path with the real engine: chat server subprocesses for the demo model, a streamed reply, two
servers answering side by side, side-by-side chat with a picture, and unload.

With a picture: two demo-vlm chat workers get the same uploaded image (as a data URL, the board's display path taken
out) and both answer; a text-only worker (the demo model's) refuses the picture with a clear message. One board and
one unload for both paths: the demo worker that streams is the text-only worker the picture is refused by (a worker
of its own was started for that before)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from app import chat_media, forms
from app.chat_client import ChatError, merge_streams, stream_chat
from app.chat_workers import client_of
from app.context import Board
from app.jobs import JobManager
from app.tabs import chat
from app.workspace import Workspace

pytestmark = pytest.mark.slow

PICTURE = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo_vlm" / "green_triangle.png"


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


def check_text(board: Board, live: dict[str, dict]) -> None:
    """A streamed reply (the worker requires its key), two servers streaming side by side, a bad temperature."""
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


def check_picture(board: Board, vlm: dict[str, str], live: dict[str, dict], text_only: dict, uploads: Path) -> None:
    """Both demo-vlm workers answer about the same uploaded picture; the text-only worker (its live status)
    refuses it."""
    takes = chat_media.model_media(board, vlm["main"])
    assert "image" in takes and chat_media.model_media(board, text_only["id"]) == ()
    checked = chat_media.checked_uploads([str(uploads / "green.png")], takes, board.max_upload_mb, uploads)
    convo = [{"role": "user", "content": chat_media.user_content("What is in the picture?", checked)}]
    messages = chat.openai_messages(convo, "")
    stop = threading.Event()
    streams = {side: stream_chat(client_of(board, live[side])[0], messages, max_tokens=8, stop=stop,
                                 api_key=client_of(board, live[side])[1]) for side in ("main", "base")}
    got = {"main": "", "base": ""}
    for side, delta in merge_streams(streams, stop):
        assert not isinstance(delta, ChatError), delta
        if isinstance(delta, dict):
            got[side] += delta.get("content", "")
    assert got["main"].strip() and got["base"].strip()
    url, key = client_of(board, text_only)
    with pytest.raises(ChatError, match=r"text-only|not supported"):
        list(stream_chat(url, messages, max_tokens=4, api_key=key))


def test_stream_compare_a_picture_side_by_side_and_unload(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    board = Board(ws, JobManager(ws.runs_dir, poll_interval=0.2).start())
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "green.png").write_bytes(PICTURE.read_bytes())
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers: dict[str, str] = {}
    vlm: dict[str, str] = {}
    try:
        servers, problems = chat.start_servers(board, top, {"max_new_tokens": 16, "temperature": 0.7}, compare=False)
        assert not problems
        # a second server for the same base model stands in for the "base" side of the comparison
        base, _ = chat.start_servers(board, top, {"max_new_tokens": 16}, compare=False)
        servers["base"] = base["main"]
        vlm_top = forms.TopValues.of("demo-vlm", "lora", "", "qwen2_vl")
        vlm, problems = chat.start_servers(board, vlm_top, {"max_new_tokens": 8, "temperature": 0.01}, compare=True)
        assert not problems and set(vlm) == {"main", "base"}
        live = wait_ready(board, servers)
        check_text(board, live)
        check_picture(board, vlm, wait_ready(board, vlm), live["main"], uploads)
    finally:
        every = {**servers, **{f"vlm-{side}": run_id for side, run_id in vlm.items()}}
        stopped = chat.unload(board, every)
        for run_id in every.values():
            assert board.jobs.wait(run_id, 60) == "aborted"
        board.jobs.shutdown()
    assert set(stopped) == set(every.values())
