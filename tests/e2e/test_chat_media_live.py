"""Side-by-side chat with a picture: two demo-vlm chat workers get the same uploaded image (as a data URL, the
board's display path taken out) and both answer; a text-only worker refuses the picture with a clear message."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from app import chat_media, forms
from app.chat_client import ChatError, merge_streams, stream_chat
from app.chat_workers import client_of
from app.context import Board
from app.jobs import JobManager
from app.tabs import chat
from app.workspace import Workspace
from tests.e2e.test_chat_live import wait_ready

pytestmark = pytest.mark.slow

PICTURE = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo_vlm" / "green_triangle.png"


def test_side_by_side_with_a_picture(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    board = Board(ws, JobManager(ws.runs_dir, poll_interval=0.2).start())
    uploads = tmp_path / "uploads"
    uploads.mkdir()
    (uploads / "green.png").write_bytes(PICTURE.read_bytes())
    servers: dict[str, str] = {}
    try:
        top = forms.TopValues.of("demo-vlm", "lora", "", "qwen2_vl")
        servers, problems = chat.start_servers(board, top, {"max_new_tokens": 8, "temperature": 0.01}, compare=True)
        assert not problems and set(servers) == {"main", "base"}
        text_only, _ = chat.start_servers(board, forms.TopValues.of("demo", "lora", "", "chatml"),
                                          {"max_new_tokens": 4}, compare=False)
        servers["text"] = text_only["main"]
        live = wait_ready(board, servers)
        takes = chat_media.model_media(board, servers["main"])
        assert "image" in takes and chat_media.model_media(board, servers["text"]) == ()
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
        url, key = client_of(board, live["text"])
        with pytest.raises(ChatError, match=r"text-only|not supported"):
            list(stream_chat(url, messages, max_tokens=4, api_key=key))
    finally:
        chat.unload(board, servers)
        board.jobs.shutdown()
