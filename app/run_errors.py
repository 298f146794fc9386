"""A run's failure in the page's language, where run.json records it as data.

run.json's ``error`` is English text (the CLI prints it, and other programs read it). For the failures whose words
are all the engine's or the board's own and name no setting a user types (a full disk, a file too large for its file
system; a process that ended without recording its outcome, a queued run whose secret was lost), run.json also
records ``error_params`` beside ``error_code``: the folder, the free space, what to do next, the checkpoints removed
(:func:`engine.diskfull.storage_params`), the exit code, the secrets' names. The board composes these messages from the locales
instead of showing the English text. A run.json written before ``error_params`` existed (or a message only known as
text) shows its ``error`` as written, headed by its translated kind (:mod:`app.engine_text`).
"""

from __future__ import annotations

from typing import Any

from app.i18n import t
from app.run_outcome import LOG_TAIL

STOPPED = "stopped by request"
"""The ``error`` of a run stopped on request (engine.lifecycle, app.run_outcome; error_code ``aborted``): a fixed text,
which History shows as its own ``runs_reason_stopped``."""


def local_error(lang: str | None, code: str | None, params: Any, text: Any = None) -> str | None:
    """The failure's message in ``lang`` from run.json's ``error_code`` and ``error_params``; None when run.json records
    it only as text (its ``error``, then shown as written). The last lines of the log that ``text`` (the English
    ``error``) quotes follow it, as they are."""
    message = _message(lang, code, params)
    if message is None or not isinstance(text, str) or LOG_TAIL not in text:
        return message
    return message + "\n" + text.split(LOG_TAIL, 1)[1].strip("\n")


MAX_TEXT = 1000
"""The most characters of one value of ``error_params`` shown (a path, the words of ``then``); run.json is a file any
program (or a damaged disk) may have written: a longer one is cut, marked with an ellipsis."""

MAX_NAMES = 20
"""The most names of a list in ``error_params`` shown (checkpoints removed, secrets); the rest are counted."""


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _names(values: Any) -> str:
    names = [_short(name) for name in values if isinstance(name, (str, int)) and not isinstance(name, bool) and name]
    more = len(names) - MAX_NAMES
    return ", ".join(names[:MAX_NAMES]) + (f", … (+{more})" if more > 0 else "")


def _count(value: Any) -> int | None:
    """An integer as run.json records one (an exit code, free MB); None for a bool, a float, text or a number too
    large to be either."""
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) < 10**18:
        return value
    return None


def _message(lang: str | None, code: str | None, params: Any) -> str | None:
    if not isinstance(code, str):
        return None
    if code in ("disk_full", "file_too_large") and isinstance(params, dict) and isinstance(params.get("path"), str) \
            and params["path"]:
        then = params.get("then")
        then = {"resume": t(lang, "runerr_then_resume"), "start": t(lang, "runerr_then_start")}.get(
            then, _short(then)) if isinstance(then, str) else ""
        free = _count(params.get("free_mb"))
        free = f"{free:,}" if free is not None else t(lang, "runerr_free_unknown")
        message = t(lang, "runerr_disk_full" if code == "disk_full" else "runerr_file_too_large",
                    path=_short(params["path"]), free=free, then=then)
        removed = _names(params["removed"]) if isinstance(params.get("removed"), list) else ""
        if removed:
            message += t(lang, "runerr_removed", checkpoints=removed)
        return message
    if not isinstance(params, dict) or not params:
        return None
    if code == "exit_code" and _count(params.get("exit_code")) is not None:  # app.run_outcome: the process ended,
        return t(lang, "runerr_exit_code", code=params["exit_code"])  # its outcome unrecorded (the log's end follows)
    if code == "lost":
        return t(lang, "runerr_lost")
    if code == "exited_early":
        return t(lang, "runerr_exited_early")
    if code == "secret_lost" and isinstance(params.get("secrets"), list):  # app.jobs: a queued run's secret is gone
        return t(lang, "runerr_secret_lost", secrets=_names(params["secrets"]))
    return None
