"""A full disk for a test, faked where the code writes: :func:`os.write` on a file whose path holds ``where`` puts
down half of what it is given, then fails with ENOSPC, as a write on a full disk does. (Faking a higher level, such
as ``Path.write_text``, proves nothing once the code writes otherwise.)"""

from __future__ import annotations

import errno
import os
from typing import Any


def fill_disk(monkeypatch: Any, where: str) -> None:
    """Until ``monkeypatch`` is undone, every :func:`os.write` to a file whose path contains ``where`` fails half way
    with ``OSError(ENOSPC)``; other writes (pipes, the terminal) go on as they are."""
    real = os.write

    def write(fd: int, data: Any) -> int:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            target = ""
        if where and where in target:
            real(fd, bytes(data)[: len(data) // 2])
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd, data)

    monkeypatch.setattr(os, "write", write)
