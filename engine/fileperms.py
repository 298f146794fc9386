"""Weights get the same permissions as every other file a run writes.

``safetensors`` writes its files through a private temporary file, so they end up ``0600`` while the configs,
logs and tokenizer beside them follow the umask (usually ``0644``): another user of the machine (or a serving
process under another account) can read the config but not the weights. :func:`match_umask` fixes that.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf")


def default_file_mode() -> int:
    """The mode a new file gets from ``open()`` under the current umask (0644 with the usual 022)."""
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def match_umask(folder: str | Path) -> int:
    """Give weight files under ``folder`` (recursively) the umask's default mode when they are more private.

    Returns:
        How many files were changed.
    """
    root = Path(folder)
    if not root.is_dir():
        return 0
    wanted = default_file_mode()
    changed = 0
    for path in root.rglob("*"):
        if path.is_symlink() or not path.name.endswith(WEIGHT_SUFFIXES):
            continue
        try:
            info = path.stat()
            if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
                continue
            mode = stat.S_IMODE(info.st_mode)
            if mode | wanted != mode:  # missing bits the umask would give: widen to the default only
                path.chmod(mode | wanted)
                changed += 1
        except OSError as err:
            logger.debug("Cannot set the mode of %s: %s", path, err)
    return changed
