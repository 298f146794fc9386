"""A chat worker the board started ends once no board has held its workspace for a while.

The board's chat workers (``lf-engine api``) outlive the board on purpose: a restarted board finds them again and
re-adopts them. A workspace whose board never comes back would keep each worker (a loaded model, hundreds of MB
to many GB) until someone kills it. The board therefore starts its workers with ``--board-lock`` naming the lock
file every board holds on its workspace (an exclusive ``flock`` for the board's whole life, see
``app.workspace.Workspace.lock``). :class:`BoardWatch` looks at that lock every ``interval`` seconds; once no process
has held it for ``grace`` seconds (a restart takes far less), it calls ``on_gone`` and the server stops.

The probe asks for a shared lock without waiting and, when it gets one, drops it at once: a board starting in that
instant retries its own lock briefly (``Workspace.lock``), so the probe never makes a board refuse its workspace.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path

logger = logging.getLogger(__name__)

DEFAULT_GRACE = 600.0
"""Seconds without a board before a board-started chat worker stops (``lf-engine api --board-grace``)."""


def board_holds(lock_path: str | Path) -> bool | None:
    """Whether a board holds the workspace lock at ``lock_path``: True, False (no file, or nobody holds it), or
    None where this system cannot tell (no ``fcntl``, or the file cannot be opened for another reason)."""
    try:
        import fcntl
    except ImportError:  # Windows: no flock; never decide the board is gone
        return None
    try:
        # without waiting: a pipe put in its place held the watcher (and its worker's end) for good
        handle = os.fdopen(os.open(lock_path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC), encoding="utf-8")
    except FileNotFoundError:
        return False
    except OSError:
        return None
    try:
        fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return None
    else:
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False
    finally:
        handle.close()


class BoardWatch:
    """Calls ``on_gone(seconds)`` once no board has held ``lock_path`` for ``grace`` seconds, then stops watching.

    ``clock`` and ``probe`` are for tests; :meth:`poll` runs one check (the thread calls it every ``interval``).
    """

    def __init__(self, lock_path: str | Path, grace: float, on_gone: Callable[[float], None], *,
                 interval: float = 15.0, clock: Callable[[], float] = time.monotonic,
                 probe: Callable[[str | Path], bool | None] = board_holds):
        self.lock_path, self.grace, self.on_gone = Path(lock_path), float(grace), on_gone
        self.interval = max(0.05, min(float(interval), self.grace / 4))
        self.clock, self.probe = clock, probe
        self.gone_since: float | None = None
        self.fired = False
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def poll(self) -> bool:
        """Check once; True when the board has been gone for the grace period (``on_gone`` was called)."""
        if self.fired:
            return True
        held = self.probe(self.lock_path)
        now = self.clock()
        if held is not False:  # a board holds it, or this system cannot tell
            if self.gone_since is not None and held:
                logger.info("A board holds the workspace again; this chat server keeps running.")
            self.gone_since = None
            return False
        if self.gone_since is None:
            self.gone_since = now
            logger.info("No board holds the workspace (%s); this chat server stops in %s unless a board opens the "
                        "workspace again.", self.lock_path, _duration(self.grace))
        gone_for = now - self.gone_since
        if gone_for < self.grace:
            return False
        self.fired = True
        self.on_gone(gone_for)
        return True

    def start(self) -> BoardWatch:
        def loop() -> None:
            while not self._stop.wait(self.interval):
                try:
                    if self.poll():
                        return
                except Exception:  # a failed probe must never take the server down
                    logger.debug("Board watch check failed.", exc_info=True)

        self._thread = threading.Thread(target=loop, name="lf-board-watch", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


def _duration(seconds: float) -> str:
    return f"{seconds / 60:g} min" if seconds >= 60 else f"{seconds:g} s"
