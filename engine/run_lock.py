"""One live job per run folder: an exclusive lock the job holds for its whole life.

run.json says whether a run is still going, but two runs started at the same instant on one ``output_dir`` both
read it before either had written it, and both went on to write into the folder (one's ``overwrite_output_dir``
removing the other's checkpoints). The job's main process takes an exclusive ``flock`` on ``<folder>/.run.lock``
before it writes anything there and keeps it until its outcome is recorded; the kernel lets go of it when the
process ends in any way (SIGKILL, a crash, the machine's OOM killer), so a dead run never holds a folder. The file
holds the holder's pid and run id, for the message the second job gets. The file itself stays (removing it would let
a third process lock a new file while a second still waits on the old one).

An export holds a lock of the same kind on its ``export_dir``, kept beside that folder (:func:`claim_export`).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
import time
from collections.abc import Callable
from pathlib import Path

from engine.errors import UserError

logger = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
MAX_HOLDER_BYTES = 4096


HOLDER_WAIT = 2.0
"""Seconds to wait for a holder that has just locked to write who it is (on a busy machine that took a moment)."""


def _holder(fd: int, wait: float = HOLDER_WAIT) -> str:
    """Who holds the lock, as its file says. The holder writes it just after locking, so a job started at the same
    instant may find it empty: it asks again for up to ``wait`` seconds before saying only that it has just started."""
    deadline = time.monotonic() + wait
    while True:
        try:
            data = json.loads(os.pread(fd, MAX_HOLDER_BYTES, 0).decode("utf-8"))
            return f"`{str(data['id'])[:200]}`, process {int(data['pid'])}"
        except (OSError, ValueError, TypeError, KeyError, OverflowError, RecursionError):  # not yet (or never) a
            # holder's record: a pid of Infinity, a nesting past json's depth
            if time.monotonic() >= deadline:
                return "it has only just started"
            time.sleep(0.05)


def claim(folder: str | Path, run_id: str) -> int | None:
    """Lock ``folder`` for this process's job; the open lock file's descriptor (None where the file system takes
    no locks: then run.json's check alone stands). Close it (:func:`release`) once the outcome is recorded.

    Raises:
        UserError: another live job holds the folder, or the lock file is not a file this can lock (a link, a
            folder, a pipe someone put there).
    """
    Path(folder).mkdir(parents=True, exist_ok=True)
    fix = "remove it and start again, or choose another output_dir."
    return _lock(Path(folder) / LOCK_NAME, run_id, "run folder", fix, lambda holder: (
        f"`{folder}` is the output folder of a run that is still going ({holder}); a second run there would mix its "
        "files into that run's. Wait for it to end or stop it (the board's Abort, or SIGTERM to that process), or "
        "choose another output_dir."))


def export_lock_path(export_dir: str | Path) -> Path:
    """Where the lock of an export folder lies: beside it, in its parent (inside, it would be one of the exported
    model's files), named after it and hidden: ``<parent>/.<name>.export.lock``."""
    target = Path(export_dir).expanduser().resolve()
    return target.parent / f".{target.name}.export.lock"


def claim_export(export_dir: str | Path, label: str) -> int | None:
    """Lock ``export_dir`` for this process's export, from before the folder is cleared until the export ends;
    ``label`` names this export to a second one (its run id, or the command). Two exports into one folder at once
    had each cleared the other's files and mixed their shards (and both verified their own model against the other's
    files). The descriptor to :func:`release` (None where the file system takes no locks).

    Raises:
        UserError: another export into that folder is still going, or its lock file is not a file this can lock.
    """
    path = export_lock_path(export_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise UserError(f"The folder of `export_dir: {export_dir}` cannot be made ({err.strerror or err}); choose an "
                        "export_dir in a folder you can write to.") from None
    fix = "remove it and export again (no export into that folder is running then), or choose another export_dir."
    return _lock(path, label, "export folder", fix, lambda holder: (
        f"`{export_dir}` is being written by another export that is still going ({holder}); a second export there "
        "would clear and mix its files. Wait for it to end or stop it, or choose another export_dir."))


def _lock(path: Path, label: str, what: str, fix: str, busy: Callable[[str], str]) -> int | None:
    import fcntl

    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise UserError(f"The {what}'s lock file {path} cannot be opened ({err.strerror or err}): it must be a "
                        f"plain file (a link or a folder of that name is not one); {fix}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"The {what}'s lock file {path} is not a plain file (a pipe, device or socket); {fix}")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):  # ENOLCK, EOPNOTSUPP: no locks here
                logger.warning("The %s lock %s cannot be taken (%s); a second job there is not refused.", what, path,
                               err.strerror or err)
                os.close(fd)
                return None
            raise UserError(busy(_holder(fd))) from None
        holder = json.dumps({"pid": os.getpid(), "id": label}).encode("utf-8")
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder, 0)
        except OSError:  # (a full disk) who holds the lock only goes into another job's message
            pass
        return fd
    except BaseException:
        os.close(fd)
        raise


def release(fd: int | None) -> None:
    """Let go of a folder :func:`claim` locked (closing the file releases the lock)."""
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
