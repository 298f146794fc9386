"""Read data files into lists of row dicts: json (a list of objects), jsonl, csv, parquet, txt, and folders.

A ``.txt`` file gives one row ``{"text": line}`` per non-blank line (pre-training text). A folder is read file by
file in name order; all its data files must share one extension. These are the list forms of the streaming
readers in :mod:`engine.data.rows` (the loader streams; a list is for small files and checks).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.data.rows import ROW_READERS, iter_csv, iter_json, iter_jsonl, iter_parquet, iter_rows, iter_text


def read_json(path: Path) -> list[dict[str, Any]]:
    """A JSON file holding a list of objects (a .json file with one object per line is read as JSON lines)."""
    return list(iter_json(path))


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A file with one JSON object per line (blank lines ignored)."""
    return list(iter_jsonl(path))


def read_csv(path: Path) -> list[dict[str, Any]]:
    """A CSV file with a header row."""
    return list(iter_csv(path))


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """A Parquet file (needs pyarrow)."""
    return list(iter_parquet(path))


def read_text(path: Path) -> list[dict[str, Any]]:
    """One ``{"text": line}`` row per non-blank line."""
    return list(iter_text(path))


READERS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    ".json": read_json,
    ".jsonl": read_jsonl,
    ".csv": read_csv,
    ".parquet": read_parquet,
    ".txt": read_text,
}
assert set(READERS) == set(ROW_READERS)


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All rows of a data file or a folder of data files.

    Raises:
        DatasetError: for a missing path, an unsupported extension or unreadable content.
    """
    return list(iter_rows(path))
