"""Turns with no text (a null or missing content), on which LLaMA-Factory 0.9.5's run stops rather than skipping
the row: its template formats each turn it trains on and fails on None ("Expected a string, got None").

A converter notes the first such turn of a row on the example (:func:`note`); :func:`refuse` raises
:class:`RefusedRow` for it once the row is known to be one LLaMA-Factory would format for the stage (rows it skips
first, such as a wrong role order, are skipped here too), and the loader then refuses the whole dataset.

Turns whose text its loader read as a date (a nested field of JSON lines, :mod:`engine.data.json_dates`) stop it
the same way ("Expected a string, got 2024-01-05 00:00:00"): :func:`undate` blanks them and :func:`note_dated` /
:func:`refuse_dated` refuse the row as above. Tool calls or tools holding a date stop its converter on every row
(``json.dumps``): :func:`refuse_date` refuses those at once.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from engine.data.json_dates import NESTED_DATE_NOTE

KEY = "no_text"
DATED = "dated_turn"


class RefusedRow(ValueError):
    """A row on which LLaMA-Factory's whole run stops (not one it skips): the dataset is refused, naming the row."""


def note(example: dict[str, Any], found: list[tuple[int, str]], detail: str) -> None:
    """Note the first of ``found`` (each: the turn's index among the example's messages, where it is) on
    ``example``; ``detail`` says what is null, such as "its 'value' is null or missing"."""
    if found:
        example[KEY] = (*found[0], detail)


def refuse(found: tuple[int, str, str] | None, stage: str) -> None:
    """Raise RefusedRow for a noted turn (``found``: its message index, where it is, what is null); pre-training
    reads the first message alone, as there."""
    if found is None:
        return
    index, where, detail = found
    if stage != "pt" or index == 0:
        raise RefusedRow(f"{where} has no text ({detail}); LLaMA-Factory stops on such a turn. Give it text (an "
                         "empty string \"\" trains an empty turn), or remove the row.")


def holds_date(value: Any) -> bool:
    """Whether ``value`` is, or holds at any depth, a date (a text LLaMA-Factory's loader read as a timestamp)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, datetime):
            return True
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return False


def undate(turns: list[Any], content_tag: str) -> tuple[list[Any], list[int]]:
    """``turns`` with each content that is a date made empty text, and the indices of those turns."""
    dated = [index for index, turn in enumerate(turns)
             if isinstance(turn, dict) and isinstance(turn.get(content_tag), datetime)]
    if not dated:
        return turns, []
    return [{**turn, content_tag: ""} if index in dated else turn for index, turn in enumerate(turns)], dated


def note_dated(example: dict[str, Any], found: list[tuple[int, str]]) -> None:
    """Note the first of ``found`` (a turn whose text was a date: its index among the example's messages, -1 for a
    system turn, and where it is) on ``example``."""
    if found:
        example[DATED] = found[0]


def refuse_dated(found: tuple[int, str] | None, stage: str) -> None:
    """Raise RefusedRow for a noted turn whose text was a date; pre-training reads the first message alone."""
    if found is not None and (stage != "pt" or found[0] == 0):
        raise RefusedRow(f"{found[1]} holds a date, not text: {NESTED_DATE_NOTE}.")


def refuse_date(value: Any, where: str) -> None:
    """Raise RefusedRow where ``value`` (tool calls, tools) holds a date."""
    if holds_date(value):
        raise RefusedRow(f"{where} hold a date, which LLaMA-Factory cannot write as JSON: {NESTED_DATE_NOTE}.")
