"""Where a training command's time goes: the seconds each phase took, from the process's start.

``mark(name)`` closes a phase at the current moment; :func:`summary` gives each phase's seconds (the first phase
counts from the process's own start, so interpreter start-up and imports are in it), and :func:`log_summary`
writes them as one line at the end of the command, e.g. ``Time: imports 5.2 s, model 0.9 s, data 0.4 s,
trainer 0.3 s, first step 2.1 s, steps 61.0 s, saving 0.5 s (72.5 s in all)``.
"""

from __future__ import annotations

import logging
import os
import time

logger = logging.getLogger(__name__)

_MARKS: list[tuple[str, float]] = []
_T0 = time.monotonic()
_STATE = {"base": 0.0, "started": False}


def process_age() -> float:
    """Seconds since this process started (Linux: from /proc; elsewhere: since this module was imported)."""
    try:
        with open("/proc/self/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
        with open("/proc/uptime", encoding="ascii") as handle:
            uptime = float(handle.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))  # field 22: starttime
    except (OSError, ValueError, IndexError):
        return time.monotonic() - _T0


def start() -> None:
    """Begin a command's phases: the first command of a process counts from the process's start, a later one (tests
    run several in one process) from now."""
    _MARKS.clear()
    _STATE["base"] = process_age() if _STATE["started"] else 0.0
    _STATE["started"] = True


def mark(name: str) -> None:
    """End the phase ``name`` now (a phase marked twice keeps its first end)."""
    if not any(existing == name for existing, _ in _MARKS):
        _MARKS.append((name, process_age()))


def summary() -> dict[str, float]:
    """Seconds per marked phase, in order."""
    out: dict[str, float] = {}
    previous = _STATE["base"]
    for name, at in _MARKS:
        out[name] = round(max(0.0, at - previous), 2)
        previous = at
    return out


def log_summary() -> None:
    if not _MARKS:
        return
    parts = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in summary().items())
    logger.info("Time: %s (%.1f s in all).", parts, _MARKS[-1][1] - _STATE["base"])
