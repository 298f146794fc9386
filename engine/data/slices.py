"""dataset_info.json's ``split`` for local files, as ``datasets.load_dataset(..., split=...)`` applies it.

LLaMA-Factory passes an entry's ``split`` (default ``train``) to ``datasets``, which reads a local file as one split,
``train``, and slices it with its split syntax: ``train[:10]`` (the first 10 rows), ``train[75%:]`` (the last quarter,
percentages rounded to the closest row, or ``(pct1_dropremainder)``), negative bounds counted from the end, and parts
joined with ``+`` (``train[:10]+train[20:30]``), each part read in turn. The boundaries, the errors and the quirks
here are those of ``datasets``' ``ReadInstruction`` (arrow_reader.py, datasets 4.0 to 5.2) on an unsharded split:
a part whose end is one before its start (``train[10:9]``) reads from its start to the end, one whose start and end
are equal at the file's rows is left out, and a split whose every part is left out is an error.

The rows are read as a stream: a slice with a known end stops reading there; a percentage or a negative bound needs
the number of rows, counted by a first pass over the file.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from engine.data.errors import DatasetError

# datasets.naming._split_re, datasets.arrow_reader._SUB_SPEC_RE and _ADDITION_SEP_RE
_SPLIT_NAME = re.compile(r"^\w+(\.\w+)*$")
_SUB_SPEC = re.compile(
    r"""
^
 (?P<split>\w+(\.\w+)*)
 (\[
    ((?P<from>-?[\d_]+)
     (?P<from_pct>%)?)?
    :
    ((?P<to>-?[\d_]+)
     (?P<to_pct>%)?)?
 \])?(\((?P<rounding>[^\)]*)\))?
$
""",
    re.X,
)
_ADDITION_SEP = re.compile(r"\s*\+\s*")
LOCAL_SPLIT = "train"
"""The one split ``datasets`` makes of local data files."""


@dataclass(frozen=True)
class SplitPart:
    """One ``+``-separated part of a split spec (datasets' ``_RelativeInstruction``)."""

    split: str
    from_: int | None = None
    to: int | None = None
    unit: str = "abs"
    rounding: str | None = None

    @property
    def needs_count(self) -> bool:
        """Whether the part's rows depend on the number of rows (a percentage or a negative bound)."""
        return self.unit == "%" or (self.from_ or 0) < 0 or (self.to or 0) < 0


def _part(text: str) -> SplitPart:
    match = _SUB_SPEC.match(text)
    if not match:
        raise ValueError(f"Unrecognized instruction format: {text}")
    unit = "%" if match.group("from_pct") or match.group("to_pct") else "abs"
    from_ = int(match.group("from")) if match.group("from") else None
    to = int(match.group("to")) if match.group("to") else None
    rounding = match.group("rounding")
    if rounding is not None and rounding not in ("closest", "pct1_dropremainder"):
        raise ValueError("rounding must be either closest or pct1_dropremainder")
    if unit != "%" and rounding is not None:
        raise ValueError("It is forbidden to specify rounding if not using percent slicing.")
    if unit == "%" and ((from_ is not None and abs(from_) > 100) or (to is not None and abs(to) > 100)):
        raise ValueError("Percent slice boundaries must be > -100 and < 100.")
    if unit == "%" and rounding is None:
        rounding = "closest"
    return SplitPart(match.group("split"), from_, to, unit, rounding)


def parse_split(spec: str) -> list[SplitPart] | None:
    """The parts of a split spec for a local file; None when it is the whole file (``train`` or ``all``).

    Raises:
        ValueError: with ``datasets``' message, for whatever ``datasets`` refuses before it counts rows (a bad
            spec, a split other than ``train``).
    """
    spec = str(spec)
    if spec in ("all", LOCAL_SPLIT):
        return None
    for text in spec.split("+"):  # datasets' NamedSplit check comes first
        name = text.split("[")[0]
        if not _SPLIT_NAME.match(name):
            raise ValueError(f"Split name should match '{_SPLIT_NAME.pattern}' but got '{name}'.")
    parts = [_part(text) for text in _ADDITION_SEP.split(spec)]
    for part in parts[1:]:  # ReadInstruction.__add__ compares each part with the first
        if parts[0].unit != "abs" and part.unit != "abs" and parts[0].rounding != part.rounding:
            raise ValueError("It is forbidden to sum ReadInstruction instances with different rounding values.")
    for part in parts:
        if part.split != LOCAL_SPLIT:
            raise ValueError(f'Unknown split "{part.split}". Should be one of [\'{LOCAL_SPLIT}\'].')
    return parts


def _pct(part: SplitPart, boundary: int, rows: int) -> int:
    if part.rounding == "closest":
        return int(round(boundary * rows / 100.0))
    if rows < 100:
        raise ValueError('Using "pct1_dropremainder" rounding on a split with less than 100 elements is forbidden: '
                         "it always results in an empty dataset.")
    return boundary * math.trunc(rows / 100.0)


def absolute_bounds(parts: list[SplitPart], rows: int) -> list[tuple[int, int]]:
    """(from, to) of each part on a file of ``rows`` rows (datasets' ``_rel_to_abs_instr``)."""
    bounds = []
    for part in parts:
        from_, to = part.from_, part.to
        if part.unit == "%":
            from_ = 0 if from_ is None else _pct(part, from_, rows)
            to = rows if to is None else _pct(part, to, rows)
        else:
            from_ = 0 if from_ is None else from_
            to = rows if to is None else to
        if from_ < 0:
            from_ = max(rows + from_, 0)
        if to < 0:
            to = max(rows + to, 0)
        bounds.append((min(from_, rows), min(to, rows)))
    return bounds


def row_ranges(parts: list[SplitPart], rows: int) -> list[tuple[int, int | None]] | None:
    """The row ranges (start, stop; None: to the end) the parts read, in order, as datasets reads an unsharded
    split: ``take = to - from``, left out when 0, to the end when -1, nothing when lower; None when every part is
    left out (datasets: "corresponds to no data")."""
    ranges: list[tuple[int, int | None]] = []
    taken = False
    for from_, to in absolute_bounds(parts, rows):
        take = to - from_
        if take == 0:
            continue
        taken = True
        if take == -1:
            ranges.append((from_, None))
        elif take > 0:
            ranges.append((from_, to))
    return ranges if taken else None


def _no_data(name: str, spec: str) -> DatasetError:
    return DatasetError(
        f"Dataset {name!r}: `split: {spec}` in dataset_info.json selects no rows of its file (datasets: "
        f"Instruction \"{spec}\" corresponds to no data!; LLaMA-Factory fails the same way). Start the slice within "
        "the file's rows, or remove `split` to use every row."
    )


def split_error(name: str, spec: str, err: ValueError) -> DatasetError:
    """The error for a ``split`` datasets refuses, naming the entry and the fix."""
    return DatasetError(
        f"Dataset {name!r}: `split: {spec}` in dataset_info.json cannot be read ({str(err).rstrip('.')}; "
        f"LLaMA-Factory fails the same way). A local file has one split, `{LOCAL_SPLIT}`: write `{LOCAL_SPLIT}`, a slice of it such as "
        f"`{LOCAL_SPLIT}[:100]`, `{LOCAL_SPLIT}[10%:]` or `{LOCAL_SPLIT}[:10]+{LOCAL_SPLIT}[20:30]`, or remove "
        "`split`."
    )


def check_split(name: str, spec: str | None) -> None:
    """Refuse a local entry's ``split`` that datasets refuses whatever the file holds (raises DatasetError)."""
    if spec is not None:
        try:
            parse_split(spec)
        except ValueError as err:
            raise split_error(name, spec, err) from None


def split_rows(open_rows: Callable[[], Iterator[dict[str, Any]]], spec: str | None,
               name: str) -> Iterator[dict[str, Any]]:
    """The rows a local file's ``split`` selects; ``open_rows()`` reads the file's rows from the start (it is called
    once per part, plus once to count the rows when a part needs the count).

    Raises:
        DatasetError: for a split datasets refuses (at once), or one that selects no rows (when that is known).
    """
    try:
        parts = None if spec is None else parse_split(spec)
    except ValueError as err:
        raise split_error(name, spec, err) from None
    if parts is None:
        return open_rows()
    return _split_rows(open_rows, parts, spec, name)


def _split_rows(open_rows: Callable[[], Iterator[dict[str, Any]]], parts: list[SplitPart], spec: str,
                name: str) -> Iterator[dict[str, Any]]:
    if any(part.needs_count for part in parts):
        rows = sum(1 for _ in open_rows())
        try:
            ranges = row_ranges(parts, rows)
        except ValueError as err:
            raise split_error(name, spec, err) from None
        if ranges is None:
            raise _no_data(name, spec)
        for start, stop in ranges:
            yield from itertools.islice(open_rows(), start, stop)
        return
    # non-negative whole-row bounds: each part reads only as far as it needs
    taken = False
    for part in parts:
        start, stop = part.from_ or 0, part.to
        if stop is None or start <= stop:  # datasets' take = min(stop, n) - min(start, n) > 0 iff a row is read
            for row in itertools.islice(open_rows(), start, stop):
                taken = True
                yield row
            continue
        # start > stop: take = min(stop, n) - min(start, n) is not 0 iff the file has a row `stop`; it is -1 (read
        # from `start` to the end) iff stop == start - 1, else it reads nothing
        stream = open_rows()
        if next(itertools.islice(stream, stop, None), None) is not None:
            taken = True
            if stop == start - 1:
                yield from stream
    if not taken:
        raise _no_data(name, spec)
