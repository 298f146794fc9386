"""The columns of a ``.json`` list that LLaMA-Factory's loader reads as dates.

``datasets`` gives a file holding a JSON list to pandas' ``read_json`` (see :mod:`engine.data.rows`), whose defaults
(``convert_dates=True``, ``keep_default_dates=True``) try every top-level column whose name, in lower case, is
``date``, ``datetime`` or ``modified``, starts with ``timestamp`` or ends with ``_at`` or ``_time``, as dates: where
all of its values parse (ISO or other date text, ``now``, epoch numbers past 1971, nulls), the whole column becomes
timestamps. LLaMA-Factory then has no text there: a reply from such a column drops its row, a prompt, query or system
from it stops the run (TypeError). :func:`date_columns` finds those columns with pandas' own reader run on just the
candidate columns; :func:`as_dates` gives a row their values as ``datetime`` (None for a null), so the converters
see what LLaMA-Factory sees.
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
_CANDIDATE_KEY = re.compile(r'"(?:date|datetime|modified|timestamp[^"\\]*|[^"\\]*_at|[^"\\]*_time)"\s*:', re.IGNORECASE)
"""A key pandas may read as dates, as it appears in JSON text (a nested key matches too: the exact check follows)."""

DATE_COLUMN_NOTE = (
    "pandas' read_json, LLaMA-Factory's reader of a JSON list file, reads a column named date, datetime, modified, "
    "timestamp* or *_at / *_time as dates where all its values look like dates: rename the column in the file and in "
    "dataset_info.json `columns`"
)
"""What a row error about such a column adds (the reason and the way out)."""


def is_date_name(name: Any) -> bool:
    """Whether pandas' ``read_json`` tries column ``name`` as dates (its ``keep_default_dates`` rule)."""
    if not isinstance(name, str):
        return False
    lower = name.lower()
    return (lower.endswith(("_at", "_time")) or lower in ("modified", "date", "datetime")
            or lower.startswith("timestamp"))


def may_hold_dates(path: Path) -> bool:
    """Whether the text of ``path`` has a key pandas may read as dates (a quick scan; most files have none)."""
    tail = ""
    with path.open(encoding="utf-8-sig") as handle:
        while chunk := handle.read(SCAN_CHARS):
            text = tail + chunk
            if _CANDIDATE_KEY.search(text):
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


def _python(value: Any) -> datetime | None:
    if value is None:
        return None
    return value.to_pydatetime() if hasattr(value, "to_pydatetime") else value


def as_dates(row: dict[str, Any], index: int, columns: dict[str, list[datetime | None]]) -> dict[str, Any]:
    """``row`` (the ``index``-th of the list) with the date columns' values as pandas reads them."""
    if not columns:
        return row
    return {**row, **{name: values[index] for name, values in columns.items() if name in row}}
