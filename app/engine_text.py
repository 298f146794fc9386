"""The engine's messages in the page's language: a translated heading for each kind, the engine's text as written.

The engine writes its messages in English, and they name settings, values and paths that must stay exactly as
written (a user types them into a config). Each message carries a stable code naming its kind: a pre-flight problem
is an :class:`engine.errors.Problem` (``model``, ``data``, ``memory``...), a run's failure has run.json's
``error_code`` (``config``, ``out_of_memory``, ``disk_full``...). The board heads each message with the translation
of its code (``locales/*.json``: ``ekind_<code>``) and keeps the text itself. A message with a code the locales do not
know yet, or none, gets the heading of ``ekind_other``, so a new engine message still shows a translated frame.
The frames themselves are locale templates too (``engine_problem``, ``engine_error``, ``engine_reason``).
"""

from __future__ import annotations

from collections.abc import Iterable

from app.i18n import t
from engine.config.limits import shorten_words

CODES = (
    # engine.preflight.check: the check that found the problem (hub_offline: a hub id with no way to fetch it)
    "model", "hub_offline", "packing", "template", "data", "media", "device", "output", "precision", "deepspeed", "ray",
    "schedule", "tracker", "rl", "export", "memory",
    # engine.config.ConfigError; the board's own checks of a form
    "config", "check_failed", "hidden_chars", "path", "strategy",
    # run.json's error_code: engine.errors.ERROR_CODES and engine.lifecycle, then app.run_outcome and app.jobs
    "reward", "disk_full", "file_too_large", "write_denied", "rank_failure", "cache", "out_of_memory", "user", "crash",
    "aborted", "cancelled", "exited_early", "lost", "exit_code", "start_failed", "secret_lost",
    "other",
)
"""Codes with a heading of their own in the locales (``ekind_<code>``); any other code is headed as ``other``."""


def code_of(message: object, default: str | None = None) -> str:
    """The code a message carries (``default``, else ``other``, when it carries none)."""
    code = getattr(message, "code", None)
    return str(code) if code else (default or "other")


def kind(lang: str | None, code: str | None) -> str:
    """The translated heading of a code (``ekind_other``'s for a code no locale knows)."""
    return t(lang, "ekind_" + (code if code in CODES else "other"))


def problem_lines(lang: str | None, problems: Iterable[object], default: str | None = None) -> str:
    """Markdown list of problems, each framed in ``lang`` (``default``: the code of those that carry none)."""
    return "\n".join("- " + t(lang, "engine_problem", kind=kind(lang, code_of(p, default)), text=shorten_words(p))
                     for p in problems)


def problems_text(lang: str | None, heading: str, problems: Iterable[object], default: str | None = None) -> str:
    """A heading (already in ``lang``) over :func:`problem_lines`."""
    return heading + "\n" + problem_lines(lang, problems, default)


def form_problems_text(lang: str | None, refused: Iterable[object], problems: list[object]) -> str:
    """A tab's refusal of its form: the form's own problems (``refused``, in ``lang``: an empty number box) and the
    engine's checks (``problems``), under the engine's heading when it has any, else the form's (which carries no
    note that the problems are in the engine's English)."""
    return problems_text(lang, t(lang, "train_problems" if problems else "form_problems"), [*refused, *problems])


def error_text(lang: str | None, code: str | None, text: str, local: bool = False) -> str:
    """A run's failure as plain text (a text box) framed in ``lang``: '' for no text. ``local``: the message is in
    ``lang`` already (app.run_errors), not the engine's English."""
    if not text:
        return ""
    return t(lang, "engine_error_local" if local else "engine_error", kind=kind(lang, code), text=text)


def reason_text(lang: str | None, code: str | None, text: str) -> str:
    """A one-line reason (History's table) framed in ``lang``: '' for no text."""
    return t(lang, "engine_reason", kind=kind(lang, code), text=text) if text else ""


def note_text(lang: str | None, note: object, default: str | None = None) -> str:
    """One engine note (a warning, not a list item) framed in ``lang``: '' for no note."""
    return t(lang, "engine_problem", kind=kind(lang, code_of(note, default)), text=str(note)) if note else ""
