"""The columns of a ``.json`` list that LLaMA-Factory's loader reads as dates.

``datasets`` gives a file holding a JSON list to pandas' ``read_json`` (see :mod:`engine.data.rows`), whose defaults
(``convert_dates=True``, ``keep_default_dates=True``) try every top-level column whose name, in lower case, is
``date``, ``datetime`` or ``modified``, starts with ``timestamp`` or ends with ``_at`` or ``_time``, as dates: where
all of its values parse (ISO or other date text, ``now``, epoch numbers past 1971, nulls), the whole column becomes
timestamps. LLaMA-Factory then has no text there: a reply from such a column drops its row, a prompt, query or system
from it stops the run (TypeError). :func:`date_columns` finds those columns with pandas' own reader run on just the
candidate columns; :func:`as_dates` gives a row their values as ``datetime`` (None for a null), so the converters
see what LLaMA-Factory sees.

JSON lines go to pyarrow's JSON reader instead, which makes timestamps of any top-level column (whatever its name)
whose values are all ISO-8601 date text (``2024-01-05``, ``2024-01-05 10:00``, ``...T10:00:00Z``; nulls aside):
:func:`line_date_columns` finds those with pyarrow's own reader run on the candidate values.
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


def line_date_columns(rows: Callable[[], Iterator[dict[str, Any]]]) -> dict[str, list[datetime | None]]:
    """Each top-level column of JSON lines that pyarrow's JSON reader (as ``datasets`` calls it) makes timestamps:
    every value null or ISO-8601 date text, one at least; with its values row by row."""
    found: dict[str, dict[int, str]] = {}
    other: set[str] = set()
    count = 0
    for index, row in enumerate(rows()):
        count = index + 1
        for key, value in row.items():
            if value is None or key in other:
                continue
            if isinstance(value, str) and _ISO_START.match(value):
                found.setdefault(key, {})[index] = value
            else:
                other.add(key)
                found.pop(key, None)
    if not found:
        return {}
    import pyarrow as pa
    import pyarrow.json as paj

    columns: dict[str, list[datetime | None]] = {}
    for key, values in found.items():
        text = "".join(json.dumps({"v": value}) + "\n" for value in values.values()).encode("utf-8")
        try:
            table = paj.read_json(io.BytesIO(text), read_options=paj.ReadOptions(block_size=max(len(text), 1 << 20)))
        except pa.ArrowException:
            continue
        if pa.types.is_timestamp(table.schema.field("v").type):
            stamps = dict(zip(values, table.column("v").to_pylist()))
            columns[key] = [stamps.get(index) for index in range(count)]
    return columns


def _python(value: Any) -> datetime | None:
    if value is None:
        return None
    return value.to_pydatetime() if hasattr(value, "to_pydatetime") else value


def as_dates(row: dict[str, Any], index: int, columns: dict[str, list[datetime | None]]) -> dict[str, Any]:
    """``row`` (the ``index``-th of the list) with the date columns' values as pandas reads them."""
    if not columns:
        return row
    return {**row, **{name: values[index] for name, values in columns.items() if name in row}}
