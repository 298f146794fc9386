"""Bounded curves: every chart the board sends holds at most ``LIMIT`` points per series, however long the run
(loss.png too, at its own limit: :mod:`engine.train.plotting`).

A run that logs every step for 20,000 steps would otherwise send 20,000 points per chart on every tick of the
page's timer. Charts are a few hundred pixels wide, so the board keeps a min/max summary instead: the points are cut
into buckets of consecutive points and each bucket keeps its lowest and its highest point (in their order), plus the
series' first and last points. A loss spike is the highest point of its bucket, so it stays on the chart; the start
and the latest point are always there. A series of at most ``LIMIT`` points is sent exactly as it is.

- :class:`Curve` is the live form: points are appended one at a time (the monitor's incremental reading), each
  append costs O(1) amortised, memory and :meth:`Curve.points` are bounded by the limit whatever the run's length.
- :func:`curve_of` reads a finished run's events once, line by line, into a :class:`Curve` (History's overlays).

Values that are not numbers (NaN) stay points of the series (first or last), but never stand for a bucket's low or
high while the bucket holds a number.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from engine.runs import MAX_EVENT_LINE, bounded_lines, open_regular

LIMIT = 1000
"""The most points per series that a chart receives."""

MIN_LIMIT = 8

Point = tuple[int, float]


def _check_limit(limit: int) -> int:
    if not isinstance(limit, int) or limit < MIN_LIMIT:
        raise ValueError(f"a curve's point limit must be an integer >= {MIN_LIMIT}, got {limit!r}")
    return limit


def _lower(a: float, b: float) -> bool:
    """Whether ``a`` should replace ``b`` as a bucket's low (a number always replaces NaN)."""
    return a < b or (math.isnan(b) and not math.isnan(a))


def _higher(a: float, b: float) -> bool:
    return a > b or (math.isnan(b) and not math.isnan(a))


class Curve:
    """A series of (step, value) points appended in order, summarised to at most ``limit`` points.

    Up to ``limit`` points are kept exactly. Beyond that, point ``i`` belongs to bucket ``i // size`` (``size`` a
    power of two that doubles, merging neighbouring buckets, whenever there would be more than ``(limit - 2) // 2``
    buckets); each bucket keeps its low and high point.
    """

    __slots__ = ("limit", "count", "_size", "_buckets", "_first", "_last")

    def __init__(self, limit: int = LIMIT, points: Iterable[Point] = ()):
        self.limit = _check_limit(limit)
        self.count = 0
        self._size = 1
        # each bucket: [low, high] as (index, step, value); with size 1 both are the one point
        self._buckets: list[list[tuple[int, int, float]]] = []
        self._first: tuple[int, int, float] | None = None
        self._last: tuple[int, int, float] | None = None
        for step, value in points:
            self.append(step, value)

    def __len__(self) -> int:
        """How many points were appended (not how many are kept)."""
        return self.count

    def __bool__(self) -> bool:
        return self.count > 0

    @property
    def last(self) -> Point | None:
        """The latest point, exactly."""
        return None if self._last is None else (self._last[1], self._last[2])

    def _max_buckets(self) -> int:
        return self.limit if self._size == 1 else (self.limit - 2) // 2

    def append(self, step: int, value: float) -> None:
        point = (self.count, step, value)
        self.count += 1
        if self._first is None:
            self._first = point
        self._last = point
        key = point[0] // self._size
        if key < len(self._buckets):
            bucket = self._buckets[key]
            if _lower(value, bucket[0][2]):
                bucket[0] = point
            if _higher(value, bucket[1][2]):
                bucket[1] = point
            return
        self._buckets.append([point, point])
        while len(self._buckets) > self._max_buckets():
            self._merge()

    def _merge(self) -> None:
        """Double the bucket size: each pair of neighbouring buckets becomes one."""
        merged = []
        for i in range(0, len(self._buckets), 2):
            pair = self._buckets[i : i + 2]
            low = pair[0][0]
            high = pair[0][1]
            if len(pair) == 2:
                if _lower(pair[1][0][2], low[2]):
                    low = pair[1][0]
                if _higher(pair[1][1][2], high[2]):
                    high = pair[1][1]
            merged.append([low, high])
        self._buckets = merged
        self._size *= 2

    def points(self) -> list[Point]:
        """The kept points in order: all of them while there are at most ``limit``; else first, each bucket's low
        and high, last (never more than ``limit``)."""
        if self._size == 1:
            return [(b[0][1], b[0][2]) for b in self._buckets]
        kept = {self._first[0]: self._first, self._last[0]: self._last}  # type: ignore[index]
        for low, high in self._buckets:
            kept[low[0]] = low
            kept[high[0]] = high
        return [(p[1], p[2]) for _, p in sorted(kept.items())]


def iter_events(path: str | Path) -> Iterator[dict[str, Any]]:
    """The events of a run's events.jsonl, one line at a time (a long run's file is never held in memory whole);
    lines that are not JSON objects (a torn last line) are skipped; a missing file has none."""
    try:
        fh = open_regular(path)  # a pipe or a device put in its place would hold the page forever
    except OSError:
        return
    with fh:
        for line in bounded_lines(fh, MAX_EVENT_LINE):  # a line of a gigabyte is passed over, never held
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(event, dict):
                yield event


def curve_of(path: str | Path, pick: Callable[[dict[str, Any]], Point | None], limit: int = LIMIT) -> list[Point]:
    """The bounded curve of the points ``pick(event)`` finds in a run's events (None: not a point), read once."""
    curve = Curve(limit)
    for event in iter_events(path):
        point = pick(event)
        if point is not None:
            curve.append(*point)
    return curve.points()
