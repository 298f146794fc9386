"""Read data files into lists of row dicts: json (a list of objects), jsonl, csv, parquet, txt, and folders.

A ``.txt`` file gives one row ``{"text": line}`` per non-blank line (pre-training text). A folder is read file by
file in name order; all its data files must share one extension.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.data.errors import DatasetError


def _json_error(path: Path, err: json.JSONDecodeError, line_offset: int = 0) -> DatasetError:
    return DatasetError(
        f"{path} is not valid JSON: {err.msg} at line {err.lineno + line_offset}, column {err.colno}. "
        "Fix the file (a JSON list of objects, or one object per line in a .jsonl file)."
    )


def read_json(path: Path) -> list[dict[str, Any]]:
    """A JSON file holding a list of objects (a .json file with one object per line is read as JSON lines)."""
    text = path.read_text(encoding="utf-8-sig")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        if text.lstrip().startswith("{") and err.msg == "Extra data":
            return read_jsonl(path)
        raise _json_error(path, err) from None
    if isinstance(data, dict):
        lists = [value for value in data.values() if isinstance(value, list)]
        if len(data) == 1 and lists:
            data = lists[0]
        else:
            raise DatasetError(f"{path} holds one JSON object; expected a list of row objects.")
    if not isinstance(data, list):
        raise DatasetError(f"{path} must hold a JSON list of row objects.")
    _check_objects(path, data)
    return data


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """A file with one JSON object per line (blank lines ignored)."""
    rows = []
    with path.open(encoding="utf-8-sig") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise _json_error(path, err, line_offset=number - 1) from None
    _check_objects(path, rows)
    return rows


def read_csv(path: Path) -> list[dict[str, Any]]:
    """A CSV file with a header row."""
    with path.open(encoding="utf-8-sig", newline="") as handle:
        reader = csv.DictReader(handle)
        if not reader.fieldnames:
            raise DatasetError(f"{path} has no header row; the first line must name the columns.")
        return [dict(row) for row in reader]


def read_parquet(path: Path) -> list[dict[str, Any]]:
    """A Parquet file (needs pyarrow)."""
    try:
        import pyarrow.parquet as pq
    except ImportError as err:
        raise DatasetError(f"Reading {path} needs pyarrow: pip install pyarrow.") from err
    try:
        return pq.read_table(path).to_pylist()
    except Exception as err:  # pyarrow raises several error types for damaged files
        raise DatasetError(f"{path} is not a readable Parquet file: {err}") from err


def read_text(path: Path) -> list[dict[str, Any]]:
    """One ``{"text": line}`` row per non-blank line."""
    with path.open(encoding="utf-8-sig") as handle:
        return [{"text": line.rstrip("\n")} for line in handle if line.strip()]


READERS: dict[str, Callable[[Path], list[dict[str, Any]]]] = {
    ".json": read_json,
    ".jsonl": read_jsonl,
    ".csv": read_csv,
    ".parquet": read_parquet,
    ".txt": read_text,
}


def _check_objects(path: Path, rows: list[Any]) -> None:
    for index, row in enumerate(rows):
        if not isinstance(row, dict):
            raise DatasetError(f"{path}: row {index} is a {type(row).__name__}, not an object with named columns.")


def read_rows(path: Path) -> list[dict[str, Any]]:
    """All rows of a data file or a folder of data files.

    Raises:
        DatasetError: for a missing path, an unsupported extension or unreadable content.
    """
    if not path.exists():
        raise DatasetError(f"Data file not found: {path}. Check `file_name` in dataset_info.json and `dataset_dir`.")
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.is_file() and p.suffix.lower() in READERS)
        if not files:
            raise DatasetError(f"Folder {path} holds no data files ({', '.join(READERS)}).")
        suffixes = {p.suffix.lower() for p in files}
        if len(suffixes) > 1:
            raise DatasetError(f"Folder {path} mixes file types ({', '.join(sorted(suffixes))}); keep one type.")
        rows: list[dict[str, Any]] = []
        for file in files:
            rows.extend(READERS[file.suffix.lower()](file))
        return rows
    reader = READERS.get(path.suffix.lower())
    if reader is None:
        raise DatasetError(f"Unsupported data file type {path.suffix!r} ({path}); use one of: {', '.join(READERS)}.")
    try:
        return reader(path)
    except UnicodeDecodeError as err:
        raise DatasetError(f"{path} is not UTF-8 text ({err.reason} at byte {err.start}); re-save it as UTF-8.") from None
