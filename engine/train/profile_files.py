"""The per-module profiler's files in a run folder (light: the board reads them without importing torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from engine.runs import read_regular

PROFILE_JSON = "profile.json"
PROFILE_TABLE = "profile.md"
MAX_PROFILE_BYTES = 32 << 20
"""Largest profile.json read (a profile of every module of a large model is a few hundred KB)."""


def read_profile(folder: str | Path) -> dict[str, Any] | None:
    """The profile.json of a run folder, its ``modules`` the rows that are objects (None when the run was not
    profiled or the file is unreadable). Only a regular file up to :data:`MAX_PROFILE_BYTES` is read: the board
    lists every run's profile as a page opens, and a pipe in a folder from elsewhere held it for good (a link to
    /dev/zero filled the memory)."""
    try:
        raw = read_regular(Path(folder) / PROFILE_JSON, max_bytes=MAX_PROFILE_BYTES + 1)
        if len(raw) > MAX_PROFILE_BYTES:
            return None
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # ValueError: not JSON, not UTF-8, a number past the digit limit
        return None
    if not isinstance(data, dict) or not isinstance(data.get("modules"), list):
        return None
    return {**data, "modules": [row for row in data["modules"] if isinstance(row, dict)]}
