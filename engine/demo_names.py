"""The built-in demo models' names and cache folders. Light (no torch), so pre-flight checks can read them.

``demo`` (also ``LF-Demo``, the board's display name) is the text demo and ``demo-vlm`` the vision-language one;
each is built once into ``$LF_BOARD_HOME`` (default ``~/.cache/lf-board``) by :mod:`engine.demo` and
:mod:`engine.demo_vlm`.
"""

from __future__ import annotations

import os
from pathlib import Path

DEMO_MODEL_NAME = "LF-Demo"
DEMO_MODEL_PATH = "demo"
DEMO_VLM_PATH = "demo-vlm"


def is_demo_name(name: object) -> bool:
    """Whether ``name`` (as a config writes ``model_name_or_path``) stands for a built-in demo model."""
    return isinstance(name, str) and name.strip().lower() in (DEMO_MODEL_PATH, DEMO_MODEL_NAME.lower(), DEMO_VLM_PATH)


def _home() -> Path:
    return Path(os.environ.get("LF_BOARD_HOME") or "~/.cache/lf-board").expanduser()


def demo_home() -> Path:
    """Where the text demo model is cached: ``$LF_BOARD_HOME/demo-model``."""
    return _home() / "demo-model"


def demo_vlm_home() -> Path:
    """Where the demo VLM is cached: ``$LF_BOARD_HOME/demo-vlm``."""
    return _home() / "demo-vlm"


def built_demo_folder(name: str) -> Path | None:
    """The folder of the demo model ``name`` stands for, once built; None before its first build."""
    folder = demo_vlm_home() if name.strip().lower() == DEMO_VLM_PATH else demo_home()
    return folder if folder.is_dir() else None
