"""Turns with no text (a null or missing content), on which LLaMA-Factory 0.9.5's run stops rather than skipping
the row: its template formats each turn it trains on and fails on None ("Expected a string, got None").

A converter notes the first such turn of a row on the example (:func:`note`); :func:`refuse` raises
:class:`RefusedRow` for it once the row is known to be one LLaMA-Factory would format for the stage (rows it skips
first, such as a wrong role order, are skipped here too), and the loader then refuses the whole dataset.
"""

from __future__ import annotations

from typing import Any

KEY = "no_text"


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
