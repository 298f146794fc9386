"""Read data files into lists of row dicts: json (a list of objects), jsonl, csv, parquet, arrow, txt, and folders.

These are the list forms of the streaming readers in :mod:`engine.data.rows` (the loader streams; a list is for
small files and checks): ``READERS`` maps each extension to its reader, and :func:`read_rows` reads a file or a
folder (file by file in name order; all its data files must share one extension).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.data.rows import ROW_READERS, iter_rows


def _listing(stream: Callable[[Path], Iterator[dict[str, Any]]]) -> Callable[[Path], list[dict[str, Any]]]:
    def read(path: Path) -> list[dict[str, Any]]:
        return list(stream(path))

    read.__doc__ = f"All rows of a file, as a list ({stream.__name__})."
    return read


READERS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {ext: _listing(stream) for ext, stream in ROW_READERS.items()}


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All rows of a data file or a folder of data files.

    Raises:
        DatasetError: for a missing path, an unsupported extension or unreadable content.
    """
    return list(iter_rows(path))
