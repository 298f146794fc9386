"""The run-folder contract shared by the engine (writer) and the board (reader).

A run folder holds ``config.yaml`` (the resolved config), ``run.json`` (status and process facts),
``events.jsonl`` (one JSON object per line as the job goes) and ``stdout.log`` (the process's own output),
beside the job's outputs. Readers follow files incrementally by byte offset.
"""

from __future__ import annotations

import copy
import errno
import json
import logging
import math
import os
import secrets
import signal
import stat
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import Any, BinaryIO

from engine.atomic_write import write_atomic, write_text_atomic  # noqa: F401 - imported from here too

logger = logging.getLogger(__name__)

STATUSES = ("queued", "running", "completed", "failed", "aborted")
FINAL_STATUSES = ("completed", "failed", "aborted")
KINDS = ("train", "eval", "predict", "export", "chat")
TIME_KEYS = ("created_at", "started_at", "launched_at", "finished_at")

CONFIG_FILE = "config.yaml"
RUN_FILE = "run.json"
EVENTS_FILE = "events.jsonl"
RUN_SAMPLES = "completions.jsonl"
"""The RL stages' sampled completions (engine.train.rl), appended during a run like events.jsonl."""
REWARD_CODE = "reward_code"
"""The RL stages' copies of the user reward files a run trained with (engine.rewards.user.keep_reward_code)."""
LOG_FILE = "stdout.log"


def new_run_id(kind: str = "train") -> str:
    """A sortable, unique run id such as ``20261202-141503-train-3fa2``."""
    return f"{datetime.now().strftime('%Y%m%d-%H%M%S')}-{kind}-{secrets.token_hex(2)}"


def claim_run_folder(runs_dir: Path, run_id: str | None, kind: str = "train") -> str:
    """Create a run's folder in ``runs_dir``: ``run_id``'s when it is a plain name and free, else a fresh id's.
    Returns the id. One ``mkdir`` that fails when the folder exists decides, so two callers never get the same one.
    Raises OSError when the folder cannot be made (a full disk, no permission)."""
    runs_dir.mkdir(parents=True, exist_ok=True)
    candidate = run_id if run_id and "/" not in run_id and not run_id.startswith(".") else None
    while True:
        if candidate:
            try:
                (runs_dir / candidate).mkdir()
                return candidate
            except FileExistsError:
                pass
        candidate = new_run_id(kind)


def package_versions() -> dict[str, str]:
    """Versions of the packages that decide a run's behaviour."""
    out = {}
    for name in ("lf-board", "torch", "transformers", "peft", "trl", "accelerate", "datasets"):
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def _json_text(data: dict[str, Any]) -> str:
    from engine.credentials import redact

    return redact(json.dumps(data, indent=2, ensure_ascii=False, default=str))  # an error may quote a secret


def rewrite_in_place(path: Path, data: dict[str, Any]) -> bool:
    """Last resort on a full disk, where even a small temp file cannot be written: overwrite ``path``'s own blocks
    from the start (the file is never empty on the way), then cut it to the new length. True when it worked."""
    raw = _json_text(data).encode("utf-8", "backslashreplace")
    try:
        fd = os.open(path, os.O_WRONLY)
    except OSError:
        return False
    try:
        os.pwrite(fd, raw, 0)
        os.ftruncate(fd, len(raw))
        os.fsync(fd)
        return True
    except OSError:
        return False
    finally:
        os.close(fd)


def write_json_atomic(path: Path, data: dict[str, Any]) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it over ``path``.

    Either the old or the new content is there afterwards, never half of one. When the write fails (a full disk)
    the temp file is removed and the error raised: callers change their in-memory state only after success.
    """
    write_text_atomic(path, _json_text(data))


def write_provenance(folder: Path, config_yaml: str) -> None:
    """House rule: the resolved config (``lf_config.yaml``) and the package versions beside every adapter and
    checkpoint, each file replaced whole."""
    folder.mkdir(parents=True, exist_ok=True)
    write_text_atomic(folder / "lf_config.yaml", config_yaml)
    write_text_atomic(folder / "lf_versions.json", json.dumps(package_versions(), indent=2))


def open_regular(path: str | Path) -> BinaryIO:
    """``path`` opened for reading in binary, only when it is a regular file (a link to one included).

    A run folder's files can be replaced while the board reads them (a link to ``/dev/zero``, a named pipe): opening
    a pipe waited for a writer forever, and reading a device never ended, holding the board's tick or page. Such a
    file is refused at once (opened without waiting, then checked); read a regular file up to its size
    (:func:`read_regular`).

    Raises:
        OSError: missing, unreadable, or not a regular file.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            what = "a folder" if stat.S_ISDIR(mode) else "a pipe, device or socket"
            raise OSError(errno.EINVAL, f"not a regular file ({what})", str(path))
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def open_append(path: str | Path) -> BinaryIO:
    """``path`` opened for appending in binary, always as a regular file of the run folder's own (a job's log).

    A run folder copied in from elsewhere can hold anything under that name: a link was written through (to a file
    anywhere the user can write), and a named pipe held the opener (the board's tick) until a reader came. Such an
    entry is removed, with a warning, and a new file takes its place; what a link pointed to is left as it was.

    Raises:
        OSError: the file can be neither opened nor replaced (a folder of that name, no permission, a full disk).
    """
    flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd: int | None = os.open(path, flags, 0o644)
    except OSError as err:
        if err.errno not in (errno.ELOOP, errno.ENXIO):  # a link; a pipe with no reader
            raise
        fd = None
    if fd is not None and not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        fd = None
    if fd is None:
        logger.warning("%s was a link, pipe or device; it is removed and a file of the run's own takes its place",
                       path)
        os.unlink(path)
        fd = os.open(path, flags | os.O_EXCL, 0o644)
    os.set_blocking(fd, True)
    return os.fdopen(fd, "ab")


def read_regular(path: str | Path, start: int = 0, max_bytes: int | None = None) -> bytes:
    """The bytes of a regular file from ``start`` up to its size now (at most ``max_bytes``); see
    :func:`open_regular`."""
    with open_regular(path) as fh:
        size = os.fstat(fh.fileno()).st_size
        fh.seek(start)
        wanted = max(0, size - start)
        return fh.read(wanted if max_bytes is None else min(wanted, max_bytes))


MAX_RUN_JSON_BYTES = 4 << 20
"""The largest run.json read (bytes): the engine writes a few KB (its error text is cut at 8,000 characters). A
larger one, sparse or not, was read whole, and read again on every tick of the board (it never parses, so it is
never cached)."""


def bounded_lines(fh: BinaryIO, limit: int) -> Iterator[bytes]:
    """The lines of a binary file of at most ``limit`` bytes each; a longer one (a file from elsewhere, a crash's
    run of zero bytes) is skipped to its end, never held whole."""
    while line := fh.readline(limit + 1):
        if len(line) > limit and not line.endswith(b"\n"):
            while (rest := fh.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            continue
        yield line


def read_json(path: Path) -> dict[str, Any]:
    """A JSON object file's contents; {} when it is missing, unreadable, torn, not UTF-8 (a file damaged on disk
    kept the board from starting), not a regular file, larger than :data:`MAX_RUN_JSON_BYTES` or not an object."""
    try:
        raw = read_regular(path, max_bytes=MAX_RUN_JSON_BYTES + 1)
        if len(raw) > MAX_RUN_JSON_BYTES:
            return {}
        data = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, RecursionError):  # ValueError: JSONDecodeError and UnicodeDecodeError
        return {}
    return data if isinstance(data, dict) else {}


_JSON_CACHE: dict[str, tuple[tuple[int, int, int], dict[str, Any]]] = {}
_JSON_CACHE_LOCK = threading.Lock()


def read_json_cached(path: Path) -> dict[str, Any]:
    """``read_json``, parsed again only when the file changed (its inode, size or mtime; writers replace it
    atomically, so a new version is a new inode). Returns a private copy. A board with a thousand runs lists them
    without a thousand parses per page poll."""
    try:
        st = os.stat(path)
    except OSError:
        with _JSON_CACHE_LOCK:
            _JSON_CACHE.pop(str(path), None)  # a deleted run leaves no entry behind
        return {}
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    key = str(path)
    with _JSON_CACHE_LOCK:
        hit = _JSON_CACHE.get(key)
    if hit is None or hit[0] != stamp:
        data = read_json(path)
        if not data:
            return data
        hit = (stamp, data)
        with _JSON_CACHE_LOCK:
            _JSON_CACHE[key] = hit
    return copy.deepcopy(hit[1])  # callers may change what they get


MAX_PID = 2**31 - 1


def as_pid(value: Any) -> int | None:
    """``value`` as a run's process id (2 to 2**31-1; a whole number or its digits), else None. Never 1: init is no
    run's process, and the advice to stop an unconfirmed run's group (``kill -TERM -- -PID``) would signal every
    process for it."""
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.strip().isdigit() and len(value.strip()) <= 10:
        value = int(value.strip())
    return value if isinstance(value, int) and 2 <= value <= MAX_PID else None


def pid_alive(pid: int | None) -> bool:
    """Whether a process with this pid exists (zombies count as dead)."""
    pid = as_pid(pid)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return True


@dataclass
class RunFolder:
    """One job's folder."""

    path: Path

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def config_path(self) -> Path:
        return self.path / CONFIG_FILE

    @property
    def run_path(self) -> Path:
        return self.path / RUN_FILE

    @property
    def events_path(self) -> Path:
        return self.path / EVENTS_FILE

    @property
    def log_path(self) -> Path:
        return self.path / LOG_FILE

    def exists(self) -> bool:
        return self.run_path.is_file()

    def info(self) -> dict[str, Any]:
        """run.json's fields; a process id, time, status or kind that is not one (a file edited by hand or
        damaged on disk: ``"pid": "abc"``, a pid past 64 bits, ``"status": ["x"]``) is left out, so that no reader
        trips over it or signals it."""
        data = read_json_cached(self.run_path)
        for key in ("pid", "pgid"):
            if key in data:
                pid = as_pid(data[key])
                if pid is None:
                    del data[key]
                else:
                    data[key] = pid
        for key, known in (("status", STATUSES), ("kind", KINDS)):  # a status or kind of no run (a list, "x")
            if key in data and data[key] not in known:  # stopped History's table (TypeError) or showed a locale key
                del data[key]
        for key in TIME_KEYS:  # seconds since 1970 that a clock can show (History formats them)
            when = data.get(key)
            if when is not None and (isinstance(when, bool) or not isinstance(when, (int, float))
                                     or not math.isfinite(when) or not 0 <= when < 1e11):
                del data[key]
        return data

    def update(self, **fields: Any) -> dict[str, Any]:
        """Merge fields into run.json (atomic replace)."""
        self.path.mkdir(parents=True, exist_ok=True)
        data = self.info()
        data.update(fields)
        write_json_atomic(self.run_path, data)
        return data

    def create(self, kind: str, config_yaml: str, command: list[str] | None = None, **fields: Any) -> dict[str, Any]:
        """Write a fresh config.yaml and run.json with status ``queued``."""
        self.path.mkdir(parents=True, exist_ok=True)
        write_text_atomic(self.config_path, config_yaml)
        return self.update(
            id=self.id, kind=kind, status="queued", created_at=time.time(), command=command or [],
            versions=package_versions(), **fields,
        )

    def events(self) -> list[dict[str, Any]]:
        return EventReader(self.events_path).read_new()

    def status(self) -> str:
        return self.info().get("status", "unknown")

    def log_tail(self, max_bytes: int = 16_384) -> str:
        return tail_text(self.log_path, max_bytes)


def tail_text(path: Path, max_bytes: int = 16_384) -> str:
    """The last ``max_bytes`` of a text file (starting at a line boundary)."""
    try:
        with open_regular(path) as fh:
            size = os.fstat(fh.fileno()).st_size
            fh.seek(max(0, size - max_bytes))
            data = fh.read(min(size, max_bytes))
    except OSError:
        return ""
    text = data.decode("utf-8", errors="replace")
    if size > max_bytes and "\n" in text:
        text = text.split("\n", 1)[1]
    return text


class EventWriter:
    """Appends one JSON object per line to events.jsonl and flushes each line."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)

    def write(self, event: dict[str, Any]) -> None:
        event = {"time": round(time.time(), 3), **event}
        from engine.credentials import redact

        line = redact(json.dumps(event, ensure_ascii=False, default=_json_default)) + "\n"
        with open_append(self.path) as fh:  # a link or pipe planted there is replaced, never written through
            fh.write(line.encode("utf-8", "backslashreplace"))


def _json_default(obj: Any) -> Any:
    try:
        return float(obj)
    except (TypeError, ValueError):
        return str(obj)


MAX_EVENT_LINE = 4 << 20
"""The longest events.jsonl line read (bytes); the engine's lines are a few KB."""


@dataclass
class EventReader:
    """Reads events.jsonl incrementally: remembers the byte offset and keeps a partial last line for later. Only JSON
    objects come back: a line that is none (damaged, torn, or written by something else) is passed over, and so is
    a line longer than :data:`MAX_EVENT_LINE` (no event is; a file from elsewhere, or a crash's run of zero bytes,
    was kept whole as the partial line and copied again with every chunk read: minutes of a core per GB)."""

    path: Path
    offset: int = 0
    _partial: bytes = field(default=b"", repr=False)
    _overlong: bool = field(default=False, repr=False)  # within a line past MAX_EVENT_LINE: skipped to its end

    def __post_init__(self) -> None:
        self.path = Path(self.path)

    def read_new(self) -> list[dict[str, Any]]:
        return self._read(None)[0]

    def iter_new(self, chunk_bytes: int = 1 << 20) -> Iterator[dict[str, Any]]:
        """The events appended since the last call, read ``chunk_bytes`` at a time: following a long run never holds
        its whole log (or every event parsed from it) at once."""
        while True:
            events, full = self._read(chunk_bytes)
            yield from events
            if not full:
                return

    def _read(self, max_bytes: int | None) -> tuple[list[dict[str, Any]], bool]:
        """(events in the next ``max_bytes`` or up to the end, whether ``max_bytes`` were read: more may follow)."""
        try:
            chunk = read_regular(self.path, self.offset, max_bytes)
        except OSError:
            return [], False
        self.offset += len(chunk)
        if self._overlong:
            end = chunk.find(b"\n")
            if end < 0:
                return [], max_bytes is not None and len(chunk) == max_bytes
            self._overlong, chunk = False, chunk[end + 1:]
        data = self._partial + chunk
        lines = data.split(b"\n")
        self._partial = lines.pop()
        if len(self._partial) > MAX_EVENT_LINE:
            self._partial, self._overlong = b"", True
        out = []
        for line in lines:
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except (ValueError, RecursionError):  # not JSON, not UTF-8 (a line torn mid-character), nested too deep
                continue
            if isinstance(event, dict):  # a number, list or text on a line of its own is no event
                out.append(event)
        return out, max_bytes is not None and len(chunk) == max_bytes


@dataclass
class TextFollower:
    """Reads a growing text file incrementally (for the log view)."""

    path: Path
    offset: int = 0

    def read_new(self, max_bytes: int = 1 << 20) -> str:
        try:
            with open_regular(self.path) as fh:
                size = os.fstat(fh.fileno()).st_size
                if size < self.offset:
                    self.offset = 0
                if size - self.offset > max_bytes:
                    self.offset = size - max_bytes
                fh.seek(self.offset)
                chunk = fh.read(size - self.offset)
        except OSError:
            return ""
        self.offset += len(chunk)
        return chunk.decode("utf-8", errors="replace")


def process_start_time(pid: int | None) -> float | None:
    """When process ``pid`` started (seconds since the epoch), to tell a re-used pid from a run's own process."""
    if not pid:
        return None
    try:
        import psutil

        return psutil.Process(int(pid)).create_time()
    except ImportError:
        pass
    except Exception:
        return None
    try:  # Linux without psutil: field 22 of /proc/PID/stat counts clock ticks since boot
        fields = Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, StopIteration):
        return None


START_TIME_TOLERANCE = 2.0


def same_process(info: dict[str, Any]) -> bool:
    """Whether the process recorded in run.json is still the run's own: its pid is alive and started when
    ``pid_started`` says. A run without ``pid_started`` can never be confirmed (its pid may belong to anything)."""
    pid, started = info.get("pid"), info.get("pid_started")
    if not pid or not started or not pid_alive(int(pid)):
        return False
    now = process_start_time(int(pid))
    try:
        return now is not None and abs(now - float(started)) < START_TIME_TOLERANCE
    except (TypeError, ValueError):
        return False


def signal_run(info: dict[str, Any], sig: int = signal.SIGTERM, *, verified: bool = False,
               run_dir: str | Path | None = None) -> bool:
    """Send a signal to a run's process group (or process). True if something was signalled.

    Only a process confirmed by :func:`same_process` is signalled, unless the caller holds the process itself
    (``verified``: its own child, not yet reaped, so its pid cannot have been re-used). Either way the record's
    process group must be the process's own, and an unverified process must show that it is the run's in
    ``run_dir`` (:func:`engine.run_identity.signal_target`): run.json can be written by anyone who can write the
    folder, and a pid and start time copied from another process had that process's group signalled.
    """
    from engine.run_identity import deliver, signal_target

    pid, pgid = as_pid(info.get("pid")), as_pid(info.get("pgid"))
    if pid is None or (not verified and not same_process(info)):
        return False
    target = signal_target(pid, pgid, run_dir, verified=verified, what="run")
    return target is not None and deliver(target, sig)


def list_runs(root: str | Path) -> list[RunFolder]:
    """Every run folder directly under ``root``, newest first."""
    root = Path(root)
    if not root.is_dir():
        return []
    runs = [RunFolder(p) for p in root.iterdir() if p.is_dir() and (p / RUN_FILE).is_file()]
    return sorted(runs, key=lambda r: r.info().get("created_at", 0), reverse=True)
