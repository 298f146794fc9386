"""Hidden characters in the config's names and paths: refused before anything uses them.

A run's name goes to every tracker (TensorBoard, W&B, MLflow, trackio) and to the logs; an output folder's name to
the file system and every message about it. A line break there forges a log line, a carriage return or an escape
rewrites the terminal, a right-to-left override (U+202E) shows the rest of the name reversed, and a zero-width
character makes two names that look the same differ. None of them has a use in a name, so each is refused with the
key, the character by its code point (such as U+200B) and where it is.

Names of things the job creates are held to every such character (:func:`engine.terminal_text.hidden_chars`).
Paths and names of things that exist already (a model folder, a dataset) are held to the characters that forge or
reorder text only (controls, line separators, bidi embeddings, overrides and isolates), since a folder someone else
named may hold a joiner that is part of its script.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Any

from engine.config.limits import PATH_KEYS
from engine.errors import Problem
from engine.terminal_text import REORDERING, hidden_chars

NEW_NAME_KEYS = ("output_dir", "export_dir", "export_hub_model_id", "tokenized_path", "ray_run_name",
                 "ray_storage_path", "run_name", "project", "trackio_space_id", "trackio_bucket_id",
                 "trackio_static_space_id", "hub_model_id", "hub_revision")
"""Keys that name something the job creates or reports to (a folder, a run in a tracker, a hub repo)."""

_REORDERING = re.compile(f"[{REORDERING}]")


def _forging(text: str) -> list[str]:
    """The distinct characters of ``text`` that break or reorder a line: controls, separators, bidi controls."""
    found: list[str] = []
    for char in text:
        if char not in found and (_REORDERING.match(char) or unicodedata.category(char) in ("Cc", "Zl", "Zp")):
            found.append(char)
    return found


def _described(char: str) -> str:
    name = unicodedata.name(char, "")
    if not name:
        name = {"\n": "LINE FEED", "\r": "CARRIAGE RETURN", "\t": "TAB", "\x1b": "ESCAPE", "\x00": "NUL"}.get(
            char, "a control character")
    return f"U+{ord(char):04X} ({name})"


def hidden_char_problems(mapping: dict[str, Any]) -> list[Problem]:
    """A problem for each name or path key whose text holds a character it must not (see the module)."""
    problems = []
    for key, value in mapping.items():
        new = key in NEW_NAME_KEYS
        if not (new or key in PATH_KEYS):
            continue
        texts = [v for v in value if isinstance(v, str)] if isinstance(value, (list, tuple)) else [value]
        text = ",".join(t for t in texts if isinstance(t, str))
        found = hidden_chars(text) if new else _forging(text)
        if not found:
            continue
        where = text.index(found[0]) + 1
        chars = ", ".join(_described(c) for c in found[:5]) + (f" and {len(found) - 5} more" if len(found) > 5 else "")
        what = ("a name the job creates or reports must read as it is shown" if new else
                "a path or name here must not break or reorder the lines that quote it")
        problems.append(Problem(
            f"`{key}` holds {chars} (the first at character {where}): invisible, control or text-reordering "
            f"characters, and {what}. Type the value again without them"
            + (", or rename the folder." if not new else "."), "hidden_chars"))
    return problems
