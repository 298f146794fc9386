"""Replacing a file whole: the new content goes to a temp file beside it, renamed over it, so that a reader (or a
crash) finds the old content or the new, never part of one; used for every state file the engine and the board
write (run.json, configs, a page's memory, a resumed run's events).

Durable too: the temp file is flushed to the disk (``fsync``) before the rename, and the folder after it. Without
the first, a power loss soon after the rename could leave the file empty (ext4 with ``data=writeback``, XFS: the
rename reached the journal before the data reached the disk); without the second, the old file could come back.
None of these writes is on a per-step path (the events are appended, not replaced): a run replaces run.json a few
times (start, end, a parallel run's strategy), the board on a status change or a user's action. The cost, measured
on an ext4 disk: about 6-8 ms a write (two fsyncs) against about 1 ms without; 300 writes in three app test files
(test_jobs, test_page_memory, test_board_scale) took no measurable time beside the run-to-run noise.
"""

from __future__ import annotations

import errno
import logging
import os
import re
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

logger = logging.getLogger(__name__)

NO_SYNC = (errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS)
"""What ``fsync`` answers on a file system that cannot sync (some FUSE and network mounts, a folder on some
systems): nothing more can be done there, and the write stands."""

_TEMP_NAME = re.compile(r"^\..+\.\d+\.\d+\.tmp$")

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
    in-memory state only after success. The content is on the disk before the rename (:func:`sync_file`; a full disk
    that a network file system reports only then fails the write, the old file kept), and the rename is made
    durable after it (:func:`sync_folder`, best effort).
    """
    tmp = temp_name(path)
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
            sync_file(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise
    sync_folder(path.parent)


def temp_name(path: Path) -> Path:
    """The temp file :func:`write_atomic` writes ``path`` through in this process and thread."""
    return path.with_name(f".{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")


def is_temp_name(name: str) -> bool:
    """Whether ``name`` is one of :func:`write_atomic`'s temp files (of any process): another writer's file in
    the making, never content of a folder nor a leftover that anyone else may remove while it may be in use."""
    return bool(_TEMP_NAME.match(name))


def sync_file(fd: int) -> None:
    """Flush ``fd``'s content to the disk. A file system that cannot sync (:data:`NO_SYNC`) is let be; any other
    failure (EIO, a full disk or a quota reported at the flush) raises."""
    try:
        os.fsync(fd)
    except OSError as err:
        if err.errno not in NO_SYNC:
            raise


def sync_folder(folder: Path) -> None:
    """Make a rename in ``folder`` durable (``fsync`` of the folder), best effort: the new file is in place already,
    so a folder that cannot be opened or synced (a file system without it, a folder without read permission) only
    costs the durability of this one rename, and is logged at debug level."""
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except OSError as err:
        logger.debug("Cannot open %s to sync it: %s", folder, err)
        return
    try:
        os.fsync(fd)
    except OSError as err:
        logger.debug("Cannot sync %s: %s", folder, err)
    finally:
        os.close(fd)


def sync_tree(folder: Path) -> None:
    """Flush every regular file under ``folder`` to the disk, then each folder, deepest first: what a library wrote
    there without ``fsync`` (torch, safetensors, a tokenizer's files) is on the disk before a rename publishes it, so
    that a power loss soon after cannot leave an empty or cut weights file under its final name. Links and other
    entries (a FIFO) are not opened through. A file that fails its flush (EIO, a full disk or quota a network file
    system reports only then) raises, before anything is published; a folder is synced best effort
    (:func:`sync_folder`).

    Cost: one ``fsync`` a file, which writes the file's pages the kernel still holds; a save that the kernel already
    wrote back costs little more than the calls."""
    for root, _dirs, files in os.walk(folder, topdown=False):
        for name in files:
            try:
                fd = os.open(os.path.join(root, name), os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
            except OSError as err:
                if err.errno == errno.ELOOP:  # a link: not the save's own content
                    continue
                raise
            try:
                if stat.S_ISREG(os.fstat(fd).st_mode):
                    sync_file(fd)
            finally:
                os.close(fd)
        sync_folder(Path(root))


def _write_all(fd: int, data: bytes | bytearray) -> None:
    """All of ``data`` to ``fd`` (a short write is carried on; a full disk raises OSError ENOSPC)."""
    while data:
        data = data[os.write(fd, data):]


def write_text_atomic(path: Path, text: str | bytes, mode: int | None = None) -> None:
    """:func:`write_atomic` of ``text`` (UTF-8; bytes as they are)."""
    write_atomic(path, (text if isinstance(text, bytes) else text.encode("utf-8", "backslashreplace"),), mode)
