"""How a run's process ended, for a run whose engine did not record it (app.jobs records what this decides).

The engine writes the outcome to run.json and an ``end`` event to events.jsonl itself; the board decides only when
neither says it: from that end event, the abort it asked for, the exit code and the last lines of stdout.log.
"""

from __future__ import annotations

import json
from typing import Any

from app.monitor import ERROR_LINES
from engine.diskfull import THEN, disk_full_message, nearly_full, storage_params
from engine.errors import Problem
from engine.runs import FINAL_STATUSES, RunFolder, tail_text

LOG_TAIL = "Last lines of its log:"
NOT_RECORDED = "Could not record the outcome in"
"""The engine's log line when it cannot write run.json or events.jsonl (engine.lifecycle)."""


def problem(text: str, code: str, params: dict[str, Any] | None = None) -> Problem:
    """A run's error with its code and, where given, ``params``: run.json's ``error_params``, from which the board says
    it in the page's language (app.run_errors)."""
    found = Problem(text, code)
    found.params = params if isinstance(params, dict) else None  # type: ignore[attr-defined]
    return found


def disk_full_problem(path: Any, then: str = "resume") -> Problem:
    """A full disk's message at ``path`` (``then``: a code of engine.diskfull.THEN), with its ``params``."""
    params = storage_params(path, THEN[then])
    return problem(disk_full_message(path, THEN[then], free=params["free_mb"]), "disk_full", params)


def end_event(folder: RunFolder) -> dict[str, Any] | None:
    """The last ``end`` event of the run's events.jsonl, if any."""
    tail = tail_text(folder.events_path, 65536)
    for line in reversed(tail.splitlines()):
        if '"end"' in line:
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict) and event.get("event") == "end":
                return event
    return None


def decide(folder: RunFolder, exit_code: int | None, reason: str | None) -> tuple[str, str | None]:
    """(status, error) of a run whose process ended without a final status in run.json; ``reason`` is "aborted"
    (the board stopped it), "lost" (it ended while no board watched) or None. The error, when there is one, is an
    :class:`engine.errors.Problem`: its code is recorded as run.json's ``error_code`` (and its ``params``, where it has
    them, as ``error_params``)."""
    end = end_event(folder)
    tail = tail_text(folder.log_path, 8192).strip().splitlines()[-ERROR_LINES:]

    def with_tail(text: str, code: str) -> str:  # the page says the text in its language from the code and exit code
        return problem(f"{text} {LOG_TAIL}\n" + "\n".join(tail) if tail else text, code, {"exit_code": exit_code})

    if end and isinstance(end.get("status"), str) and end["status"] in FINAL_STATUSES:
        error, code = end.get("error"), end.get("error_code")
        error = error if isinstance(error, str) or error is None else json.dumps(error)[:2000]  # a file: any JSON
        if error and isinstance(code, str) and code:
            return end["status"], problem(error, code, end.get("error_params"))
        return end["status"], error
    if reason == "aborted":
        return "aborted", Problem("stopped by request", "aborted")
    if exit_code == 0 and any(NOT_RECORDED in line for line in tail):
        return "completed", None  # it finished, but could not write its outcome (a full disk)
    if exit_code == 0:  # the engine always records its end: something ended the process early
        return "failed", with_tail("The process exited (code 0) without recording how the run ended: something in "
                                   "it ended the process early (user code such as a reward function calling "
                                   "os._exit?). Its last checkpoint, if any, stays.", "exited_early")
    if any("no space left on device" in line.lower() for line in tail) or nearly_full(folder.path):
        return "failed", disk_full_problem(folder.path)
    if reason == "lost":
        return "failed", with_tail("The process ended while the board was not watching and left no result.", "lost")
    return "failed", with_tail(f"The process exited with code {exit_code}.", "exit_code")
