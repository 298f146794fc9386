"""What the job manager (:mod:`app.jobs`) knows of a job's process: the environment it starts with and the live
record it watches."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.runs import pid_alive

REPO_ROOT = Path(__file__).resolve().parent.parent
BOARD_ONLY_ENV = ("LF_BOARD_AUTH",)
"""Variables of the board's own that no job gets: the board's login (``USER:PASS``). A job runs code from elsewhere
(reward functions, a model's ``trust_remote_code``, tracker plug-ins that upload the environment) and needs no login to
the board; with it, any of them could have used or sent on the board's password."""


def child_env() -> dict[str, str]:
    """The environment of an engine subprocess: the repo root importable, output unbuffered, the board's login
    (:data:`BOARD_ONLY_ENV`) left out."""
    env = {name: value for name, value in os.environ.items() if name not in BOARD_ONLY_ENV}
    paths = [str(REPO_ROOT)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class _Live:
    """A process the manager watches: its own child (``proc``) or a re-attached one (pid only)."""

    run_id: str
    pid: int
    kind: str = "train"
    proc: subprocess.Popen | None = None
    started: float | None = None
    abort_deadline: float | None = None
    killed: bool = False
    verified: bool = True
    """Whether the pid is known to be the run's own (a child of ours, or a matching ``pid_started``)."""
    ended: bool = False
    """The process is gone but its outcome is not written yet (a failed write is retried each tick)."""
    exit_code: int | None = None
    reason: str | None = None
    pending: dict[str, Any] | None = None
    """run.json fields still to write (a write failed); retried each tick."""

    def has_ended(self) -> bool:
        """Whether the process is gone (reaped, exited, or a re-attached pid no longer alive)."""
        if self.ended:
            return True
        return self.proc.poll() is not None if self.proc is not None else not pid_alive(self.pid)
