"""Keep the tokenized-data cache bounded: a size cap with least-recently-used eviction, listing and clearing.

Layout of ``$LF_ENGINE_CACHE/tokenized`` (see :mod:`engine.data.cache` for the keys):

- ``<key>/``: an entry: ``data/`` (Arrow files), ``lf_stats.json``, ``lf_used`` (its modification time is the last
  time the entry was loaded or written) and ``lf_meta.json``, written last: where the entry came from and the size
  of every file, so an entry that lost or cut a file is recognised as incomplete and never loaded.
- ``.<key>-<random suffix>/``: an entry being written, renamed to ``<key>`` once complete. Its writer holds an exclusive lock on
  ``lf_writing.lock`` inside it; a prune removes the folder once no process holds that lock (a killed writer).
- ``.trash-<key>-<random suffix>/``: an entry being removed. Removal renames the entry there first, so a crash in the middle
  of deleting leaves nothing under ``<key>``; the next prune finishes the job.
- ``../locks/tokenized/<key>.lock``: a process that loaded an entry holds a shared lock on it until it exits (the
  data stays memory-mapped while it trains). Eviction takes the exclusive lock without waiting and skips an entry
  it cannot get.
- ``../locks/tokenized.prune.lock``: one prune at a time; a second one meanwhile does nothing.

The cap is ``$LF_ENGINE_CACHE_MAX_GB`` (default 20; ``0`` or ``off`` = no cap), applied after every new entry.
"""

from __future__ import annotations

import dataclasses
import errno
import json
import logging
import math
import os
import shutil
import time
import uuid
from pathlib import Path
from typing import Any

from engine.errors import UserError

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; entries in use are then not protected from a prune
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

CAP_ENV = "LF_ENGINE_CACHE_MAX_GB"
DEFAULT_CAP_GB = 20.0
NO_CAP = ("0", "off", "none", "no", "false", "unlimited")
GB = 1024 ** 3
MB = 1024 ** 2
META = "lf_meta.json"
USED = "lf_used"
WRITING_LOCK = "lf_writing.lock"
TRASH = ".trash-"
LOCKS = "locks"
STALE_UNLOCKED_S = 3600
"""A temporary folder without a lock file (its writer died before taking it) is stale after this many seconds."""

YOUNG_S = 60
"""A temporary or scratch folder younger than this is never taken for a dead process's (its lock may be on its way)."""
PRUNE_WAIT_S = 30.0
"""How long a prune waits for another one to finish (they take milliseconds; this one then sees the new state)."""

_HELD: dict[str, int] = {}  # key -> fd of the shared lock this process holds on an entry it loaded


class CacheError(UserError):
    """A bad cache setting (``LF_ENGINE_CACHE`` not a folder, ``LF_ENGINE_CACHE_MAX_GB``, ``--max-gb``)."""


def parse_cap(value: str | None, name: str = CAP_ENV) -> int | None:
    """Bytes for a cap in GB (``2``, ``0.5``, ``20GB``); None for no cap (``0``, ``off``); the default when unset.

    Raises:
        CacheError: a value that is not a number of GB, negative or infinite.
    """
    if value is None or not value.strip():
        return int(DEFAULT_CAP_GB * GB)
    text = value.strip().lower()
    if text in NO_CAP:
        return None
    number = text[:-2].strip() if text.endswith("gb") else text
    try:
        gb = float(number)
    except ValueError:
        gb = math.nan
    if not math.isfinite(gb) or gb < 0:
        raise CacheError(f"{name}={value!r} is not a size in GB: give a number such as 20 or 0.5 (GB), or 0 / off "
                         f"for no cap (default {DEFAULT_CAP_GB:g}).")
    return None if gb == 0 else int(gb * GB)


def cap_bytes() -> int | None:
    """The cap from ``$LF_ENGINE_CACHE_MAX_GB``; a bad value logs a warning and gives the default (a run goes on)."""
    try:
        return parse_cap(os.environ.get(CAP_ENV))
    except CacheError as err:
        logger.warning("%s Using the default cap of %g GB.", err, DEFAULT_CAP_GB)
        return int(DEFAULT_CAP_GB * GB)


def human(size: float) -> str:
    """A byte count as KB, MB or GB (1024-based, as the cap)."""
    if size >= GB:
        return f"{size / GB:.2f} GB"
    return f"{size / MB:.1f} MB" if size >= MB else f"{size / 1024:.1f} KB"


def describe_cap(cap: int | None) -> str:
    if cap is None:
        return "no cap"
    return f"{cap / GB:.3g} GB cap" if cap >= GB else f"{cap / MB:.3g} MB cap"


# ------------------------------------------------------------------------------------------------------------ locks
def _lock(path: Path, shared: bool, wait: float = 0.0, create: bool = True) -> int | None:
    """Open ``path`` (created if needed and ``create``) and lock it; the fd, or None when the lock was not free within
    ``wait`` seconds (or the file cannot be opened)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            if create:
                path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDONLY | (os.O_CREAT if create else 0), 0o644)
        except OSError:
            return None
        if fcntl is None:
            return fd
        mode = (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB
        while True:
            try:
                fcntl.flock(fd, mode)
                break
            except OSError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    return None
                time.sleep(0.05)
        try:  # an evicted entry's lock file is unlinked: if that happened while we waited, lock the new file
            now, held = os.stat(path), os.fstat(fd)
            if (now.st_ino, now.st_dev) == (held.st_ino, held.st_dev):
                return fd
        except OSError:
            pass
        os.close(fd)


def _make_lock_file(path: Path) -> None:
    """Create a lock file (and its folder); OSError where the cache cannot be written (read-only)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    os.close(os.open(path, os.O_RDONLY | os.O_CREAT, 0o644))


def _lock_path(tokenized: Path, key: str) -> Path:
    return tokenized.parent / LOCKS / tokenized.name / f"{key}.lock"


def hold(tokenized: Path, key: str, wait: float = 10.0) -> bool:
    """Take (once per process) the shared lock that keeps a prune from removing the entry ``key`` while in use."""
    if key in _HELD:
        return True
    path = _lock_path(tokenized, key)
    try:
        _make_lock_file(path)
    except OSError:  # a read-only cache: use it without a hold (a prune cannot remove anything there either)
        return True
    fd = _lock(path, shared=True, wait=wait)
    if fd is None:
        return False
    _HELD[key] = fd
    return True


def release(key: str | None = None) -> None:
    """Drop this process's hold on ``key`` (every entry when None), e.g. when the loaded data is no longer used."""
    for name in [key] if key is not None else list(_HELD):
        fd = _HELD.pop(name, None)
        if fd is not None:
            os.close(fd)


def writing_lock(folder: Path) -> int | None:
    """The exclusive lock a writer holds on its temporary folder while it writes."""
    return _lock(folder / WRITING_LOCK, shared=False)


# ---------------------------------------------------------------------------------------------------- entries
def manifest(folder: Path) -> dict[str, int]:
    """Relative path -> size of every file of an entry but the meta, marker and lock files."""
    files = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.is_file() and rel not in (META, USED, WRITING_LOCK):
            files[rel] = path.stat().st_size
    return files


def read_meta(folder: Path) -> dict[str, Any] | None:
    """The entry's meta when every file it lists is there with its size; None for an incomplete entry."""
    from engine.small_json import TooLarge, read_small_json, reason

    try:
        meta = read_small_json(folder / META)
        files = meta["files"]
        for rel, size in files.items():
            if (folder / rel).stat().st_size != size:
                return None
    except (TooLarge, OSError) as err:
        if isinstance(err, TooLarge) or getattr(err, "errno", None) == errno.EINVAL:  # outsized; a pipe or device
            logger.warning("%s is not a cache entry's meta file (%s); the entry counts as incomplete: it is never "
                           "loaded, and a run with its data tokenizes it again.", folder / META, reason(err))
        return None
    except (ValueError, KeyError, TypeError, AttributeError, RecursionError):
        return None
    return meta


def touch(folder: Path) -> None:
    """Mark the entry used now (its LRU position); a read-only cache is left as it is."""
    try:
        (folder / USED).touch()
    except OSError:
        pass


def _size(folder: Path) -> int:
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                total += os.lstat(os.path.join(base, name)).st_size
            except OSError:
                pass
    return total


def _last_used(folder: Path) -> float:
    for name in (USED, META):
        try:
            return (folder / name).stat().st_mtime
        except OSError:
            continue
    try:
        return folder.stat().st_mtime
    except OSError:
        return 0.0


@dataclasses.dataclass
class Entry:
    """One folder under ``tokenized/``: an entry (``complete`` or not), or a temporary or trash folder."""

    key: str
    path: Path
    size: int
    last_used: float
    kind: str  # "entry", "writing" (a temporary folder) or "trash"
    meta: dict[str, Any] | None = None

    @property
    def complete(self) -> bool:
        return self.kind == "entry" and self.meta is not None


def scan(tokenized: Path) -> list[Entry]:
    """Every entry, temporary and trash folder under ``tokenized``, least recently used first."""
    found = []
    try:
        children = list(tokenized.iterdir())
    except OSError:
        return []
    for path in children:
        if not path.is_dir():
            continue
        if path.name.startswith(TRASH):
            kind, key = "trash", path.name[len(TRASH):].split("-")[0]
        elif path.name.startswith("."):
            kind, key = "writing", path.name[1:].split("-")[0]
        else:
            kind, key = "entry", path.name
        meta = read_meta(path) if kind == "entry" else None
        found.append(Entry(key, path, _size(path), _last_used(path), kind, meta))
    return sorted(found, key=lambda e: (e.last_used, e.key))


def _stale(entry: Entry) -> bool:
    """A temporary folder whose writer is gone (its lock is free), or any trash folder."""
    if entry.kind == "trash":
        return True
    lock = entry.path / WRITING_LOCK
    if not lock.exists():
        return time.time() - entry.last_used > STALE_UNLOCKED_S
    if time.time() - entry.last_used < YOUNG_S:  # its writer may be between creating the lock file and locking it
        return False
    fd = _lock(lock, shared=False, create=False)
    if fd is None:  # held, or just removed by a writer about to rename its folder into place
        return False
    os.close(fd)
    return True


def in_use(tokenized: Path, key: str) -> bool:
    """Whether a process holds the entry (this one included)."""
    if key in _HELD:
        return True
    path = _lock_path(tokenized, key)
    if not path.exists():
        return False
    fd = _lock(path, shared=False, create=False)
    if fd is None:
        return path.exists()
    os.close(fd)
    return False


def _to_trash(tokenized: Path, folder: Path) -> Path:
    """Rename ``folder`` to a trash name (one atomic step) and return it."""
    trash = tokenized / f"{TRASH}{folder.name}-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    os.rename(folder, trash)
    return trash


def remove_entry(tokenized: Path, folder: Path, locked: bool = True) -> bool:
    """Take an entry out of its name (one rename), then delete it; False when a process holds it.

    ``locked=False`` removes a folder that is not an entry (temporary, trash) without the entry lock.
    """
    fd = _lock(_lock_path(tokenized, folder.name), shared=False) if locked else None
    if locked and fd is None:
        return False
    try:
        trash = folder if folder.name.startswith(TRASH) else _to_trash(tokenized, folder)
        if locked:  # the entry is gone from its name: its lock file can go too
            _lock_path(tokenized, folder.name).unlink(missing_ok=True)
    except OSError as err:
        logger.debug("Could not remove %s (%s).", folder, err)
        return False
    finally:
        if fd is not None:
            os.close(fd)
    shutil.rmtree(trash, ignore_errors=True)
    return True


def publish(tokenized: Path, staged: Path, folder: Path) -> bool:
    """Rename a finished entry ``staged`` to ``folder``, replacing the entry there unless a process holds it.

    False (``staged`` left as it is) when the entry there is in use: it is kept rather than pulled away.

    Durable as the final save's publish is (engine.train.final_save.publish): every file of ``staged`` is flushed
    to the disk before the rename (a failed flush raises OSError with nothing renamed), and ``tokenized`` after it,
    so that a power loss soon after cannot leave an entry whose meta says it is complete over Arrow files cut short.
    """
    from engine.atomic_write import sync_folder, sync_tree

    sync_tree(staged)  # before the lock: a long flush does not hold the entry's lock
    path = _lock_path(tokenized, folder.name)
    try:
        _make_lock_file(path)
        fd = _lock(path, shared=False)
    except OSError:  # no lock can be made here: nothing can hold the entry either
        fd = -1
    if fd is None:
        return False
    trash = None
    try:
        if folder.exists():
            trash = _to_trash(tokenized, folder)
        os.replace(staged, folder)
        sync_folder(tokenized)  # the rename (and the earlier entry's move to the trash), best effort
    finally:
        if fd >= 0:
            os.close(fd)
        if trash is not None:
            shutil.rmtree(trash, ignore_errors=True)
    return True


@dataclasses.dataclass
class PruneResult:
    evicted: int = 0
    freed: int = 0  # bytes, evicted entries and removed leftovers together
    leftovers: int = 0  # stale temporary, trash and incomplete folders removed
    kept_in_use: int = 0  # entries over the cap that a process was using
    total: int = 0  # bytes of complete entries left
    busy: bool = False  # another prune was running: nothing done


def prune(tokenized: Path, cap: int | None, keep: tuple[str, ...] = (), wait: float | None = None) -> PruneResult:
    """Remove stale leftovers, then the least recently used entries until the complete ones fit in ``cap`` bytes.

    ``cap`` None removes leftovers only; 0 removes every entry not in use. Entries in ``keep`` (the one just
    written) and entries a process holds are never removed. Another prune running meanwhile is waited for up to
    ``wait`` seconds (default ``PRUNE_WAIT_S``), then this one does nothing (``busy``).
    """
    result = PruneResult()
    if not tokenized.is_dir():  # nothing cached yet: make no folders either
        return result
    path = tokenized.parent / LOCKS / f"{tokenized.name}.prune.lock"
    try:
        _make_lock_file(path)
        guard = _lock(path, shared=False, wait=PRUNE_WAIT_S if wait is None else wait)
    except OSError:  # a read-only cache: removals fail one by one below, and say nothing was freed
        guard = -1
    if guard is None:
        result.busy = True
        return result
    try:
        entries = []
        for entry in scan(tokenized):
            if entry.complete:
                entries.append(entry)
            elif (entry.kind != "entry" and _stale(entry)) or (entry.kind == "entry" and entry.key not in keep):
                if remove_entry(tokenized, entry.path, locked=entry.kind == "entry"):
                    result.leftovers += 1
                    result.freed += entry.size
        result.total = sum(e.size for e in entries)
        for entry in entries:  # least recently used first
            if cap is None or result.total <= cap:
                break
            if entry.key in keep:
                continue
            if entry.key in _HELD or not remove_entry(tokenized, entry.path):
                result.kept_in_use += 1
                continue
            result.evicted += 1
            result.freed += entry.size
            result.total -= entry.size
        _drop_orphan_locks(tokenized)
    finally:
        if guard >= 0:
            os.close(guard)
    return result


def _drop_orphan_locks(tokenized: Path) -> None:
    """Remove the lock files of entries that are gone (deleted by hand, replaced), unless a process holds one."""
    try:
        locks = list((tokenized.parent / LOCKS / tokenized.name).glob("*.lock"))
    except OSError:
        return
    for lock in locks:
        if lock.stem in _HELD or (tokenized / lock.stem).exists():
            continue
        fd = _lock(lock, shared=False, create=False)
        if fd is not None:
            lock.unlink(missing_ok=True)
            os.close(fd)


def prune_after_write(tokenized: Path, key: str) -> PruneResult:
    """Apply ``$LF_ENGINE_CACHE_MAX_GB`` after writing the entry ``key`` (never evicted), logging what went."""
    cap = cap_bytes()
    result = prune(tokenized, cap, keep=(key,))
    if result.evicted:
        logger.info("Tokenized-data cache: evicted %d least recently used entr%s (%s freed) to stay under the "
                    "%s in %s; set %s to change it (0 or off: no cap), `lf-engine cache` lists the entries.",
                    result.evicted, "y" if result.evicted == 1 else "ies", human(result.freed), describe_cap(cap),
                    tokenized.parent, CAP_ENV)
    if cap is not None and result.total > cap and not result.kept_in_use:
        logger.info("Tokenized-data cache: the entry just written (%s) is over the %s by itself and is kept; raise "
                    "%s to keep more than one entry of this size.", human(result.total), describe_cap(cap), CAP_ENV)
    elif cap is not None and result.total > cap:
        logger.info("Tokenized-data cache: %s is over the %s because %d entr%s in use by running jobs; they are "
                    "evicted by a later write or `lf-engine cache --prune` once those jobs end.", human(result.total),
                    describe_cap(cap), result.kept_in_use, "y is" if result.kept_in_use == 1 else "ies are")
    return result


# ------------------------------------------------------------------------------------------ tokenization scratch
SCRATCH_LOCK = ".lf_owner.lock"
_SCRATCH_HELD: list[int] = []


def claim_scratch(folder: Path, prefix: str) -> int:
    """Hold ``folder`` (a process's scratch folder for tokenized Arrow files) until this process ends, and remove
    the sibling ``prefix*`` folders of processes that died without cleaning up (killed, out of memory); returns
    how many went. Folders of an older engine without a lock file go once a day old."""
    fd = _lock(folder / SCRATCH_LOCK, shared=False)
    if fd is not None:
        _SCRATCH_HELD.append(fd)
    removed = 0
    for other in folder.parent.glob(f"{prefix}*"):
        if other == folder or not other.is_dir():
            continue
        lock = other / SCRATCH_LOCK
        if time.time() - _last_used(other) < YOUNG_S:  # its owner may not have locked it yet
            continue
        if lock.exists():
            got = _lock(lock, shared=False, create=False)
            if got is None:
                continue
            os.close(got)
        elif time.time() - _last_used(other) < 86400:
            continue
        shutil.rmtree(other, ignore_errors=True)
        removed += 1
    if removed:
        logger.info("Removed %d tokenization scratch folder%s left in %s by processes that were killed.", removed,
                    "" if removed == 1 else "s", folder.parent)
    return removed


# ----------------------------------------------------------------------------------------------------- the CLI
def _state(tokenized: Path, entry: Entry) -> str:
    if entry.kind == "writing":
        return "stale write" if _stale(entry) else "being written"
    if entry.kind == "trash":
        return "being removed"
    busy = in_use(tokenized, entry.key)
    if not entry.complete:
        return "incomplete, in use" if busy else "incomplete"
    return "in use" if busy else "ok"


def describe(tokenized: Path) -> list[dict[str, Any]]:
    """The listing as plain data (``lf-engine cache --json``), least recently used first."""
    rows = []
    for entry in scan(tokenized):
        source = (entry.meta or {}).get("source") or {}
        source = source if isinstance(source, dict) else {}  # a damaged meta's: listed without its source
        rows.append({"key": entry.key, "path": str(entry.path), "size_bytes": entry.size,
                     "last_used": time.strftime("%Y-%m-%dT%H:%M:%S%z", time.localtime(entry.last_used)),
                     "state": _state(tokenized, entry), "source": source})
    return rows


def format_listing(tokenized: Path, rows: list[dict[str, Any]], cap: int | None) -> str:
    """A table of the entries and a total line naming the cap and how to change or clear it."""
    total = sum(r["size_bytes"] for r in rows)
    lines = []
    if rows:
        table = [("KEY", "SIZE", "LAST USED", "STATE", "STAGE", "DATA", "TOKENIZER", "TEMPLATE")]
        for r in rows:
            src = r["source"]
            data = ",".join(str(x) for x in (src.get("dataset"), src.get("eval_dataset")) if x)
            table.append((r["key"][:12], human(r["size_bytes"]), r["last_used"][:16].replace("T", " "),
                          r["state"], str(src.get("stage") or "-"), data or "-",
                          str(src.get("tokenizer") or "-"), str(src.get("template") or "-")))
        widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
        lines += ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in table]
    lines.append(f"{len(rows)} entr{'y' if len(rows) == 1 else 'ies'}, {human(total)} in {tokenized} "
                 f"({describe_cap(cap)}; {CAP_ENV} changes it, `lf-engine cache --prune` applies it, "
                 "`--clear` empties the cache).")
    return "\n".join(lines)


def format_result(action: str, result: PruneResult, cap: int | None) -> str:
    if result.busy:
        return "Another process is pruning the cache right now; nothing done."
    done = (f"{action}: removed {result.evicted} entr{'y' if result.evicted == 1 else 'ies'} and "
            f"{result.leftovers} unfinished or incomplete folder{'' if result.leftovers == 1 else 's'}, "
            f"{human(result.freed)} freed; {human(result.total)} left")
    if action == "prune":
        done += f" ({describe_cap(cap)})"
    if result.kept_in_use:
        done += (f"; kept {result.kept_in_use} entr{'y' if result.kept_in_use == 1 else 'ies'} in use by a running "
                 "process")
    return done + "."


def run_command(root: Path | None, action: str = "list", max_gb: str | None = None, as_json: bool = False) -> str:
    """``lf-engine cache``: list (``action="list"``), ``prune`` to the cap, or ``clear``; the text to print.

    Raises:
        CacheError: with ``prune``, a bad ``max_gb`` or ``$LF_ENGINE_CACHE_MAX_GB``; a cache root that is no folder.
    """
    if action == "prune":  # the user asked for the cap: a bad value is an error
        cap = parse_cap(max_gb, "--max-gb") if max_gb is not None else parse_cap(os.environ.get(CAP_ENV))
    else:  # listing or clearing does not need it: a bad value is a warning
        cap = cap_bytes()
    if root is None:
        return "The tokenized-data cache is off (LF_ENGINE_CACHE=off): nothing is cached, nothing to list or clear."
    tokenized = root / "tokenized"
    blocked = next((p for p in (tokenized, *tokenized.parents) if p.exists() or p.is_symlink()), None)
    if blocked is not None and not blocked.is_dir():
        raise CacheError(f"The tokenized-data cache cannot be at {tokenized}: {blocked} is not a folder. Point "
                         "LF_ENGINE_CACHE at a folder (it is made when first used), or set it to off.")
    if action in ("prune", "clear"):
        result = prune(tokenized, cap if action == "prune" else 0)
        from engine.data.quick_key import forget_evicted

        forget_evicted(root)
        return format_result(action, result, cap)
    rows = describe(tokenized)
    return json.dumps(rows, indent=1) if as_json else format_listing(tokenized, rows, cap)
