"""Replacing a file whole: the new content goes to a temp file beside it, renamed over it, so that a reader (or a
crash) finds the old content or the new, never part of one; used for every state file the engine and the board
write (run.json, configs, a page's memory, a resumed run's events).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from pathlib import Path

ATOMIC_CHUNK = 1 << 20
"""The most bytes :func:`write_atomic` gathers from its pieces before it writes them (a file of many short lines is
written in a few calls, never held whole)."""


def write_atomic(path: Path, pieces: Iterable[bytes], mode: int | None = None) -> None:
    """Replace ``path`` by a new file of ``pieces``: written to a temp file beside it, then renamed over it, so that
    ``path`` holds the old content or the new, never part of one. ``mode`` (e.g. ``0o600``): the file's permissions
    from its first byte, not the umask's.

    The temp file is one of its own (a link planted under its name, a workspace from elsewhere, is removed, never
    written through) and is written through the descriptor that created it, never opened again by name (a link put
    there in between was followed). A failed write (a full disk) removes it and raises: callers change their
    in-memory state only after success.
    """
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        try:
            fd = os.open(tmp, flags, 0o666 if mode is None else mode)
        except FileExistsError:  # left by a crash, or planted: removed (a link itself, never what it points to)
            tmp.unlink()
            fd = os.open(tmp, flags, 0o666 if mode is None else mode)
        try:
            gathered = bytearray()  # short pieces (lines) are written together; a long one as it is, not copied
            for piece in pieces:
                if len(gathered) + len(piece) > ATOMIC_CHUNK:
                    _write_all(fd, gathered)
                    gathered.clear()
                if len(piece) >= ATOMIC_CHUNK:
                    _write_all(fd, piece)
                else:
                    gathered += piece
            _write_all(fd, gathered)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise


def _write_all(fd: int, data: bytes | bytearray) -> None:
    """All of ``data`` to ``fd`` (a short write is carried on; a full disk raises OSError ENOSPC)."""
    while data:
        data = data[os.write(fd, data):]


def write_text_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """:func:`write_atomic` of ``text`` (UTF-8; bytes as they are)."""
    write_atomic(path, (text if isinstance(text, bytes) else text.encode("utf-8", "backslashreplace"),), mode)
