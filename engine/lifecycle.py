"""The life of one job in its run folder: status in run.json, the final event, SIGTERM handling.

Every engine command that owns a run folder (train, eval, export, chat server) runs inside :class:`JobContext`.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine import run_lock
from engine.checkpoints import latest_complete, remove_torn
from engine.credentials import masked_argv
from engine.diskfull import (
    THEN,
    DiskFullError,
    FileTooLargeError,
    disk_full_message,
    file_too_large_message,
    is_disk_full,
    is_file_too_large,
    storage_params,
)
from engine.errors import AbortRequested, RankFailure, UserError, error_code
from engine.ranks import (
    clear_rank_error,
    rank_errors,
    record_rank,
    record_rank_error,
    stop_with_launcher,
    world_size,
)
from engine.run_identity import hold_run_folder, release_run_folder
from engine.runs import (
    REWARD_CODE,
    RUN_SAMPLES,
    EventWriter,
    RunFolder,
    package_versions,
    pid_alive,
    process_start_time,
    rewrite_in_place,
    write_text_atomic,
)
from engine.write_denied import WriteDeniedError, denied_message, is_denied

logger = logging.getLogger(__name__)


class JobContext:
    """Marks a run folder running, records the outcome, and turns SIGTERM into a graceful stop.

    While ``in_loop`` is true (inside the training loop) SIGTERM only sets ``abort_requested``; the training
    callback then saves a checkpoint and stops. Outside the loop it raises :class:`AbortRequested` at once.
    """

    def __init__(self, run_dir: str | Path, kind: str, config_yaml: str | None = None, *, fresh: bool = False):
        self.folder = RunFolder(Path(run_dir))
        self.kind = kind
        self.config_yaml = config_yaml
        self.fresh = fresh  # a new run, not a resumed one: its events replace those of a run there before
        try:
            self.events = EventWriter(self.folder.events_path)
        except OSError as err:
            if is_disk_full(err, run_dir):
                raise DiskFullError(disk_full_message(run_dir, then="start the run again")) from None
            raise UserError(f"The run folder `{run_dir}` cannot be created ({err.strerror or err}); set "
                            "`output_dir` to a folder you can write to.") from None
        self.abort_requested = False
        self.in_loop = False
        self.status = "running"
        self.error: str | None = None
        self.error_params: dict[str, Any] | None = None  # run.json's: the error's words as data (engine.diskfull)
        self.metrics: dict[str, Any] = {}
        self._old_handlers: dict[int, Any] = {}
        self._entered = time.time()
        self._lock: int | None = None  # the folder's lock while this job is its live run (engine.run_lock)

    # -- signals -------------------------------------------------------------------------------------------
    def _on_signal(self, signum: int, frame: Any) -> None:
        guard = sys.modules.get("engine.rewards.guard")
        in_reward = guard is not None and guard.user_code_running()
        if in_reward:
            logger.warning("Received signal %s while a reward function was running: stopping now (it may never "
                           "return); the last saved checkpoint stays.", signum)
        else:
            logger.warning("Received signal %s: stopping (a checkpoint is saved when training).", signum)
        self.abort_requested = True
        if not self.in_loop or in_reward:
            raise AbortRequested()

    @property
    def is_main_process(self) -> bool:
        """Only global rank 0 writes run.json and events under torchrun / accelerate."""
        return os.environ.get("RANK", "0") == "0"

    def __enter__(self) -> JobContext:
        if self.is_main_process:  # before anything here is written: another live run's run.json and config stay
            from engine.train.output_dir import live_run_problem, other_job_problem

            self._lock = run_lock.claim(self.folder.path, self.folder.id)  # two runs started at once: one goes on
            live = live_run_problem(self.folder.path)
            if not self.fresh:  # a new training run replaces whatever was there (check_output_dir decides)
                live = live or other_job_problem(self.folder.path, self.kind)
            if live:
                self._release()
                raise UserError(live)
        self._entered = time.time()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # SIGHUP: the terminal or ssh went away
            try:
                self._old_handlers[sig] = signal.signal(sig, self._on_signal)
            except ValueError:  # not in the main thread (tests)
                pass
        record_rank(self.folder.path)  # multi-process runs: the board's abort reaches every rank
        clear_rank_error(self.folder.path)  # this rank's failure of a run in this folder before
        stop_with_launcher()  # and a launcher killed outright takes its ranks with it
        if not self.is_main_process:
            self.events = _NullWriter()
            return self
        try:
            self._record_start()
        except OSError as err:
            self._restore_signals()
            self._release()
            if is_disk_full(err, self.folder.path):  # full before the run began: nothing half-written stays
                raise DiskFullError(disk_full_message(self.folder.path, then="start the run again")) from None
            if is_denied(err, self.folder.path):
                raise WriteDeniedError(denied_message(self.folder.path, err, then="start the run again")) from None
            raise
        return self

    def _record_start(self) -> None:
        """config.yaml and run.json of a starting run, each replaced whole (a failed write leaves the old file)."""
        self.folder.path.mkdir(parents=True, exist_ok=True)
        hold_run_folder(self.folder.path)  # the mark an abort checks before it signals this process
        if self.config_yaml is not None:
            write_text_atomic(self.folder.config_path, self.config_yaml)
        for path in (self.folder.events_path, self.folder.path / RUN_SAMPLES):
            if path.is_symlink():  # appended to (and truncated) through the link: a file elsewhere was written
                logger.warning("%s in the run folder was a link (to %s); the link is removed and the run writes a "
                               "file of its own there (what it pointed to is left as it was).", path.name,
                               os.readlink(path))
                path.unlink()
        if self.fresh:  # one run's curves (and RL samples and reward code) per folder, never two joined
            for path in (self.folder.events_path, self.folder.path / RUN_SAMPLES):
                if path.is_file():
                    os.truncate(path, 0)
            shutil.rmtree(self.folder.path / REWARD_CODE, ignore_errors=True)
        info = self.folder.info()
        # under a launcher the board started (torchrun), run.json keeps the launcher's pid and process group
        launcher = (os.getppid(), int(os.environ.get("LF_LAUNCHER_PID", "0") or 0))  # torchrun / the Ray driver
        launched = bool(info.get("pid")) and info.get("pid") in launcher and world_size() > 1
        self.folder.update(
            id=info.get("id", self.folder.id), kind=self.kind if self.fresh else info.get("kind", self.kind),
            status="running",
            pid=info["pid"] if launched else os.getpid(), pgid=info.get("pgid") if launched else os.getpgid(0),
            pid_started=(info.get("pid_started") or process_start_time(info["pid"])) if launched
            else process_start_time(os.getpid()),
            started_at=time.time(), finished_at=None, exit_code=None,
            error=None, created_at=info.get("created_at", time.time()),
            command=info.get("command") or [sys.executable, "-m", "engine", *masked_argv(sys.argv[1:])],
            versions=package_versions(),
        )

    def _release(self) -> None:
        run_lock.release(self._lock)
        self._lock = None

    def _restore_signals(self) -> None:
        for sig, handler in self._old_handlers.items():
            signal.signal(sig, handler)

    def __exit__(self, exc_type, exc, tb) -> bool:
        self._restore_signals()
        release_run_folder()  # held since the job began (engine.run_identity)
        peer = peer_failure(exc) if exc_type is not None and world_size() > 1 else None
        if not self.is_main_process:
            if peer:
                self._record_for_a_dead_writer(peer)
                raise RankFailure(peer) from exc
            if exc_type is not None and not issubclass(exc_type, (AbortRequested, KeyboardInterrupt)):
                record_rank_error(self.folder.path, str(exc) if issubclass(exc_type, UserError)
                                  else f"{exc_type.__name__}: {exc}")
            return False
        disk_full = exc_type is not None and is_disk_full(exc, self.folder.path)
        too_large = exc_type is not None and not disk_full and is_file_too_large(exc)
        # a write refused in the run folder (a save, a checkpoint, run.json): named, not a traceback
        denied = (exc_type is not None and not disk_full and not too_large and not issubclass(exc_type, UserError)
                  and is_denied(exc, self.folder.path))
        if disk_full:
            self.status = "failed"
            self.error = self._storage_error(disk_full_message)
        elif too_large:
            self.status = "failed"
            self.error = self._storage_error(file_too_large_message)
        elif denied:
            self.status = "failed"
            then = THEN["resume" if latest_complete(self.folder.path)[0] else "start"]
            self.error = denied_message(self.folder.path, exc, then=then)
        elif exc_type is None:
            self.status = "aborted" if self.abort_requested else self.status
        elif issubclass(exc_type, (AbortRequested, KeyboardInterrupt)):
            self.status = "aborted"
            self.error = "stopped by request"
        elif issubclass(exc_type, UserError):
            self.status = "failed"
            self.error = str(exc)
        elif peer:
            self.status = "failed"
            self.error = peer
        else:
            self.status = "failed"
            self.error = f"{exc_type.__name__}: {exc}"
            tail = "".join(traceback.format_exception(exc_type, exc, tb)[-3:])
            self.metrics.setdefault("traceback_tail", tail[-2000:])
        other = self._other_rank_failure() if (exc_type is not None or self.abort_requested) else None
        if other and self.status in ("aborted", "failed") and not disk_full and not too_large and not denied:
            self.status, self.error = "failed", other  # torchrun's SIGTERM (or the lost peer) came of that failure
        exit_code = {"completed": 0, "running": 0, "aborted": 130, "failed": 1}.get(self.status, 1)
        if exc_type is not None and (disk_full or too_large or denied or issubclass(exc_type, UserError)):
            exit_code = 2  # what the CLI exits with for a user error
        if self.status == "running":
            self.status = "completed"
        code = "write_denied" if denied else self._error_code(exc_type, disk_full, too_large,
                                                              bool(other and self.error == other) or bool(peer))
        outcome = {"status": self.status, "finished_at": time.time(), "exit_code": exit_code, "error": self.error,
                   "error_code": code, "error_params": self.error_params}
        try:  # run.json first: on a full disk the room a removed torn checkpoint freed goes to the outcome
            self.folder.update(**outcome)
        except OSError as err:
            if not (disk_full and rewrite_in_place(self.folder.run_path, {**self.folder.info(), **outcome})):
                # the board records the outcome from the exit code and the log
                logger.error("Could not record the outcome in %s: %s", self.folder.run_path, err)
        try:
            self.events.write({"event": "end", "status": self.status, "error": self.error, "error_code": code,
                               "error_params": self.error_params, "metrics": self.metrics})
        except OSError as err:
            logger.error("Could not record the outcome in %s: %s", self.folder.events_path, err)
        self._release()  # the outcome is recorded: another run may take the folder
        if disk_full and not isinstance(exc, DiskFullError):
            raise DiskFullError(self.error) from exc  # the CLI prints it without a traceback
        if too_large and not isinstance(exc, FileTooLargeError):
            raise FileTooLargeError(self.error) from exc
        if denied:
            raise WriteDeniedError(self.error) from exc
        if peer and not disk_full:
            raise RankFailure(other or peer) from exc
        if other and self.error == other:  # not "stopped.": the run failed, and the CLI says why
            raise RankFailure(other) from exc
        return False  # let the CLI decide how to report the exception

    def _error_code(self, exc_type, disk_full: bool, too_large: bool, rank: bool) -> str | None:
        """The stable code of why the run ended (``engine.errors.error_code``), None when it completed."""
        if self.status not in ("failed", "aborted"):
            return None
        if disk_full or too_large:
            return "disk_full" if disk_full else "file_too_large"
        if rank:
            return "rank_failure"
        if self.status == "aborted":
            return "aborted"
        return error_code(exc_type)

    def _other_rank_failure(self) -> str | None:
        """The first failure another rank of this multi-process run recorded, as run.json's error (None: none)."""
        if world_size() <= 1:
            return None
        errors = rank_errors(self.folder.path, since=self._entered - 60)
        if not errors:
            return None
        first = errors[0]
        return (f"Rank {first.get('rank')} of this {world_size()}-process run failed, so the run stopped: "
                f"{first.get('error')}")

    def _record_for_a_dead_writer(self, error: str) -> None:
        """Rank 0 writes run.json; when it is the process that died (run.json names it, and it is gone), a
        surviving rank records the outcome so that run.json does not stay 'running'."""
        try:
            info = self.folder.info()
            if info.get("status") != "running" or not info.get("pid") or pid_alive(int(info["pid"])):
                return
            self.folder.update(status="failed", finished_at=time.time(), exit_code=1, error=error,
                               error_code="rank_failure")
            EventWriter(self.folder.events_path).write({"event": "end", "status": "failed", "error": error,
                                                        "error_code": "rank_failure"})
        except (OSError, ValueError, TypeError) as err:
            logger.error("Could not record the outcome in %s: %s", self.folder.run_path, err)

    def _storage_error(self, message: Callable[..., str]) -> str:
        """A full disk's or a too-large file's message (``message``: :func:`disk_full_message` or
        :func:`file_too_large_message`); torn checkpoints (useless for resuming) are removed first, to make room."""
        removed = remove_torn(self.folder.path)
        latest, _ = latest_complete(self.folder.path)
        self.error_params = storage_params(self.folder.path, THEN["resume" if latest else "start"], removed)
        if message is disk_full_message:
            text = message(self.folder.path, then=THEN[self.error_params["then"]], free=self.error_params["free_mb"])
        else:
            text = message(self.folder.path, then=THEN[self.error_params["then"]])
        if removed:
            text += f" Removed the incomplete {', '.join(removed)} (it could not be resumed from)."
        return text

PEER_GONE = ("Connection reset by peer", "Connection closed by peer", "Broken pipe", "NCCL communicator was aborted",
             "Socket Timeout", "Connection refused")


def peer_failure(exc: BaseException | None) -> str | None:
    """The message for a collective that failed because another rank died (gloo's "Connection reset by peer",
    NCCL's aborted communicator), or None for any other error."""
    text = f"{type(exc).__name__}: {exc}" if exc is not None else ""
    if not (isinstance(exc, RuntimeError) and any(marker in text for marker in PEER_GONE)):
        return None
    rank = os.environ.get("RANK", "?")
    first = next((line.strip() for line in str(exc).splitlines() if any(m in line for m in PEER_GONE)), "")
    return (f"Another process of this {world_size()}-process run ended unexpectedly, so rank {rank} stopped too "
            f"({shorten_line(first)}). The first rank that failed says why in its log (above, or in the board's "
            "log); fix that, then resume with `resume_from_checkpoint: true`.")


def shorten_line(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


class _NullWriter:
    """Event sink of the non-main ranks."""

    def write(self, event: dict[str, Any]) -> None:
        return None
