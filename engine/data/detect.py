"""A dataset's layout read from its first rows: ``formatting: auto`` for plain files, and sharegpt entries whose turns
use OpenAI's role/content tags."""

from __future__ import annotations

from typing import Any

from engine.data.errors import DatasetError
from engine.data.registry import DatasetSpec


def detect_format(spec: DatasetSpec, rows: list[dict[str, Any]]) -> DatasetSpec:
    """Resolve ``formatting: auto`` (plain files) from the first row's columns; other specs are returned as-is.

    Also switches a sharegpt entry without tags whose turns use role/content to the OpenAI layout.

    Raises:
        DatasetError: when the layout cannot be recognised.
    """
    first = rows[0] if rows else {}
    if spec.formatting == "sharegpt" and not spec.tags:
        turns = first.get(spec.columns.get("messages", "conversations"))
        if isinstance(turns, list) and turns and isinstance(turns[0], dict) and "from" not in turns[0] \
                and "role" in turns[0]:
            # LLaMA-Factory cannot read these rows (no `from` tag): read as the OpenAI layout with our own defaults,
            # not as its OpenAI converter (whose "detailed thinking off" system prompt nobody asked for here)
            return DatasetSpec(**{**spec.__dict__, "formatting": "openai", "lf_columns": None, "lf_tags": None,
                                  "columns": {"messages": "conversations", **spec.columns}})
    if spec.formatting != "auto":
        return spec
    if not first:  # an empty file: "cannot tell the layout (columns: none)" would send the user looking at columns
        raise DatasetError(
            f"{spec.path} has no rows: the file is empty (or holds no row with named columns). Put the rows in it "
            "(e.g. [{\"instruction\": ..., \"output\": ...}] or one JSON object per line), or pick another file."
        )
    keys = set(first)
    columns: dict[str, str] = {}
    for key in ("system", "tools", "images", "videos", "audios"):
        if key in keys:
            columns[key] = key
    ranking = "chosen" in keys and "rejected" in keys
    if ranking:
        columns.update(chosen="chosen", rejected="rejected")
    for tag in ("kto_tag", "label"):
        if tag in keys and isinstance(first[tag], bool):
            columns["kto_tag"] = tag
    turns_key = next((k for k in ("messages", "conversations") if isinstance(first.get(k), list)), None)
    if turns_key:
        columns["messages"] = turns_key
        turns = first[turns_key]
        uses_from = bool(turns) and isinstance(turns[0], dict) and "from" in turns[0]
        formatting = "sharegpt" if uses_from else "openai"
    elif keys & {"instruction", "prompt", "question"}:
        formatting = "alpaca"
        columns["prompt"] = next(k for k in ("instruction", "prompt", "question") if k in keys)
        for key in ("input", "history"):
            if key in keys:
                columns["query" if key == "input" else key] = key
        response = next((k for k in ("output", "response", "answer", "completion") if k in keys), None)
        if response:
            columns["response"] = response
    elif "text" in keys:
        formatting = "text"
    else:
        raise DatasetError(
            f"Cannot tell the layout of {spec.path} (columns: {', '.join(sorted(keys)) or 'none'}). Register it in "
            "dataset_info.json with `formatting` and `columns`, or use instruction/input/output, messages, or text."
        )
    return DatasetSpec(**{**spec.__dict__, "formatting": formatting, "ranking": ranking, "columns": columns})
