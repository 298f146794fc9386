"""The per-module profiler's files in a run folder (light: the board reads them without importing torch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

PROFILE_JSON = "profile.json"
PROFILE_TABLE = "profile.md"


def read_profile(folder: str | Path) -> dict[str, Any] | None:
    """The profile.json of a run folder (None when the run was not profiled or the file is unreadable)."""
    try:
        data = json.loads((Path(folder) / PROFILE_JSON).read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) and isinstance(data.get("modules"), list) else None
