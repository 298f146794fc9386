"""The processes of a multi-process run (torchrun, Ray workers), recorded so that an abort reaches every rank.

torchrun starts each rank in its own session, so signalling the launcher's process group reaches the launcher
only (it forwards SIGTERM, but a SIGKILL would orphan the ranks). Each rank therefore writes
``<run>/ranks/<rank>.json`` (pid, process group, host, start time) when its job starts; the board signals those
on the same host as well. Ranks on other machines are reached through their own launcher.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import time
from pathlib import Path
from typing import Any

from engine.atomic_write import write_text_atomic
from engine.run_identity import deliver, hold_run_folder, signal_target

RANKS_DIR = "ranks"


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1") or 1)


def signal_when_parent_dies(sig: int = signal.SIGTERM) -> bool:
    """Ask Linux to send ``sig`` to this process when its parent dies (``PR_SET_PDEATHSIG``); if the parent is
    already gone, send it now. True when set."""
    if not sys.platform.startswith("linux"):
        return False
    parent = os.getppid()
    try:
        import ctypes

        if ctypes.CDLL(None, use_errno=True).prctl(1, int(sig), 0, 0, 0) != 0:  # 1: PR_SET_PDEATHSIG
            return False
    except (OSError, AttributeError):
        return False
    if os.getppid() != parent:  # it died before the request was in place
        os.kill(os.getpid(), sig)
    return True


def stop_with_launcher() -> bool:
    """Under torchrun a rank stops (SIGTERM: a checkpoint, then 'aborted') when its launcher dies, even of a
    SIGKILL, which it cannot forward: the ranks had gone on training as orphans. torchrun starts the ranks from its
    main thread, which lives as long as the launcher."""
    if world_size() <= 1 or "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    return signal_when_parent_dies(signal.SIGTERM)


def record_rank(run_dir: str | Path) -> Path | None:
    """Write this rank's process facts (only in a multi-process run). Atomic; errors are not fatal."""
    if world_size() <= 1:
        return None
    folder = Path(run_dir) / RANKS_DIR
    rank = int(os.environ.get("RANK", "0") or 0)
    data = {"rank": rank, "local_rank": int(os.environ.get("LOCAL_RANK", "0") or 0), "pid": os.getpid(),
            "pgid": os.getpgid(0), "host": socket.gethostname(), "started": time.time()}
    try:
        _records_folder(folder)
        hold_run_folder(run_dir)  # the mark an abort checks before it signals this process (engine.run_identity)
        path = folder / f"{rank}.json"
        _write_record(path, data)
        return path
    except OSError:
        return None


def _records_folder(folder: Path) -> None:
    """``<run>/ranks`` as a folder of the run's own: a link planted under that name (to a folder elsewhere) is
    removed, never followed."""
    if folder.is_symlink():
        folder.unlink()
    folder.mkdir(parents=True, exist_ok=True)


def _write_record(path: Path, data: dict[str, Any]) -> None:
    """A rank's record replaced whole (:func:`engine.atomic_write.write_text_atomic`): its temp file is one of its own, so a
    link planted in a run folder from elsewhere under the temp name this wrote by (``ranks/.<rank>.<pid>.tmp``) is
    not written through, and a failed write (a full disk) leaves no temp file behind."""
    write_text_atomic(path, json.dumps(data))


def record_rank_error(run_dir: str | Path, error: str) -> None:
    """A non-main rank's reason for failing, for rank 0 to report (only rank 0 writes run.json, and torchrun stops it
    with SIGTERM when another rank fails, which alone would read as a stop on request). Errors are not fatal."""
    if world_size() <= 1:
        return
    folder = Path(run_dir) / RANKS_DIR
    rank = int(os.environ.get("RANK", "0") or 0)
    try:
        _records_folder(folder)
        _write_record(folder / f"{rank}.error", {"rank": rank, "error": error, "at": time.time()})
    except OSError:
        pass


def clear_rank_error(run_dir: str | Path) -> None:
    """Remove this rank's recorded failure of an earlier run in the folder."""
    if world_size() > 1:
        rank = int(os.environ.get("RANK", "0") or 0)
        try:
            (Path(run_dir) / RANKS_DIR / f"{rank}.error").unlink(missing_ok=True)
        except OSError:
            pass


MAX_ENTRY_BYTES = 1 << 20
"""A rank's record is a line of JSON (its error record holds the error's text); one past this is no record of ours."""


def _read_entry(path: Path) -> Any:
    """A rank's record, or None when it cannot be one: read only as a regular file of at most
    :data:`MAX_ENTRY_BYTES` (the board reads them to stop a run: a named pipe there held it, a sparse file of
    gigabytes was read whole)."""
    from engine.small_json import read_small_json

    try:
        return read_small_json(path, MAX_ENTRY_BYTES)
    except (OSError, ValueError, RecursionError):
        return None


def rank_errors(run_dir: str | Path, since: float) -> list[dict[str, Any]]:
    """The failures other ranks recorded (:func:`record_rank_error`) since ``since``, by rank."""
    out = []
    for path in (Path(run_dir) / RANKS_DIR).glob("*.error"):
        entry = _read_entry(path)
        at = entry.get("at") if isinstance(entry, dict) else None
        if isinstance(at, (int, float)) and not isinstance(at, bool) and at >= since:
            out.append(entry)
    return sorted(out, key=_by_rank)


def _by_rank(entry: dict[str, Any]) -> int:
    """A record's rank to sort by (0 for a damaged record's, such as text: mixed with numbers, sorting failed)."""
    rank = entry.get("rank")
    return rank if isinstance(rank, int) else 0


def read_ranks(run_dir: str | Path) -> list[dict[str, Any]]:
    """The recorded ranks of a run, by rank."""
    out = []
    for path in sorted((Path(run_dir) / RANKS_DIR).glob("*.json")):
        entry = _read_entry(path)
        if isinstance(entry, dict):  # a damaged record (not an object) names no process
            out.append(entry)
    return sorted(out, key=_by_rank)


def _same_process(entry: dict[str, Any]) -> bool:
    """The pid still belongs to the rank that wrote the entry (not a re-used pid)."""
    from engine.runs import as_pid

    pid = as_pid(entry.get("pid"))  # a damaged record (a pid that is no number, or 1) names no process
    if pid is None:
        return False
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            fields = fh.read().rsplit(")", 1)[-1].split()
        if fields[0] == "Z":
            return False
        boot = time.time() - float(open("/proc/uptime", encoding="utf-8").read().split()[0])
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
        written = float(entry["started"])  # a record without one names no process
        return written - 600 <= started <= written + 2  # the process existed when the entry was written
    except (KeyError, ValueError, IndexError, TypeError):  # TypeError: a `started` that is no number
        return False
    except OSError:  # no /proc: engine.run_identity decides with psutil, or nothing is signalled
        try:
            os.kill(pid, 0)
            return True
        except OSError:
            return False


def signal_ranks(run_dir: str | Path, sig: int = signal.SIGTERM) -> int:
    """Signal every live rank of this host (its process group). Returns how many were signalled.

    A record is only a claim (anyone who can write the run folder can write one): a rank is signalled only when its
    process shows that it is this run's and the record's process group is its own (:mod:`engine.run_identity`);
    any other record is refused with a warning."""
    from engine.runs import as_pid

    host = socket.gethostname()
    count = 0
    for entry in read_ranks(run_dir):
        if entry.get("host") != host or not _same_process(entry):
            continue
        pid = as_pid(entry.get("pid"))
        target = signal_target(pid, as_pid(entry.get("pgid")), run_dir,  # type: ignore[arg-type] - checked above
                               what=f"rank {entry.get('rank')!r}")
        if target is not None and deliver(target, sig):
            count += 1
    return count


def live_ranks(run_dir: str | Path) -> list[int]:
    """Pids of this host's ranks that are still running (only processes that show they are this run's)."""
    from engine.run_identity import belongs_to_run

    host = socket.gethostname()
    return [int(e["pid"]) for e in read_ranks(run_dir)
            if e.get("host") == host and _same_process(e) and belongs_to_run(int(e["pid"]), run_dir)]


def any_rank(flag: bool) -> bool:
    """True when ``flag`` is true on any rank (a collective in a process group; the flag itself otherwise)."""
    try:
        import torch
        import torch.distributed as dist
    except ImportError:  # pragma: no cover
        return flag
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return flag
    device = "cpu" if dist.get_backend() == "gloo" else None
    if device is None:
        from engine import devices

        device = devices.current_device()
    value = torch.tensor([1 if flag else 0], dtype=torch.int32, device=device)
    dist.all_reduce(value, op=dist.ReduceOp.MAX)
    return bool(value.item())
