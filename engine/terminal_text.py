"""Text for a terminal: what the engine prints quotes values from outside, and none of them may drive the terminal.

An error or a log line quotes what a config, a dataset_info.json, a dataset row or a model folder holds: a key, a
dataset name, a column, a path. A YAML file can hold any character (``"\\e]0;title\\a"``), so a quoted value could
carry the terminal's own controls: set the window title, move the cursor, clear the line that says what went wrong
(``\\e[2K``, ``\\r``), or colour text to hide it; bidirectional overrides (U+202E) make a name read backwards, and
zero-width characters make two different names look the same.
:func:`shown` writes such characters as escapes (``\\x1b``, ``\\u202e``), so the text reads as it is and does
nothing; line breaks and tabs stay, and so does every printable character of any script.
:class:`TerminalSafeFilter` does the same for every log record (the engine's handler on stderr, hence stdout.log).
"""

from __future__ import annotations

import logging
import re

_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200b-\u200f\u202a-\u202e\u2060\u2066-\u2069\ufeff]")
"""C0 controls but line feed and tab, DEL, C1 controls, the bidirectional marks, embeddings, overrides and isolates
(what reorders text), and the zero-width characters (a key copied from a web page with one read "Unknown key
`learning_rate`. Did you mean `learning_rate`?")."""


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group(0))
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def shown(text: str) -> str:
    """``text`` with every terminal control and reordering character written as an escape (see the module)."""
    return _CONTROLS.sub(_escaped, text)


class TerminalSafeFilter(logging.Filter):
    """Writes controls in a log record's message and traceback as escapes (message and arguments formatted first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = shown(message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:  # an exception's message quotes values too
            record.exc_text = shown(logging.Formatter().formatException(record.exc_info))
        return True


def install(logger: logging.Logger | None = None) -> None:
    """Add :class:`TerminalSafeFilter` to every handler of ``logger`` (the root logger by default), once."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, TerminalSafeFilter) for f in handler.filters):
            handler.addFilter(TerminalSafeFilter())


# embeddings, overrides and isolates: they reorder the text that follows them
REORDERING = "\u202a-\u202e\u2066-\u2069"
# marks and zero-width characters that are part of ordinary right-to-left or joined text, but not of a name
INVISIBLE = "\u061c\u180e\u200b-\u200f\u2028\u2029\u2060-\u2064\ufeff\u00ad"
_IN_NAMES = re.compile(f"[{REORDERING}{INVISIBLE}]")


def hidden_chars(name: str) -> list[str]:
    """The distinct characters of ``name`` that would not show as themselves, in order: reordering, invisible and
    control characters (Unicode categories Cc and Cf, a line or paragraph separator). A name (a run, a folder, a
    dataset) has no use for any of them, and a line break or an override in one forges lines or reorders text in
    the logs and trackers that show it."""
    import unicodedata

    found: list[str] = []
    for char in name:
        if char not in found and (_IN_NAMES.match(char) or unicodedata.category(char) in ("Cc", "Cf")):
            found.append(char)
    return found
