"""A reward model's new value head, said plainly instead of transformers' load report.

Loading a causal LM's checkpoint as a sequence-classification model (``stage: rm``) leaves its value head
(``score``) out of the checkpoint by nature, and the checkpoint's output head (``lm_head``, where it is not tied to
the embeddings) has no place in it: transformers then logs a warning-level "LOAD REPORT" table (with
terminal colour codes, in the run's log and on the board) that reads like a failed load. :func:`new_reward_head`
drops that report when those two are all it lists, and the loader says in one line what happened. A report that
lists anything else (other missing, unexpected or mismatched weights) is left as it is.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager

REPORT_LOGGER = "transformers.modeling_utils"
EXPECTED_ROWS = {"MISSING": ("score.",), "UNEXPECTED": ("lm_head.",)}
"""Rows of a causal LM's checkpoint loaded as transformers' ``*ForSequenceClassification``: its new value head,
and the language-model head it does not use."""

_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class _HeadOnlyReport(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.keys: list[str] = []

    def filter(self, record: logging.LogRecord) -> bool:
        keys = head_only_keys(record.getMessage())
        if keys is None:
            return True
        self.keys.extend(keys)
        return False


def head_only_keys(message: str) -> list[str] | None:
    """The new value-head keys of a load report that lists nothing but :data:`EXPECTED_ROWS`; None for any other
    message (another report, or not a report)."""
    text = _ANSI.sub("", message)
    if "LOAD REPORT" not in text:
        return None
    new = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) < 2 or cells[0] in ("Key", "") or set(cells[0]) <= set("-+"):
            continue
        if not cells[0].startswith(EXPECTED_ROWS.get(cells[1], ())):
            return None
        if cells[1] == "MISSING":
            new.append(cells[0])
    return new or None


@contextmanager
def new_reward_head(active: bool) -> Iterator[list[str]]:
    """While loading: drop transformers' report when only the value head is new; yields the keys it dropped."""
    if not active:
        yield []
        return
    quiet = _HeadOnlyReport()
    logger = logging.getLogger(REPORT_LOGGER)
    logger.addFilter(quiet)
    try:
        yield quiet.keys
    finally:
        logger.removeFilter(quiet)
