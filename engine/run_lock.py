"""One live job per run folder: an exclusive lock the job holds for its whole life.

run.json says whether a run is still going, but two runs started at the same instant on one ``output_dir`` both
read it before either had written it, and both went on to write into the folder (one's ``overwrite_output_dir``
removing the other's checkpoints). The job's main process takes an exclusive ``flock`` on ``<folder>/.run.lock``
before it writes anything there and keeps it until its outcome is recorded; the kernel lets go of it when the
process ends in any way (SIGKILL, a crash, the machine's OOM killer), so a dead run never holds a folder. The file
holds the holder's pid and run id, for the message the second job gets. The file itself stays (removing it would let
a third process lock a new file while a second still waits on the old one).
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from pathlib import Path

from engine.errors import UserError

logger = logging.getLogger(__name__)

LOCK_NAME = ".run.lock"
MAX_HOLDER_BYTES = 4096


def _holder(fd: int) -> str:
    """Who holds the lock, as its file says (the holder writes it just after locking, so it may be empty yet)."""
    try:
        data = json.loads(os.pread(fd, MAX_HOLDER_BYTES, 0).decode("utf-8"))
        return f"`{str(data['id'])[:200]}`, process {int(data['pid'])}"
    except (OSError, ValueError, TypeError, KeyError):
        return "it has only just started"


def claim(folder: str | Path, run_id: str) -> int | None:
    """Lock ``folder`` for this process's job; the open lock file's descriptor (None where the file system takes
    no locks: then run.json's check alone stands). Close it (:func:`release`) once the outcome is recorded.

    Raises:
        UserError: another live job holds the folder, or the lock file is not a file this can lock (a link, a
            folder, a pipe someone put there).
    """
    import fcntl

    path = Path(folder) / LOCK_NAME
    Path(folder).mkdir(parents=True, exist_ok=True)
    flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as err:
        raise UserError(f"The run folder's lock file {path} cannot be opened ({err.strerror or err}): it must be a "
                        "plain file (a link or a folder of that name is not one). Remove it and start again, or "
                        "choose another output_dir.") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UserError(f"The run folder's lock file {path} is not a plain file (a pipe, device or socket); "
                            "remove it and start again, or choose another output_dir.")
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as err:
            if err.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):  # ENOLCK, EOPNOTSUPP: no locks here
                logger.warning("The run folder %s cannot be locked (%s); only its run.json tells a live run there.",
                               folder, err.strerror or err)
                os.close(fd)
                return None
            raise UserError(f"`{folder}` is the output folder of a run that is still going ({_holder(fd)}); a second "
                            "run there would mix its files into that run's. Wait for it to end or stop it (the "
                            "board's Abort, or SIGTERM to that process), or choose another output_dir.") from None
        holder = json.dumps({"pid": os.getpid(), "id": run_id}).encode("utf-8")
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
