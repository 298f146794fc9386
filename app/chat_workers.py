"""The board's chat workers (``lf-engine api`` subprocesses): their keys, and finding them again after a restart.

Each worker requires a bearer key. The board derives it from the workspace's private secret and the run id
(HMAC-SHA256), passes it to the worker in the environment (never on the command line, never in the run folder),
and can derive it again after a restart, so it re-adopts the workers that are still running instead of leaving
them orphaned. Unload ends every live chat worker of the workspace, adopted or not. A worker whose workspace has
had no board for ten minutes ends itself (``lf-engine api --board-lock``).
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from app.context import Board
from app.jobs import JobError
from engine.credentials import API_KEY_ENV

LIVE = ("queued", "running")


def worker_key(board: Board, run_id: str) -> str:
    """The bearer key of chat worker ``run_id`` (the same on every start of this workspace's board)."""
    secret = board.workspace.secret().encode("utf-8")
    return hmac.new(secret, f"chat-worker:{run_id}".encode(), hashlib.sha256).hexdigest()


def worker_env(board: Board, run_id: str) -> dict[str, str]:
    """The environment a chat worker starts with: its key."""
    return {API_KEY_ENV: worker_key(board, run_id)}


def worker_args(board: Board) -> list[str]:
    """The command-line arguments of a chat worker: loopback on a free port, and ended once no board has held this
    workspace for a while (``--board-lock``: a board closed for good leaves no model loaded behind it)."""
    return ["--host", "127.0.0.1", "--port", "0", "--board-lock", str(board.workspace.lock_path)]


def live_chat_runs(board: Board) -> list[dict[str, Any]]:
    """run.json of every chat worker that is queued or running, newest first."""
    return [info for info in board.jobs.list() if info.get("kind") == "chat" and info.get("status") in LIVE]


def adopt(board: Board) -> dict[str, str]:
    """{side: run id} of the running chat workers (the newest per side), for a page that knows none."""
    sides: dict[str, str] = {}
    for info in live_chat_runs(board):
        side = info.get("side") or "main"
        sides.setdefault(side if side in ("main", "base") else "main", info["id"])
    return sides


def stop_all(board: Board, servers: dict[str, str] | None = None, keep: Any = ()) -> list[str]:
    """End the page's chat workers and every other live one of this workspace, except the run ids in ``keep``
    (workers a new Load reuses); returns the run ids signalled."""
    ids = list(dict.fromkeys([*(servers or {}).values(), *(info["id"] for info in live_chat_runs(board))]))
    stopped = []
    for run_id in ids:
        if run_id in keep:
            continue
        try:
            if board.jobs.abort(run_id) in ("stopping", "cancelled"):
                stopped.append(run_id)
        except JobError:
            continue
    return stopped


def client_of(board: Board, status: dict[str, Any]) -> tuple[str, str]:
    """(base URL, key) to talk to a ready worker whose job status is ``status``."""
    return f"http://127.0.0.1:{status['port']}/v1", worker_key(board, status["id"])
