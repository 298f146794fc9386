"""A resumed run repeats the steps after its checkpoint: the lines the run it resumes logged for them are dropped
from its event files (events.jsonl, completions.jsonl), or its curves would show those steps twice.

The files are read one line at a time and written again only when a line goes: a long run's events.jsonl is tens
of MB, and a crash can leave a run of zero bytes of any length (a sparse file), so neither is ever held whole. A line
past :data:`engine.runs.MAX_EVENT_LINE` is no event: it is copied through as it is, in pieces. A file that is no
regular file (a named pipe, a link to a device) is left alone, not waited on.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from engine.atomic_write import write_atomic
from engine.runs import EVENTS_FILE, MAX_EVENT_LINE, RUN_SAMPLES, open_regular

logger = logging.getLogger(__name__)

PIECE = 1 << 20
"""The piece size (bytes) a line past the bound is copied in."""


def forget_steps_after(folder: Path, step: int, names: tuple[str, ...] = (EVENTS_FILE, RUN_SAMPLES)) -> int:
    """Drop the lines of ``folder``'s event files logged for steps after ``step``; each file changed is replaced
    whole (atomically). Returns the lines dropped."""
    dropped = 0
    for name in names:
        path = Path(folder) / name
        try:
            fh = open_regular(path)
        except OSError:  # missing; or a pipe or a device, which holds no run's lines
            continue
        with fh:
            later = sum(drop for _, drop in _pieces(fh, step))
            if not later:
                continue
            fh.seek(0)
            try:
                write_atomic(path, (piece for piece, drop in _pieces(fh, step) if not drop))
                dropped += later
            except OSError as err:
                logger.warning("Could not drop the steps after %d from %s: %s", step, path, err)
    return dropped


def _pieces(fh: BinaryIO, step: int) -> Iterator[tuple[bytes, bool]]:
    """``(bytes, dropped)`` for each line of ``fh`` in order, ``dropped`` when it is a step's line after ``step``.
    Bytes: a line torn in the middle of a character (a killed run) is kept as it is, not decoded. A line past the
    bound comes in pieces, all kept."""
    while line := fh.readline(MAX_EVENT_LINE + 1):
        if len(line) > MAX_EVENT_LINE and not line.endswith(b"\n"):
            yield line, False
            while rest := fh.readline(PIECE):
                yield rest, False
                if rest.endswith(b"\n"):
                    break
            continue
        try:
            later = int(json.loads(line).get("step") or 0) > step
        except (ValueError, TypeError, AttributeError, OverflowError, RecursionError):
            later = False  # not a step's line: kept as it is
        yield line, later
