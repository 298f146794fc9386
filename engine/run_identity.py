"""Whether a process really is one of a run's before the board or the engine signals it.

A run folder's records (run.json's pid and process group, ``ranks/<rank>.json``) can be written by anyone who can
write the folder (a second user of a shared workspace, a folder copied in from elsewhere). A record whose pid and
start time are those of another of the user's processes, and whose process group is any group at all, had an abort
signal that group (an editor, the user's shell session). Before a signal goes out, the process named must show that
it belongs to this run:

- every engine process of a run (the main one and each rank) keeps its run folder open as a directory while its
  job runs (:func:`hold_run_folder`), which ``/proc/PID/fd`` shows; or
- its command line names a file in the run folder (the board starts a job, and torchrun, with the run folder's
  ``config.yaml``), read from ``/proc/PID/cmdline`` (psutil where there is no ``/proc``).

A process group is signalled only when it is the process's own group. Where neither can be read (no ``/proc`` and
no psutil, or a process of another user), nothing is signalled.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path

logger = logging.getLogger(__name__)

PROC = Path("/proc")
MAX_FDS = 65_536
"""Open files looked at per process (a training process holds a few hundred)."""

_held: dict[tuple[int, int], int] = {}


def _identity(path: str | Path) -> tuple[int, int] | None:
    try:
        info = os.stat(path)
    except OSError:
        return None
    return (info.st_dev, info.st_ino) if stat.S_ISDIR(info.st_mode) else None


def hold_run_folder(run_dir: str | Path) -> bool:
    """Keep ``run_dir`` open (a directory descriptor, closed on exec) until :func:`release_run_folder`, as the mark
    :func:`belongs_to_run` looks for. True when it is held."""
    ident = _identity(run_dir)
    if ident is None:
        return False
    if ident in _held:
        return True
    try:
        _held[ident] = os.open(run_dir, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | os.O_CLOEXEC)
    except OSError:
        return False
    return True


def release_run_folder() -> None:
    """Close what :func:`hold_run_folder` holds: the job is over (a process runs one job at a time; one that runs many,
    a test session, would otherwise gather descriptors). Its command line still names the run's config where the
    board started it."""
    while _held:
        _, fd = _held.popitem()
        try:
            os.close(fd)
        except OSError:
            pass


def _holds_folder(pid: int, ident: tuple[int, int]) -> bool:
    fd_dir = PROC / str(pid) / "fd"
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False
    for name in names[:MAX_FDS]:
        if _identity(fd_dir / name) == ident:  # stat follows the descriptor to what it has open
            return True
    return False


def _cmdline(pid: int) -> tuple[list[str], str | None] | None:
    """(arguments, working folder) of ``pid``, or None where they cannot be read."""
    base = PROC / str(pid)
    if PROC.is_dir() and base.exists():
        try:
            raw = (base / "cmdline").read_bytes()
        except OSError:
            return None
        try:
            cwd: str | None = os.readlink(base / "cwd")
        except OSError:
            cwd = None
        return [arg for arg in raw.decode("utf-8", "surrogateescape").split("\0") if arg], cwd
    try:
        import psutil

        process = psutil.Process(pid)
        return list(process.cmdline()), process.cwd()
    except Exception:  # noqa: BLE001 - no psutil, a process gone or of another user: nothing can be confirmed
        return None


def _names_a_file_in(args: list[str], cwd: str | None, ident: tuple[int, int]) -> bool:
    for arg in args[:4096]:
        if not arg or len(arg) > 4096 or "\n" in arg:
            continue
        path = Path(arg) if os.path.isabs(arg) or cwd is None else Path(cwd) / arg
        try:
            if not os.path.lexists(path):
                continue
        except (OSError, ValueError):
            continue
        if _identity(path) == ident or _identity(path.parent) == ident:
            return True
    return False


def belongs_to_run(pid: int, run_dir: str | Path) -> bool:
    """Whether process ``pid`` shows that it is one of the run's in ``run_dir`` (see the module's note)."""
    ident = _identity(run_dir)
    if ident is None:
        return False
    if PROC.is_dir() and _holds_folder(pid, ident):
        return True
    found = _cmdline(pid)
    return found is not None and _names_a_file_in(found[0], found[1], ident)


def group_of(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


def signal_target(pid: int, pgid: int | None, run_dir: str | Path | None, *, verified: bool = False,
                  what: str = "process") -> int | None:
    """The process group to signal for ``pid`` (negative: ``-pgid``) or its pid, or None (with a warning) when the
    record does not hold up: ``pgid`` is not ``pid``'s own group, or (unless ``verified``: the caller's own child)
    ``pid`` is not the run's in ``run_dir``."""
    if pgid and group_of(pid) != pgid:
        logger.warning("The %s record names process %d with process group %d, but that process is in group %s; "
                       "the record was not written by the run (or its process is gone): nothing is signalled.",
                       what, pid, pgid, group_of(pid))
        return None
    if not verified and run_dir is not None and not belongs_to_run(pid, run_dir):
        logger.warning("The %s record names process %d, which is not one of the run's in %s (it neither holds the "
                       "run folder open nor names a file in it; a record copied or written by someone else, or a "
                       "system without /proc or psutil): nothing is signalled. Stop that run's processes yourself if "
                       "they are still going.", what, pid, run_dir)
        return None
    return -pgid if pgid else pid


def deliver(target: int, sig: int) -> bool:
    """Send ``sig`` to what :func:`signal_target` returned (negative: a process group); False where it is gone or
    not the user's."""
    try:
        if target < 0:
            os.killpg(-target, sig)
        else:
            os.kill(target, sig)
        return True
    except (ProcessLookupError, PermissionError):
        return False
