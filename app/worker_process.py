"""A short-lived helper process for work the board must not do itself (it would import torch or transformers).

``run_worker`` runs ``python -m MODULE ARGS...`` from the repository root with the engine's environment, its
output in a log file, and returns the exit code (``subprocess.TimeoutExpired`` past ``timeout``); the worker
writes its result where its arguments say. ``log_tail`` gives the last lines of that log for a message.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from app.jobs import REPO_ROOT, child_env


def run_worker(module: str, args: list[str], log: Path, timeout: float) -> int:
    with open(log, "wb") as fh:
        return subprocess.run([sys.executable, "-m", module, *args], stdout=fh, stderr=subprocess.STDOUT,
                              stdin=subprocess.DEVNULL, cwd=str(REPO_ROOT), env=child_env(), timeout=timeout,
                              check=False).returncode


LOG_TAIL_BYTES = 64 << 10
"""The most of a worker's log read for its last lines (bytes): the log can grow without bound (a worker printing
in a loop until its timeout) and was read whole."""


def log_tail(log: Path, lines: int) -> str:
    """The last ``lines`` lines of a worker's log, read from its last :data:`LOG_TAIL_BYTES` only (a log that is
    no regular file, or unreadable, gives "")."""
    from engine.runs import tail_text

    return "\n".join(tail_text(log, LOG_TAIL_BYTES).strip().splitlines()[-lines:])
