"""Registering a data file as a dataset: its entry in dataset_info.json, with the layout (formatting, ranking,
columns and tags) detected from the file's first rows when not given, written as LLaMA-Factory reads it."""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

from engine.atomic_write import write_atomic
from engine.data.entry_keys import TAG_KEYS
from engine.data.errors import DatasetError
from engine.data.info_repeats import key_names, repeated_keys
from engine.data.registry import DatasetSpec, _entry_spec, info_path, load_dataset_info


def register_dataset(dataset_dir: str | os.PathLike, name: str, file_name: str, formatting: str | None = None,
                     columns: dict[str, str] | None = None, tags: dict[str, str] | None = None, ranking: bool = False,
                     overwrite: bool = False) -> dict[str, Any]:
    """Add (or with ``overwrite`` replace) an entry in dataset_info.json; the file is rewritten atomically.

    Args:
        dataset_dir: Folder of dataset_info.json (created with the file when missing).
        name: The new dataset name.
        file_name: The data file, relative to ``dataset_dir`` (it must exist).
        formatting: alpaca or sharegpt; None detects the layout from the file's first row and fills
            ``formatting``, ``ranking``, ``columns`` and ``tags`` accordingly.
        columns: Column mapping (keys among COLUMN_KEYS).
        tags: Sharegpt tags (keys among TAG_KEYS).
        ranking: Preference data.
        overwrite: Replace an existing entry of the same name.

    Returns:
        The entry written.

    Raises:
        DatasetError: for an empty or taken name, a missing file or invalid settings.
    """
    folder = Path(dataset_dir).expanduser().absolute()
    name = name.strip()
    if not name or "," in name:
        raise DatasetError("A dataset name must be non-empty and contain no comma.")
    info = load_dataset_info(folder) if info_path(folder).is_file() else {}
    repeated = repeated_keys(info_path(folder)) if info else []
    if repeated:  # the rewrite below would drop the earlier entries of each repeated key for good
        names = key_names(repeated)
        raise DatasetError(f"{info_path(folder)} has {names} written more than once in the same object; rewriting "
                           "it to add a dataset would delete the earlier ones. Remove or rename the duplicates "
                           "first.")
    if name in info and not overwrite:
        raise DatasetError(f"Dataset {name!r} already exists in {info_path(folder)}; pick another name.")
    if formatting is None:
        formatting, detected_ranking, detected_columns, detected_tags = _detect_entry(folder / file_name)
        ranking = ranking or detected_ranking
        columns = {**detected_columns, **(columns or {})}
        tags = {**detected_tags, **(tags or {})}
    entry: dict[str, Any] = {"file_name": file_name}
    if formatting != "alpaca":
        entry["formatting"] = formatting
    if ranking:
        entry["ranking"] = True
    if columns:
        entry["columns"] = dict(columns)
    if tags:
        entry["tags"] = dict(tags)
    _entry_spec(name, entry, folder)  # validates formatting, keys and the file's presence
    info[name] = entry
    folder.mkdir(parents=True, exist_ok=True)
    text = json.dumps(info, ensure_ascii=False, indent=2) + "\n"
    write_atomic(info_path(folder), [text.encode("utf-8")])  # whole or not at all, synced: the other entries kept
    return entry


DETECT_ROWS = 1000
"""Rows read to find a registered file's columns."""


def _detect_entry(path: Path) -> tuple[str, bool, dict[str, str], dict[str, str]]:
    """Formatting, ranking, columns and tags (dataset_info.json style) detected from a data file."""
    from engine.data.converters import ALPACA_COLUMNS, OPENAI_TAGS, detect_format
    from engine.data.rows import iter_rows

    if not path.exists():
        raise DatasetError(f"Data file not found: {path}; put the file in the dataset folder first.")
    # the layout from the first rows' columns (any of them holding one): the entry is read as LLaMA-Factory reads
    # it, only the columns it names, so a column the first row happens to lack must be named too
    merged: dict[str, Any] = {}
    for row in itertools.islice(iter_rows(path), DETECT_ROWS):
        if isinstance(row, dict):
            for key, value in row.items():
                if merged.get(key) in (None, "", []):
                    merged[key] = value
    rows = [merged] if merged else []
    spec = detect_format(DatasetSpec(name=path.name, path=path, formatting="auto"), rows)
    # every column found is written: an entry is read as LLaMA-Factory reads it, only the columns it names
    columns = dict(spec.columns)
    if spec.formatting == "openai":
        tags = {key: OPENAI_TAGS[key] for key in TAG_KEYS}
        turns = (rows[0].get(columns.get("messages", "messages")) if rows else None) or []
        calls = any(isinstance(turn, dict) and (turn.get("tool_calls") or turn.get("role") == "tool") for turn in turns)
        # tool calls need the OpenAI converter (LLaMA-Factory's sharegpt one reads no `tool_calls`); without them
        # sharegpt with these tags reads the same turns and adds no system prompt of its own
        return ("openai" if calls else "sharegpt"), spec.ranking, columns, tags
    if spec.formatting == "text":
        return "alpaca", False, {"prompt": "text"}, {}
    if spec.formatting == "alpaca" and columns == {key: ALPACA_COLUMNS[key] for key in ("prompt", "query", "response")}:
        columns = {}  # LLaMA-Factory's defaults: an entry without `columns` reads exactly these
    return spec.formatting, spec.ranking, columns, {}
