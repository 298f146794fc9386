"""Tell a full disk apart from other failures, and say so in words a user can act on.

A full disk surfaces in many disguises: ``OSError`` with ENOSPC or EDQUOT, torch's ``PytorchStreamWriter failed
writing file`` / ``unexpected pos 64 vs 0`` / ``basic_ios::clear`` when a checkpoint's zip cannot be written,
safetensors' ``IoError(Os { code: 28, kind: StorageFull })``. Each is mapped to one message:
``No space left on device: <path>, free N MB``.

A file that outgrows what its file system or the process may write (EFBIG: FAT32's 4 GiB, ``ulimit -f``; torch and
safetensors say "File too large (os error 27)") gets its own message, :func:`file_too_large_message`.
"""

from __future__ import annotations

import errno
import shutil
from pathlib import Path

from engine.errors import UserError

# texts of write failures that, on a full disk, are all the libraries say
_EXPLICIT = ("no space left on device", "storagefull", "disk quota exceeded", "errno 28", "code: 28")
_WRITE_FAILED = ("unexpected pos", "basic_ios::clear", "file write failed", "pytorchstreamwriter failed")
NEARLY_FULL_MB = 10


_TOO_LARGE = ("file too large", "errno 27", "os error 27")


class DiskFullError(UserError, OSError):
    """The disk holding a run's folder filled up; the message names the folder and the free space."""


class FileTooLargeError(UserError, OSError):
    """A file outgrew the largest size its file system or the process may write; the message names the fix."""


def free_mb(path: str | Path) -> int | None:
    """Free space, in MB, on the file system holding ``path`` (or its nearest existing parent)."""
    p = Path(path)
    for candidate in (p, *p.parents):
        try:
            return int(shutil.disk_usage(candidate).free // 2**20)
        except OSError:
            continue
    return None


THEN = {"resume": "resume the run", "start": "start the run again"}
"""What to do once there is room (or a smaller file), by the code run.json's ``error_params`` records as ``then``."""

_ASK = object()


def storage_params(path: str | Path, then: str, removed: list[str] | tuple[str, ...] = ()) -> dict:
    """run.json's ``error_params`` beside a full disk's or a too-large file's message (``error_code`` disk_full or
    file_too_large): what a reader needs to say it in another language. ``path`` (the folder), ``free_mb`` (None:
    unknown), ``then`` (a code of :data:`THEN`, else the words as given) and ``removed`` (the incomplete checkpoints
    removed to make room)."""
    code = next((key for key, words in THEN.items() if words == then), then)
    return {"path": str(path), "free_mb": free_mb(path), "then": code, "removed": list(removed)}


def disk_full_message(path: str | Path, then: str = "resume the run", free: int | None | object = _ASK) -> str:
    """The message of a full disk at ``path`` (``free``: the free MB when already measured, None: unknown)."""
    free = free_mb(path) if free is _ASK else free
    shown = "unknown" if free is None else f"{free:,}"
    return (f"No space left on device: {path}, free {shown} MB. Free some space (delete old runs or checkpoints, "
            f"or set `save_total_limit`), then {then}.")


def exception_chain(exc: BaseException | None):
    """``exc`` and the exceptions it came from (its cause, else its context), each once."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        yield exc
        exc = exc.__cause__ or exc.__context__


def is_disk_full(exc: BaseException | None, path: str | Path | None = None) -> bool:
    """Whether ``exc`` (or an exception it came from) is a full disk.

    A bare write failure of torch (which never says why) counts when the disk at ``path`` is (nearly) full.
    """
    for err in exception_chain(exc):
        if isinstance(err, DiskFullError):
            return True
        if isinstance(err, OSError) and err.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(err).lower()
        if any(mark in text for mark in _EXPLICIT):
            return True
        if path is not None and any(mark in text for mark in _WRITE_FAILED):
            free = free_mb(path)
            if free is not None and free < NEARLY_FULL_MB:
                return True
    return False


def is_file_too_large(exc: BaseException | None) -> bool:
    """Whether ``exc`` (or an exception it came from) is a write refused for the file's size (EFBIG)."""
    for err in exception_chain(exc):
        if isinstance(err, FileTooLargeError) or (isinstance(err, OSError) and err.errno == errno.EFBIG):
            return True
        if any(mark in str(err).lower() for mark in _TOO_LARGE):
            return True
    return False


def file_too_large_message(path: str | Path, then: str = "resume the run") -> str:
    return (f"File too large: a file under {path} grew past the largest size this file system or this process may "
            "write (FAT32 drives stop at 4 GiB; `ulimit -f` sets a limit per process). Write to a folder on another "
            f"file system (`output_dir`, or `export_dir` with a smaller `export_size` per shard), or lift the limit, "
            f"then {then}.")


def storage_error(exc: BaseException, path: str | Path, then: str = "run the command again") -> UserError | None:
    """The user error for a write that failed for lack of room or for a file's size under ``path``, else None."""
    if is_disk_full(exc, path):
        return DiskFullError(disk_full_message(path, then=then))
    if is_file_too_large(exc):
        return FileTooLargeError(file_too_large_message(path, then=then))
    return None


def nearly_full(path: str | Path) -> bool:
    free = free_mb(path)
    return free is not None and free < NEARLY_FULL_MB
