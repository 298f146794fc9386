"""Forget the gradio sessions that only served automation-API calls.

gradio keeps a session per session hash (up to ``state_session_capacity``, 10,000 by default), and each new session
copies the whole page's component config: about 0.8 MB for this board. A browser tab is one session; but every plain
HTTP call to ``/gradio_api/call/<route>`` (curl, a script polling ``/run_status`` once a second) comes with a new
hash, so a poller grew the board by about 2.8 GB an hour. The API endpoints keep no per-session state, so a session
that served only API calls is dropped once it has been idle for :data:`KEEP_SECONDS` (a gradio_client that keeps
polling keeps its one session). Browser sessions never call these endpoints and are never touched.
"""

from __future__ import annotations

import threading
import time
from typing import Any

KEEP_SECONDS = 30.0


class ApiSessions:
    """Remembers the session hashes of API calls and drops those idle for ``keep_seconds`` from gradio's store."""

    def __init__(self, blocks: Any, keep_seconds: float | None = None):
        self.blocks = blocks
        self.keep_seconds = KEEP_SECONDS if keep_seconds is None else keep_seconds
        self.last_call: dict[str, float] = {}
        self.lock = threading.Lock()

    def seen(self, request: Any) -> None:
        """Note this call's session and forget the API sessions idle for too long."""
        now = time.monotonic()
        with self.lock:
            session = getattr(request, "session_hash", None)
            if session:
                self.last_call[session] = now
            idle = [s for s, at in self.last_call.items() if now - at > self.keep_seconds]
            for session in idle:
                del self.last_call[session]
        holder = getattr(self.blocks, "state_holder", None)
        if holder is None or not idle:
            return
        with holder.lock:
            for session in idle:
                holder.session_data.pop(session, None)
                holder.time_last_used.pop(session, None)
