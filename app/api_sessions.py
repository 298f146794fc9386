"""Forget the gradio sessions that only served automation-API calls, and those of browser tabs closed long ago.

gradio keeps a session per session hash (up to ``state_session_capacity``, 10,000 by default), and each new session
copies the whole page's component config: about 0.8 MB for this board. A browser tab is one session; but every plain
HTTP call to ``/gradio_api/call/<route>`` (curl, a script polling ``/run_status`` once a second) comes with a new
hash, so a poller grew the board by about 2.8 GB an hour. The API endpoints keep no per-session state, so a session
that served only API calls is dropped once it has been idle for :data:`KEEP_SECONDS` (a gradio_client that keeps
polling keeps its one session). Browser sessions never call these endpoints and are never touched.

Idle time alone does not bound them: a client calling 20 times a second would still keep 600 sessions (about
480 MB) within the 30 s. So at most :data:`MAX_SESSIONS` API sessions are kept; beyond that the least recently used
one is dropped at once (a client whose session was dropped gets a fresh one with its next call: the endpoints keep
nothing in it).

A browser tab is a session too, and gradio never drops one: when a tab closes it only marks the session closed and
empties its ``gr.State`` values an hour later, keeping the copied page config (0.8 MB) until 10,000 sessions exist.
So every page load added 0.8 MB to the board for good (a tab reloaded every few minutes for a week: several GB).
:class:`ClosedSessions` drops a session gradio has marked closed once it has not been used for
:data:`CLOSED_KEEP_SECONDS` (gradio's own time for a closed tab's state), and any session silent for
:data:`SILENT_KEEP_SECONDS` (an open tab calls every few seconds, a background tab at least once a minute).
"""

from __future__ import annotations

import datetime
import threading
import time
from typing import Any

KEEP_SECONDS = 30.0
MAX_SESSIONS = 32
CLOSED_KEEP_SECONDS = 3600.0
SILENT_KEEP_SECONDS = 24 * 3600.0
PRUNE_EVERY_SECONDS = 60.0


class ApiSessions:
    """Remembers the session hashes of API calls and drops those idle for ``keep_seconds`` from gradio's store."""

    def __init__(self, blocks: Any, keep_seconds: float | None = None, max_sessions: int | None = None):
        self.blocks = blocks
        self.keep_seconds = KEEP_SECONDS if keep_seconds is None else keep_seconds
        self.max_sessions = MAX_SESSIONS if max_sessions is None else max(1, max_sessions)
        self.last_call: dict[str, float] = {}
        self.lock = threading.Lock()

    def seen(self, request: Any) -> None:
        """Note this call's session and forget the API sessions idle for too long, and the least recently used
        ones beyond :attr:`max_sessions` (never this call's)."""
        now = time.monotonic()
        with self.lock:
            current = getattr(request, "session_hash", None)
            if current:
                self.last_call.pop(current, None)  # re-inserted last: the dict is in order of last use
                self.last_call[current] = now
            idle = [name for name, at in self.last_call.items() if now - at > self.keep_seconds]
            surplus = len(self.last_call) - len(idle) - self.max_sessions
            if surplus > 0:
                expired = set(idle)
                idle += [name for name in self.last_call if name not in expired and name != current][:surplus]
            for name in idle:
                del self.last_call[name]
        holder = getattr(self.blocks, "state_holder", None)
        if holder is None or not idle:
            return
        with holder.lock:
            for name in idle:
                holder.session_data.pop(name, None)
                holder.time_last_used.pop(name, None)


class ClosedSessions:
    """Drops the gradio sessions of tabs closed (or silent) for long from the board's store (see the module)."""

    def __init__(self, blocks: Any):
        self.blocks = blocks
        self.last_prune = float("-inf")
        self.lock = threading.Lock()

    def prune(self, force: bool = False) -> list[str]:
        """Drop the stale sessions, at most once per :data:`PRUNE_EVERY_SECONDS` unless ``force``; returns them."""
        with self.lock:
            now = time.monotonic()
            if not force and now - self.last_prune < PRUNE_EVERY_SECONDS:
                return []
            self.last_prune = now
        holder = getattr(self.blocks, "state_holder", None)
        if holder is None:
            return []
        clock = datetime.datetime.now()
        closed_before = clock - datetime.timedelta(seconds=CLOSED_KEEP_SECONDS)
        silent_before = clock - datetime.timedelta(seconds=SILENT_KEEP_SECONDS)
        with holder.lock:
            stale = [name for name, session in holder.session_data.items()
                     if (used := holder.time_last_used.get(name)) is not None
                     and (used < silent_before or (getattr(session, "is_closed", False) and used < closed_before))]
            for name in stale:
                session = holder.session_data.pop(name)
                holder.time_last_used.pop(name, None)
                for component, value, _ in getattr(session, "state_components", ()):
                    try:
                        component.delete_callback(value)  # as gradio ends a state's life
                    except Exception:  # noqa: BLE001 - a user callback must not stop the pruning
                        pass
        return stale
