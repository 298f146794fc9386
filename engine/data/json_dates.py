"""The columns (and, in JSON lines, nested fields) of a data file that LLaMA-Factory's loader reads as dates.

``datasets`` gives a file holding a JSON list to pandas' ``read_json`` (see :mod:`engine.data.rows`), whose defaults
(``convert_dates=True``, ``keep_default_dates=True``) try every top-level column whose name, in lower case, is
``date``, ``datetime`` or ``modified``, starts with ``timestamp`` or ends with ``_at`` or ``_time``, as dates: where
all of its values parse (ISO or other date text, ``now``, epoch numbers past 1971, nulls), the whole column becomes
timestamps. LLaMA-Factory then has no text there: a reply from such a column drops its row, a prompt, query or system
from it stops the run (TypeError). :func:`date_columns` finds those columns with pandas' own reader run on just the
candidate columns; :func:`as_dates` gives a row their values as ``datetime`` (None for a null), so the converters
see what LLaMA-Factory sees.

JSON lines go to pyarrow's JSON reader instead, which makes timestamps of any field (whatever its name, top-level or
nested: a turn's text in a list of turns, a history pair's item, a tool call's argument) whose values are all ISO-8601
date text (``2024-01-05``, ``2024-01-05 10:00``, ``...T10:00:00Z``; nulls aside): :func:`line_dates` finds those
with pyarrow's own reader run on the candidate values. (pandas leaves a list's nested values as they are.)
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

SCAN_CHARS = 1 << 20
_OVERLAP = 4096
_ISO_START = re.compile(r"\d{4}-\d{2}-\d{2}")
"""How every text pyarrow reads as a timestamp starts (a quick filter; pyarrow's own parser decides)."""
_ISO_VALUE = re.compile(r'"\d{4}-\d{2}-\d{2}')
_CANDIDATE_KEY = re.compile(r'"(?:date|datetime|modified|timestamp[^"\\]*|[^"\\]*_at|[^"\\]*_time)"\s*:', re.IGNORECASE)
"""A key pandas may read as dates, as it appears in JSON text (a nested key matches too: the exact check follows)."""

DATE_COLUMN_NOTE = (
    "LLaMA-Factory's loader reads it as dates: in a JSON list file pandas' read_json takes a column named date, "
    "datetime, modified, timestamp* or *_at / *_time whose values all look like dates, in JSON lines pyarrow any "
    "column of ISO dates (2024-01-05...); rename such a column (and in dataset_info.json `columns`), or write its "
    "values in another form"
)
"""What a row error about such a column adds (the reason and the way out)."""

NESTED_DATE_NOTE = (
    "LLaMA-Factory's loader reads JSON lines with pyarrow, which makes timestamps of every field whose values are all "
    "ISO dates (2024-01-05...) in the file, nested ones too (the texts of all turns of a list share one field), and "
    "its run stops on them; save the file as a JSON list (one [...] holding the rows, read as text), or write those "
    "values in another form"
)
"""What the refusal of a row whose nested text is a date adds (the reason and the way out)."""


def is_date_name(name: Any) -> bool:
    """Whether pandas' ``read_json`` tries column ``name`` as dates (its ``keep_default_dates`` rule)."""
    if not isinstance(name, str):
        return False
    lower = name.lower()
    return (lower.endswith(("_at", "_time")) or lower in ("modified", "date", "datetime")
            or lower.startswith("timestamp"))


def may_hold_dates(path: Path, pattern: re.Pattern[str] = _CANDIDATE_KEY) -> bool:
    """Whether the text of ``path`` has a key pandas may read as dates (a quick scan; most files have none), or with
    ``pattern`` :data:`_ISO_VALUE`, a text pyarrow may read as a timestamp."""
    tail = ""
    with path.open(encoding="utf-8-sig") as handle:
        while chunk := handle.read(SCAN_CHARS):
            text = tail + chunk
            if pattern.search(text):
                return True
            tail = text[-_OVERLAP:]
    return False


def date_columns(rows: Callable[[], Iterator[dict[str, Any]]]) -> dict[str, list[datetime | None]]:
    """Each column of the rows that pandas' ``read_json`` (as ``datasets`` calls it) turns into dates, with its
    values row by row (None for a missing or null one); ``rows`` gives the list's rows afresh."""
    records: list[dict[str, Any]] = []
    names: set[str] = set()
    for row in rows():
        found = {key: value for key, value in row.items() if is_date_name(key)} if isinstance(row, dict) else {}
        names.update(found)
        records.append(found)
    if not names:
        return {}
    import pandas as pd
    import pyarrow as pa

    try:
        frame = pd.read_json(io.StringIO(json.dumps(records)), dtype_backend="pyarrow")
        table = pa.Table.from_pandas(frame[[name for name in frame.columns if name in names]], preserve_index=False)
    except (ValueError, TypeError, pa.ArrowException):  # not a frame pandas makes: the columns stay as they are
        return {}
    return {field.name: [_python(value) for value in table.column(field.name).to_pylist()]
            for field in table.schema if pa.types.is_timestamp(field.type) or pa.types.is_date(field.type)}


def may_hold_iso_dates(path: Path) -> bool:
    """Whether the text of ``path`` has a string starting as an ISO date (a quick scan)."""
    return may_hold_dates(path, _ISO_VALUE)


class LineDates:
    """The fields of JSON lines that pyarrow's JSON reader (as ``datasets`` calls it) makes timestamps, top-level or
    nested, and each of their texts' timestamp; :meth:`apply` gives a row with those values as ``datetime``.

    pyarrow types a field by its path (a key, then a key or a list's items at each level: every message's
    ``value`` of a ``conversations`` list shares one type), over the whole file: a path whose values are all null or
    ISO-8601 date text, one at least, holds timestamps."""

    def __init__(self, stamps: dict[tuple[Any, ...], dict[str, datetime]]) -> None:
        self._tree = _tree(stamps)

    def apply(self, row: dict[str, Any]) -> dict[str, Any]:
        return _stamped(row, self._tree)


def _tree(stamps: dict[tuple[Any, ...], dict[str, Any]]) -> dict[Any, Any]:
    """The paths of ``stamps`` as a tree of steps whose leaves are their values (as :class:`_Stamps`)."""
    tree: dict[Any, Any] = {}
    for path, values in stamps.items():
        node = tree
        for step in path[:-1]:
            node = node.setdefault(step, {})
        node[path[-1]] = _Stamps(values)
    return tree


def _stamped(value: Any, node: Any) -> Any:
    """``value`` with the texts at the paths of ``node`` (a tree of steps whose leaves map text to timestamp) as
    timestamps; containers are copied only where they change."""
    if isinstance(value, dict):
        if not any(key in node for key in value):
            return value
        return {key: _stamp(item, node[key]) if key in node else item for key, item in value.items()}
    if isinstance(value, list) and ITEMS in node:
        return [_stamp(item, node[ITEMS]) for item in value]
    return value


def _stamp(value: Any, node: Any) -> Any:
    if isinstance(node, _Stamps):
        return node.get(value, value) if isinstance(value, str) else value
    return _stamped(value, node)


def _untyped(value: Any, node: dict[Any, Any], path: tuple[Any, ...], texts: dict[tuple[Any, ...], set[str]]) -> None:
    """Drop from ``texts`` each of its fields (``node``: their tree below ``path``) where ``value`` holds something
    other than null (a row with no date text)."""
    if isinstance(value, dict):
        keys: Any = value.items()
    elif isinstance(value, list):
        keys = ((ITEMS, item) for item in value)
    else:
        return
    for key, item in keys:
        if key in node and item is not None:
            if isinstance(node[key], _Stamps):
                texts.pop((*path, key), None)
            else:
                _untyped(item, node[key], (*path, key), texts)


class _Stamps(dict):
    """A leaf of :class:`LineDates`' tree: each text of the path with its timestamp."""


ITEMS = 0
"""The step of a path into a list's items (JSON keys are text, so a number cannot be taken for one)."""


def line_dates(lines: Callable[[], Iterator[tuple[str, dict[str, Any]]]]) -> LineDates | None:
    """The fields of JSON lines (``lines`` gives each line's text and row afresh) that pyarrow's JSON reader makes
    timestamps; None when there is none. Only the rows whose text holds a string starting as an ISO date are walked
    whole; the others only along the fields found so, where a value that is not null keeps the field untyped."""
    texts: dict[tuple[Any, ...], set[str]] = {}
    other: set[tuple[Any, ...]] = set()
    plain = False
    for line, row in lines():
        if not _ISO_VALUE.search(line):
            plain = True
            continue
        stack: list[tuple[tuple[Any, ...], Any]] = [((key,), value) for key, value in row.items()]
        while stack:
            path, value = stack.pop()
            if value is None:
                continue
            if isinstance(value, str) and _ISO_START.match(value):
                if path not in other:
                    texts.setdefault(path, set()).add(value)
                continue
            other.add(path)  # anything else (a number, other text, a list or object) keeps the path untyped
            texts.pop(path, None)
            if isinstance(value, dict):
                stack.extend(((*path, key), item) for key, item in value.items())
            elif isinstance(value, list):
                stack.extend(((*path, ITEMS), item) for item in value)
    if texts and plain:
        tree = _tree(dict.fromkeys(texts, {}))
        for line, row in lines():
            if not _ISO_VALUE.search(line):
                _untyped(row, tree, (), texts)
                if not texts:
                    break
    if not texts:
        return None
    import pyarrow as pa
    import pyarrow.json as paj

    stamps: dict[tuple[Any, ...], dict[str, datetime]] = {}
    for path, values in texts.items():
        ordered = sorted(values)
        text = "".join(json.dumps({"v": value}) + "\n" for value in ordered).encode("utf-8")
        try:
            table = paj.read_json(io.BytesIO(text), read_options=paj.ReadOptions(block_size=max(len(text), 1 << 20)))
        except pa.ArrowException:
            continue
        if pa.types.is_timestamp(table.schema.field("v").type):
            stamps[path] = dict(zip(ordered, table.column("v").to_pylist()))
    return LineDates(stamps) if stamps else None


def _python(value: Any) -> datetime | None:
    if value is None:
        return None
    return value.to_pydatetime() if hasattr(value, "to_pydatetime") else value


def as_dates(row: dict[str, Any], index: int, columns: dict[str, list[datetime | None]]) -> dict[str, Any]:
    """``row`` (the ``index``-th of the list) with the date columns' values as pandas reads them."""
    if not columns:
        return row
    return {**row, **{name: values[index] for name, values in columns.items() if name in row}}
