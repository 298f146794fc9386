"""The board's chat workers (``lf-engine api`` subprocesses): their keys, and finding them again after a restart.

Each worker requires a bearer key. The board derives it from the workspace's private secret and the run id
(HMAC-SHA256), passes it to the worker in the environment (never on the command line, never in the run folder),
and can derive it again after a restart, so it re-adopts the workers that are still running instead of leaving
them orphaned. Unload ends every live chat worker of the workspace, adopted or not. A worker whose workspace has
had no board for ten minutes ends itself (``lf-engine api --board-lock``).

Workers are shared by the board's pages: a Load finds a live worker of the workspace that already serves the same
model, adapter, template and server settings (started by this page or another) and keeps it, so the same model is
never loaded twice. Each page keeps its own conversation and sends it whole with every message (the worker holds no
conversation, and answers one request at a time), so pages never see each other's turns. :data:`LOAD_LOCK` makes two
Loads at once see each other's workers; :func:`streaming` records the replies in flight, so that a Load of another
model does not end a worker in the middle of another page's reply.
"""

from __future__ import annotations

import hashlib
import hmac
import itertools
import threading
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from app import forms
from app.context import Board
from app.history import RunConfigError, load_run_config
from app.jobs import JobError
from engine.credentials import API_KEY_ENV

LIVE = ("queued", "running")

LOAD_LOCK = threading.Lock()
"""Held by a Load while it picks the workers to keep, ends the others and starts new ones (app.tabs.chat)."""

STREAM_STALE = 900.0
"""Seconds after which a reply still recorded as in flight no longer counts (a page whose stream was never closed)."""

_streams: dict[int, tuple[frozenset[str], float]] = {}
_streams_lock = threading.Lock()
_tokens = itertools.count()


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


PER_REQUEST = ("temperature", "top_p", "top_k", "max_new_tokens", "repetition_penalty")
"""Sampling settings every message sends along (app.tabs.chat's on_send): a worker need not restart when only they
change."""


def identity(mapping: dict[str, Any]) -> dict[str, Any]:
    """What a worker's config fixes for its life: all but the per-message sampling and its folder."""
    return {k: v for k, v in mapping.items() if k not in PER_REQUEST and k != "output_dir"}


def serves(board: Board, run_id: str, config: Any) -> bool:
    """Whether chat worker ``run_id`` serves what the checked ``config`` asks for (same model, adapter, template and
    server settings; the sampling that every message sends along may differ)."""
    try:
        folder = board.jobs.folder(run_id)
        have = load_run_config(folder.config_path)
    except (JobError, RunConfigError):  # a config.yaml that is not one (not UTF-8, an alias bomb, ...) serves nothing
        return False
    return isinstance(have, dict) and identity(forms.resolved_mapping(config, folder.path)) == identity(have)


def serving(board: Board, config: Any) -> str | None:
    """The newest live worker of the workspace (any page's or API caller's, one still loading included, none that is
    being ended) that serves the checked ``config``; None when there is none. Call it holding :data:`LOAD_LOCK`."""
    for info in live_chat_runs(board):
        if not unloading(info) and serves(board, info["id"], config):
            return info["id"]
    return None


def live_chat_runs(board: Board) -> list[dict[str, Any]]:
    """run.json of every chat worker that is queued or running, newest first."""
    return [info for info in board.jobs.list() if info.get("kind") == "chat" and info.get("status") in LIVE]


def unloading(info: dict[str, Any]) -> bool:
    """Whether a chat worker (its run.json) has ended or is being ended (an Unload or another Load signalled it)."""
    return info.get("status") not in LIVE or bool(info.get("abort_requested_at"))


@contextmanager
def streaming(run_ids: Iterable[str]) -> Iterator[None]:
    """Record a reply in flight from the workers ``run_ids`` for as long as the block runs."""
    token = next(_tokens)
    with _streams_lock:
        _streams[token] = (frozenset(run_ids), time.monotonic())
    try:
        yield
    finally:
        with _streams_lock:
            _streams.pop(token, None)


def busy(run_ids: Iterable[str]) -> list[str]:
    """Those of ``run_ids`` that are sending a reply to a page now (this one or another)."""
    now, wanted = time.monotonic(), set(run_ids)
    with _streams_lock:
        live = [ids for ids, since in _streams.values() if now - since < STREAM_STALE]
    return sorted({run_id for ids in live for run_id in ids & wanted})


def adopt(board: Board) -> dict[str, str]:
    """{side: run id} of the running chat workers (the newest per side; none that is being ended), for a page that
    knows none."""
    sides: dict[str, str] = {}
    for info in live_chat_runs(board):
        if unloading(info):
            continue
        side = info.get("side") or "main"
        sides.setdefault(side if side in ("main", "base") else "main", info["id"])
    return sides


def stop_all(board: Board, servers: dict[str, str] | None = None, keep: Any = ()) -> list[str]:
    """End the page's chat workers and every other live one of this workspace, except the run ids in ``keep``
    (workers a new Load reuses); returns the run ids signalled."""
    ids = dict.fromkeys([*(servers or {}).values(), *(info["id"] for info in live_chat_runs(board))])
    return stop_ids(board, [run_id for run_id in ids if run_id not in keep])


def stop_ids(board: Board, run_ids: Iterable[str]) -> list[str]:
    """End exactly the chat workers ``run_ids`` (a Load's own new workers that failed; never another page's)."""
    stopped = []
    for run_id in run_ids:
        try:
            if board.jobs.abort(run_id) in ("stopping", "cancelled"):
                stopped.append(run_id)
        except JobError:
            continue
    return stopped


def client_of(board: Board, status: dict[str, Any]) -> tuple[str, str]:
    """(base URL, key) to talk to a ready worker whose job status is ``status``."""
    return f"http://127.0.0.1:{status['port']}/v1", worker_key(board, status["id"])
