"""Tell a write refused for its permissions (or a read-only file system) apart from other failures, and say so in
words a user can act on; :func:`write_error` also gives :mod:`engine.diskfull`'s errors (a full disk, a file too
large), so that a save path turns any failed write into one clear message instead of a traceback.

A refused write surfaces as ``PermissionError`` (EACCES, EPERM), ``OSError`` EROFS, or only in a library's text:
safetensors' ``Permission denied (os error 13)``, ``Read-only file system (os error 30)``.

torch's and safetensors' own refusals carry no errno, only text; each is matched by its exact wording, so that no
other RuntimeError is taken for one. torch's zip writer (``PyTorchStreamWriter::setup`` in
caffe2/serialize/inline_container.cc, behind every ``torch.save`` of a path) says ``Parent directory <dir> does not
exist.`` (the folder is gone, or a file stands in its place), ``[enforce fail at inline_container.cc:N] . open file
failed with strerror: <reason>`` (torch 2.13), or ``File <name> cannot be opened.`` (older releases). safetensors
(a Rust ``io::Error``) says ``Error while serializing: I/O error: Not a directory (os error 20) at path "<tmp>"``.
A save into a folder that is gone, or a file standing where a folder should be (``ENOTDIR``, ``EISDIR``; the
``FileExistsError`` of ``os.makedirs`` on a path that is a file), is refused the same way: the message then says
what is in the way.
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from pathlib import Path

from engine.diskfull import exception_chain, storage_error
from engine.errors import UserError

DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)
_TEXTS = ("permission denied", "os error 13", "errno 13", "read-only file system", "os error 30", "errno 30",
          "operation not permitted")
BLOCKED = (errno.ENOTDIR, errno.EISDIR)
"""A file where a folder should be, or the reverse: a save into a folder replaced (by a file) while the run wrote."""

_TORCH_NO_PARENT = re.compile(r"^Parent directory (?P<path>.+?) does not exist\.", re.MULTILINE)
_TORCH_CANNOT_OPEN = re.compile(r"^File (?P<path>.+?) cannot be opened\.", re.MULTILINE)
_TORCH_OPEN_FAILED = re.compile(r"\bopen file failed with strerror: (?P<reason>[^\n]+?)\s*$", re.MULTILINE)
_SAFETENSORS = re.compile(r"^Error while serializing: .*\(os error (?P<code>\d+)\)(?: at path \"(?P<path>[^\"]+)\")?")
_REFUSED_CODES = (*DENIED, *BLOCKED, errno.ENOENT)
"""What a library's write of a file names as the reason it could not create it (the folder gone: ENOENT)."""


class WriteDeniedError(UserError, OSError):
    """A file or folder could not be written for its permissions or a read-only file system; the message names it."""


@dataclass(frozen=True)
class Refusal:
    """A refused write: the error in the chain that says so, the path it names (None: unknown; a folder when
    ``in_folder``), its reason in words, and whether something is in the way (``blocked``: a file where a folder
    should be, a folder gone) rather than the permissions."""

    error: BaseException
    path: str | None
    reason: str
    blocked: bool = False
    in_folder: bool = False


def refusal(exc: BaseException | None) -> Refusal | None:
    """The refused write in ``exc``'s chain (None when there is none). One that names no path (torch's ``open file
    failed``, an error on an open file) names the folder a :func:`saving_into` around the save was given."""
    for err in exception_chain(exc):
        found = _refusal_of(err)
        if found is not None:
            into = None if found.path is not None else _save_target(exc)
            return replace(found, path=into, in_folder=True) if into else found
    return None


SAVE_TARGET = "lf_save_target"
"""The attribute :func:`saving_into` puts on an error: the folder the failed save wrote into."""


@contextmanager
def saving_into(folder: str | Path) -> Iterator[None]:
    """Around a save into ``folder`` (``save_pretrained``, ``Trainer.save_model``, a checkpoint): a refused write
    whose error names no file (torch's zip writer says only ``open file failed with strerror: <reason>``) is named
    as a file in ``folder``, not in the whole run folder. The innermost save names it."""
    try:
        yield
    except BaseException as exc:
        if getattr(exc, SAVE_TARGET, None) is None:
            try:
                setattr(exc, SAVE_TARGET, os.fspath(folder))
            except (AttributeError, TypeError):  # an exception type without a __dict__
                pass
        raise


def _save_target(exc: BaseException | None) -> str | None:
    for err in exception_chain(exc):
        target = getattr(err, SAVE_TARGET, None)
        if isinstance(target, str) and target:
            return target
    return None


def _refusal_of(err: BaseException) -> Refusal | None:
    if isinstance(err, WriteDeniedError):
        return Refusal(err, None, "read-only file system" if "read-only" in str(err).lower() else "permission denied")
    if isinstance(err, OSError) and err.errno is not None:
        name = os.fsdecode(err.filename) if isinstance(err.filename, (str, bytes)) and err.filename else None
        reason = err.strerror or os.strerror(err.errno)
        if err.errno in DENIED:
            return Refusal(err, name, reason)
        if err.errno in BLOCKED and name:  # ENOTDIR, EISDIR of a named path: something is in the way
            return Refusal(err, name, reason, blocked=True)
        if err.errno == errno.EEXIST and name and _made_over_a_file(err):
            return Refusal(err, name, "a file where a folder should be", blocked=True)
    text = str(err)
    if isinstance(err, RuntimeError):  # torch's zip writer: no errno, only these words
        if match := _TORCH_NO_PARENT.search(text):
            folder = match["path"]
            there = os.path.lexists(folder) and not os.path.isdir(folder)
            return Refusal(err, folder, "not a folder" if there else "no such folder", blocked=True)
        if match := _TORCH_CANNOT_OPEN.search(text):
            return Refusal(err, match["path"], "cannot be opened")
        if (match := _TORCH_OPEN_FAILED.search(text)) and (code := _CODE_OF.get(match["reason"].lower())):
            return Refusal(err, None, match["reason"], blocked=code not in DENIED)
    if (match := _SAFETENSORS.search(text)) and int(match["code"]) in _REFUSED_CODES:
        code = int(match["code"])  # the path is the temp file it made beside the target: name its folder
        folder = os.path.dirname(match["path"]) if match["path"] else None
        return Refusal(err, folder, os.strerror(code), blocked=code not in DENIED, in_folder=bool(folder))
    if any(mark in text.lower() for mark in _TEXTS):
        return Refusal(err, None, "read-only file system" if "read-only" in text.lower() else "permission denied")
    return None


def _made_over_a_file(err: OSError) -> bool:
    """Whether ``err`` is ``os.makedirs(path, exist_ok=True)``'s refusal of a path that is no folder (what a
    library's save does first). Told by where it was raised, not by the path: the failed save may have removed the
    file since (the final save removes its staging folder, whatever it has become)."""
    tb = err.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    frame = tb.tb_frame if tb is not None else None
    return (frame is not None and frame.f_code.co_name == "makedirs" and frame.f_globals.get("__name__") == "os"
            and frame.f_locals.get("exist_ok") is True)


_CODE_OF = {os.strerror(code).lower(): code for code in _REFUSED_CODES}


def denied_error(exc: BaseException | None) -> BaseException | None:
    """The error in ``exc``'s chain that is a refused write (None when there is none)."""
    found = refusal(exc)
    return found.error if found else None


def denied_path(exc: BaseException | None) -> str | None:
    """The file or folder the refused write named (None: unknown, as for a write on an open file)."""
    found = refusal(exc)
    return found.path if found else None


def is_denied(exc: BaseException | None, folder: str | Path | None = None) -> bool:
    """Whether ``exc`` is a refused write, and (``folder`` given) of a path inside ``folder`` or of an unnamed one:
    a refused read elsewhere (a dataset without read permission) is not this folder's write."""
    found = refusal(exc)
    if found is None:
        return False
    if folder is None or found.path is None:
        return True
    target, inside = os.path.abspath(found.path), os.path.abspath(folder)
    return target == inside or target.startswith(inside.rstrip(os.sep) + os.sep)


def denied_message(folder: str | Path, exc: BaseException | None = None, then: str = "run the command again") -> str:
    """The message of a write refused in ``folder`` (``exc``: the error, for the file it names and its reason)."""
    found = refusal(exc)
    named = found.path if found else None
    reason = found.reason if found else "permission denied"
    what = (f"a file in {named}" if found and found.in_folder else named) if named else f"a file in {folder}"
    if found and found.blocked:
        return (f"Cannot write {what} ({reason}): something changed {folder} during the save (a folder removed, or a file and "
                f"a folder in each other's place). Remove what is in the way and make sure no other program changes "
                f"{folder} (or set the output folder to another one), then {then}.")
    return (f"Cannot write {what} ({reason}). Make {folder} writable for this user (`chmod -R u+w {folder}`; a "
            f"read-only mount must be mounted read-write), or set the output folder to one you can write to, then "
            f"{then}.")


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


IN_THE_WAY = (errno.ENOTDIR, errno.EEXIST, errno.ENOENT, errno.EISDIR)
"""Why a path given for a new folder cannot be one (it lies under a file, is a file, or on no file system)."""


def make_new_folder(target: Path, named: str, fix: str, then: str) -> None:
    """Make the folder a command was given (``named``: how its message names it) before the slow part of the command:
    a path that cannot be a folder is said as given, with ``fix``; a write refused for its permissions, a read-only
    mount or a full disk ends in that error (``then``: what to do once it is fixed)."""
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        if exc.errno not in IN_THE_WAY:  # (those are the path given, not a refused write)
            denied = write_error(exc, target, then=then)
            if denied is not None:
                raise denied from None
        raise UserError(f"{named} cannot be made: {exc.strerror or exc}; {fix}") from None
