"""Characters that change how text is shown without being seen: shown as visible marks, refused in new names.

A right-to-left override (U+202E) in a run, dataset or file name shows the rest of the name reversed
(``report\u202egnp.exe`` reads as ``reportexe.png``); isolates and embeddings (U+2066-2069, U+202A-202D) reorder
text too, and zero-width characters make two names that look the same differ. Everything the board shows that came
from outside (names, paths, logs, engine messages, datasets' rows, chat text) goes through :func:`reveal`, which
writes each such character as a visible mark (``⟪U+202E⟫``); names a user types for something new go through
:func:`name_problem`, which refuses them.

Chat text and datasets' rows may be written in a right-to-left script, where the marks U+200E / U+200F / U+061C
and the joiners U+200C / U+200D (emoji sequences, Persian and Indic shaping) are ordinary: :func:`reveal` with
``names=False`` marks only the overrides, embeddings and isolates there.
"""

from __future__ import annotations

import re

from engine.terminal_text import INVISIBLE, REORDERING, hidden_chars

_IN_TEXT = re.compile(f"[{REORDERING}]")
_IN_NAMES = re.compile(f"[{REORDERING}{INVISIBLE}]")


def mark(char: str) -> str:
    """The visible stand-in for one hidden character."""
    return f"⟪U+{ord(char):04X}⟫"


def reveal(text: str, names: bool = True) -> str:
    """``text`` with every reordering character (and with ``names``, every invisible one) shown as a mark."""
    pattern = _IN_NAMES if names else _IN_TEXT
    return pattern.sub(lambda m: mark(m.group(0)), text) if isinstance(text, str) else text


def choices(values: list[str]) -> list[tuple[str, str]]:
    """Dropdown choices (shown, value) for names or paths from outside: each shown with its marks."""
    return [(reveal(v), v) for v in values]


def name_problem(name: str) -> str | None:
    """The hidden characters of a typed name as ``U+202E, U+200B`` (None when it has none)."""
    found = hidden_chars(name or "")
    return ", ".join(f"U+{ord(c):04X}" for c in found) if found else None
