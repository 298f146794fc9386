"""Tell a write refused for its permissions (or a read-only file system) apart from other failures, and say so in
words a user can act on; :func:`write_error` also gives :mod:`engine.diskfull`'s errors (a full disk, a file too
large), so that a save path turns any failed write into one clear message instead of a traceback.

A refused write surfaces as ``PermissionError`` (EACCES, EPERM), ``OSError`` EROFS, or only in a library's text:
safetensors' ``Permission denied (os error 13)``, ``Read-only file system (os error 30)``.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

from engine.diskfull import exception_chain, storage_error
from engine.errors import UserError

DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
_TEXTS = ("permission denied", "os error 13", "errno 13", "read-only file system", "os error 30", "errno 30",
          "operation not permitted")


class WriteDeniedError(UserError, OSError):
    """A file or folder could not be written for its permissions or a read-only file system; the message names it."""


def denied_error(exc: BaseException | None) -> OSError | Exception | None:
    """The error in ``exc``'s chain that is a refused write (None when there is none)."""
    for err in exception_chain(exc):
        if isinstance(err, WriteDeniedError):
            return err
        if isinstance(err, OSError) and err.errno in DENIED:
            return err
        if any(mark in str(err).lower() for mark in _TEXTS):
            return err
    return None


def denied_path(exc: BaseException | None) -> str | None:
    """The file or folder the refused write named (None: unknown, as for a write on an open file)."""
    err = denied_error(exc)
    name = getattr(err, "filename", None)
    return os.fsdecode(name) if isinstance(name, (str, bytes)) and name else None


def is_denied(exc: BaseException | None, folder: str | Path | None = None) -> bool:
    """Whether ``exc`` is a refused write, and (``folder`` given) of a path inside ``folder`` or of an unnamed one:
    a refused read elsewhere (a dataset without read permission) is not this folder's write."""
    if denied_error(exc) is None:
        return False
    named = denied_path(exc)
    if folder is None or named is None:
        return True
    target, inside = os.path.abspath(named), os.path.abspath(folder)
    return target == inside or target.startswith(inside.rstrip(os.sep) + os.sep)


def denied_message(folder: str | Path, exc: BaseException | None = None, then: str = "run the command again") -> str:
    """The message of a write refused in ``folder`` (``exc``: the error, for the file it names and its reason)."""
    err = denied_error(exc)
    named = denied_path(exc)
    reason = (err.strerror if isinstance(err, OSError) and err.strerror else
              "read-only file system" if "read-only" in str(err).lower() else "permission denied")
    what = f"{named} ({reason})" if named else f"a file in {folder} ({reason})"
    return (f"Cannot write {what}. Make {folder} writable for this user (`chmod -R u+w {folder}`; a read-only mount "
            f"must be mounted read-write), or set the output folder to one you can write to, then {then}.")


def write_error(exc: BaseException, folder: str | Path, then: str = "run the command again") -> UserError | None:
    """The user error for a write under ``folder`` that failed for lack of room, a file's size, or its permissions;
    None for any other failure (and for an error that is a user error already)."""
    if isinstance(exc, UserError):
        return None
    storage = storage_error(exc, folder, then=then)
    if storage is not None:
        return storage
    if is_denied(exc, folder):
        return WriteDeniedError(denied_message(folder, exc, then=then))
    return None
