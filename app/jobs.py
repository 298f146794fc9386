"""The board's one job manager: every job is a ``python -m engine ...`` subprocess with its own run folder.

- Submitting writes ``config.yaml`` and ``run.json`` (status ``queued``) under ``<workspace>/runs/<id>/``.
- Batch jobs (train, eval, predict, export) wait in a FIFO queue for the devices and run one at a time; chat
  servers start at once (they are interactive and are unloaded by the user).
- A child's stdout and stderr go straight to ``stdout.log`` (never a pipe the board must drain), and it runs in
  its own session, so it keeps going when the browser closes or the board stops.
- A background thread reaps finished processes, escalates aborts (SIGTERM to the process group, SIGKILL after
  a grace period) and starts the next queued job.
- On start the manager rediscovers runs from the workspace: live processes are re-attached, dead ``running``
  ones are marked failed with their last log lines, ``queued`` ones are queued again in order.
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import yaml

from app.job_process import REPO_ROOT, _Live, child_env  # noqa: F401 (REPO_ROOT, child_env: imported from here)
from app.launch import build_command, stop_ranks
from app.monitor import RunMonitor
from app.run_outcome import decide, disk_full_problem
from engine.config.limits import shorten, surrogate_at
from engine.diskfull import free_mb, is_disk_full, nearly_full
from engine.errors import Problem
from engine.runs import (
    FINAL_STATUSES,
    KINDS,
    RunFolder,
    claim_run_folder,
    list_runs,
    new_run_id,
    open_append,
    pid_alive,
    process_start_time,
    same_process,
    signal_run,
)

logger = logging.getLogger(__name__)
"""Introduces the end of a run's log quoted in the error of a run that ended without saying why."""

BATCH_KINDS = ("train", "eval", "predict", "export")
# engine sub-command per run kind
COMMANDS = {"train": "train", "eval": "eval", "predict": "eval", "export": "export", "chat": "api"}


class JobError(ValueError):
    """A request the manager cannot carry out (unknown run, wrong state); the message names the fix.

    ``key`` is a locale key (``job_...``) and ``params`` its placeholders: ``str()`` is the English text (the API's
    and the log's), :meth:`text` the page's language (a run status or kind in it translated too). Any other ``key``
    is a message as it is.
    """

    def __init__(self, key: str, **params: Any) -> None:
        self.key, self.params = key, params
        super().__init__(self.text("en"))

    def text(self, lang: str | None) -> str:
        """The message in ``lang`` (a run status or kind in it translated too)."""
        from app.i18n import load_locale, t, translate

        if self.key not in load_locale("en"):
            return self.key
        params = dict(self.params)
        if "status" in params and f"status_{params['status']}" in load_locale("en"):
            params["status"] = t(lang, f"status_{params['status']}")
        if "kind" in params and f"kind_{params['kind']}" in load_locale("en"):
            params["kind"] = t(lang, f"kind_{params['kind']}")
        return translate(lang, self.key, **params)


MAX_RUN_ID_CHARS = 128


def disk_full_error(path: str | Path) -> JobError:
    """The refusal of a request whose run folder could not be written for a full disk: the folder, the free space
    and what to do, in the page's language (:meth:`JobError.text`)."""
    free = free_mb(path)
    if free is None:
        return JobError("job_disk_full_unknown", path=path)
    return JobError("job_disk_full", path=path, free=f"{free:,}")


def _abort_target(folder: RunFolder, live: _Live) -> dict[str, Any]:
    """The run.json record an abort signals: the board's own child (started in a session of its own) is its own
    process group, whatever run.json says; a re-attached run's group is run.json's, checked against its process
    (``signal_run``)."""
    info = folder.info()
    pgid = live.pid if live.proc is not None else (info.get("pgid") or live.pid)
    return info | {"pid": live.pid, "pgid": pgid}


class JobManager:
    """Queue, start, watch, abort and rediscover runs under ``<workspace>/runs``.

    Args:
        runs_dir: where run folders are created.
        engine_command: the command prefix for jobs (default ``[sys.executable, "-m", "engine"]``); tests use a
            fake engine script.
        kill_grace: seconds between SIGTERM and SIGKILL on abort.
        poll_interval: seconds between checks of the background thread.
        max_parallel: batch jobs running at once.
    """

    def __init__(
        self,
        runs_dir: str | Path,
        engine_command: list[str] | None = None,
        *,
        kill_grace: float = 20.0,
        poll_interval: float = 0.5,
        max_parallel: int = 1,
        cwd: str | Path | None = None,
    ):
        self.runs_dir = Path(runs_dir).resolve()
        self.engine_command = list(engine_command or [sys.executable, "-m", "engine"])
        self.kill_grace = kill_grace
        self.poll_interval = poll_interval
        self.max_parallel = max_parallel
        self.cwd = str(cwd or Path.cwd())
        self._lock = threading.RLock()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._queue: list[str] = []
        self._live: dict[str, _Live] = {}
        self._monitors: dict[str, RunMonitor] = {}
        self._thread: threading.Thread | None = None
        self._write_failed: set[str] = set()
        self._env: dict[str, dict[str, str]] = {}  # run id -> extra environment (secrets), until it starts

    # -- life cycle ---------------------------------------------------------------------------------------
    def start(self) -> JobManager:
        """Rediscover runs and start the background thread (idempotent)."""
        self.runs_dir.mkdir(parents=True, exist_ok=True)
        with self._lock:
            if self._thread is not None:
                return self
            self.rediscover()
            self._thread = threading.Thread(target=self._loop, name="lfboard-jobs", daemon=True)
            self._thread.start()
        return self

    def shutdown(self) -> None:
        """Stop the background thread; running jobs keep going and are re-attached next time."""
        self._stop.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def rediscover(self) -> dict[str, list[str]]:
        """Scan the runs folder: re-attach live processes, fail dead ones, re-queue queued ones."""
        found: dict[str, list[str]] = {"attached": [], "failed": [], "queued": []}
        queued = []
        with self._lock:
            for folder in list_runs(self.runs_dir):
                info = folder.info()
                status, run_id = info.get("status"), folder.id
                if status == "running" and run_id not in self._live:
                    pid = info.get("pid")
                    kind = info.get("kind", "train")
                    if same_process(info):
                        self._live[run_id] = _Live(run_id, int(pid), kind=kind, started=info.get("started_at"))
                        found["attached"].append(run_id)
                    elif pid and not info.get("pid_started") and pid_alive(int(pid)):
                        # written without the process start time: watched until the pid ends, never signalled
                        self._live[run_id] = _Live(
                            run_id, int(pid), kind=kind, started=info.get("started_at"), verified=False
                        )
                        found["attached"].append(run_id)
                        logger.warning(
                            "Run %s has no pid_started in run.json: pid %s is watched but never signalled", run_id, pid
                        )
                    else:
                        if not self._finish(folder, None, reason="lost"):  # retried by the tick
                            self._live[run_id] = _Live(run_id, int(pid or 0), kind=kind, ended=True, reason="lost")
                        found["failed"].append(run_id)
                elif status == "queued" and run_id not in self._queue:
                    lost = [name for name in info.get("secret_env") or [] if name not in os.environ]
                    if lost:  # kept in the last board's memory only: starting without them would fail later, or
                        # quietly act without them (a gated model's download, a tracker's login)
                        self._write(folder, status="failed", finished_at=time.time(), error=(
                            f"The board restarted before this run started, and the secret it was submitted with "
                            f"({', '.join(lost)}) was kept only in that board's memory, never on disk; the run was "
                            "not started. Submit it again."), error_code="secret_lost", error_params={"secrets": lost})
                        found["failed"].append(run_id)
                        continue
                    queued.append((info.get("created_at", 0), run_id))
            for _, run_id in sorted(queued):
                self._queue.append(run_id)
                found["queued"].append(run_id)
        if any(found.values()):
            words = {"attached": "still going (re-attached)",
                     "failed": "ended while no board was running, or queued with a secret it no longer has (failed)",
                     "queued": "queued"}
            logger.info("Runs from before this start: %s",
                        ", ".join(f"{len(ids)} {words[key]}" for key, ids in found.items() if ids))
        self._wake.set()
        return found

    # -- requests -----------------------------------------------------------------------------------------
    def folder(self, run_id: str) -> RunFolder:
        """The run folder of ``run_id`` (JobError when it does not exist)."""
        if not isinstance(run_id, str) or len(run_id) > MAX_RUN_ID_CHARS:
            raise JobError("job_not_run_id_long", run=shorten(run_id, 40), limit=MAX_RUN_ID_CHARS)
        if not run_id or "/" in run_id or "\\" in run_id or run_id.startswith(".") or surrogate_at(run_id) is not None:
            raise JobError("job_not_run_id", run=shorten(run_id, 40))
        folder = RunFolder(self.runs_dir / run_id)
        if not folder.exists():
            raise JobError("job_no_run", run=run_id, folder=self.runs_dir)
        return folder

    def new_run_id(self, kind: str = "train") -> str:
        run_id = new_run_id(kind)
        while (self.runs_dir / run_id).exists():
            run_id = new_run_id(kind)
        return run_id

    def submit(
        self,
        kind: str,
        config: dict[str, Any],
        *,
        run_id: str | None = None,
        args: list[str] | None = None,
        meta: dict[str, Any] | None = None,
        env: dict[str, str] | None = None,
    ) -> str:
        """Create a run folder for ``config`` (its ``output_dir`` becomes the folder) and queue or start it.

        Args:
            kind: train, eval, predict, export or chat.
            config: the flat config mapping (already validated by the caller).
            run_id: a pre-chosen id (for a previewed config); a fresh one when None or taken.
            args: extra command-line arguments after the config path (chat: host and port).
            meta: extra fields for run.json (for example a display name).
            env: extra environment variables for the process (secrets, a chat worker's key): kept in memory only,
                never written to the run folder.

        Returns:
            The run id.
        """
        if kind not in KINDS:
            raise JobError("job_unknown_kind", kind=kind, kinds=", ".join(KINDS))
        names = {"secret_env": sorted(env)} if env else {}  # (never their values: a restarted board lacks them)
        folder = RunFolder(self.runs_dir)  # until claimed: its own folder, made by one mkdir (two submits of one
        try:  # pre-chosen id, a double click on Start, get one each: checking first let both take the same folder)
            folder = RunFolder(self.runs_dir / claim_run_folder(self.runs_dir, run_id, kind))
            run_id = folder.id
            mapping = {**config, "output_dir": str(folder.path)}
            command = self.command_for(kind, folder.config_path, args, (meta or {}).get("launch"))
            folder.create(
                kind,
                yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True),
                command=command,
                args=list(args or []),
                **(meta or {}),
                **names,
            )
        except OSError as err:
            if folder.path != self.runs_dir:
                shutil.rmtree(folder.path, ignore_errors=True)
            if is_disk_full(err, self.runs_dir):
                raise disk_full_error(self.runs_dir) from None
            raise JobError("job_folder_unwritable", folder=folder.path, reason=err.strerror or err) from None
        with self._lock:
            if env:
                self._env[run_id] = dict(env)
            if kind in BATCH_KINDS:
                self._queue.append(run_id)
            elif not self._launch(folder):
                self._env.pop(run_id, None)
                shutil.rmtree(folder.path, ignore_errors=True)
                if nearly_full(self.runs_dir):
                    raise disk_full_error(self.runs_dir)
                raise JobError("job_run_file_unwritable", path=folder.run_path)
        self._wake.set()
        logger.info("Submitted %s run %s", kind, run_id)
        return run_id

    def command_for(self, kind: str, config_path: Path, args: list[str] | None = None,
                    launch: dict[str, Any] | None = None) -> list[str]:
        """The exact command line of a job (torchrun for a multi-process ``launch``; see app.launch)."""
        return build_command(self.engine_command, COMMANDS[kind], config_path, args, launch)

    def abort(self, run_id: str) -> str:
        """Cancel a queued run or stop a running one (SIGTERM now, SIGKILL after the grace period).

        Returns:
            ``cancelled`` (was queued), ``stopping`` (signal sent) or ``finished`` (nothing to do).
        """
        folder = self.folder(run_id)
        with self._lock:
            if run_id in self._queue:
                self._write(folder, status="aborted", finished_at=time.time(), error="cancelled before it started",
                                error_code="cancelled")
                self._queue.remove(run_id)  # only once the cancellation is on disk
                return "cancelled"
            live = self._live.get(run_id)
            info = folder.info()
            if info.get("status") in FINAL_STATUSES:
                return "finished"  # the engine has reported its outcome; the process is only exiting
            if live is None and info.get("status") == "running" and same_process(info):
                live = self._live[run_id] = _Live(
                    run_id, int(info["pid"]), kind=info.get("kind", "train"), started=info.get("started_at")
                )
            if live is None:
                if info.get("status") == "queued":  # queued by a board that is gone
                    self._write(folder, status="aborted", finished_at=time.time(), error="cancelled before it started",
                                error_code="cancelled")
                    return "cancelled"
                if info.get("status") == "running":
                    if info.get("pid_started") or not (info.get("pid") and pid_alive(int(info["pid"]))):
                        self._finish(folder, None, reason="lost")  # its process is gone (a re-used pid is not it)
                    else:
                        raise JobError("job_unverified_pid", run=run_id, pid=info.get("pid"))
                return "finished"
            if live.ended:
                return "finished"
            if not live.verified:
                raise JobError("job_unverified_pid", run=run_id, pid=live.pid)
            if live.abort_deadline is None:
                live.abort_deadline = time.time() + self.kill_grace
                try:
                    folder.update(abort_requested_at=time.time())
                except OSError:
                    pass  # the signal matters more than the note
                if not signal_run(_abort_target(folder, live), signal.SIGTERM, verified=live.proc is not None,
                                  run_dir=folder.path):
                    logger.warning("Run %s: SIGTERM could not be delivered", run_id)
        self._wake.set()
        return "stopping"

    def delete(self, run_id: str) -> None:
        """Remove a finished run's folder (a queued or running one must be aborted first)."""
        folder = self.folder(run_id)
        # A run whose outcome is written but whose process has not been reaped yet (the next tick does it) is
        # finished for the user: reap it now, giving its process up to 2 s to exit.
        deadline = time.time() + 2.0
        while run_id in self._live and folder.status() in FINAL_STATUSES and time.time() < deadline:
            self.tick()
            if run_id in self._live:
                time.sleep(0.05)
        with self._lock:
            if run_id in self._queue or run_id in self._live:
                status = folder.status()
                if status in FINAL_STATUSES:
                    raise JobError("job_not_exited", run=run_id, status=status)
                raise JobError("job_abort_first", run=run_id, status=status)
            if folder.path.resolve().parent != self.runs_dir:
                raise JobError("job_outside_runs", folder=folder.path)
            self._monitors.pop(run_id, None)
            shutil.rmtree(folder.path)

    # -- queries ------------------------------------------------------------------------------------------
    def queue(self) -> list[str]:
        with self._lock:
            return list(self._queue)

    def queue_position(self, run_id: str) -> int | None:
        """1 for the next run to start, None when not queued."""
        with self._lock:
            return self._queue.index(run_id) + 1 if run_id in self._queue else None

    def running(self) -> list[str]:
        """Ids of the live processes (batch jobs and chat servers)."""
        with self._lock:
            return list(self._live)

    def busy(self) -> bool:
        """Whether the devices are taken by batch jobs (a new batch job will wait in the queue)."""
        with self._lock:
            return sum(1 for live in self._live.values() if live.kind in BATCH_KINDS and not live.ended) >= self.max_parallel

    def monitor(self, run_id: str) -> RunMonitor:
        """The shared, refreshed monitor of a run."""
        with self._lock:
            mon = self._monitors.get(run_id)
            if mon is None:
                mon = self._monitors[run_id] = RunMonitor(self.folder(run_id))
        return mon.refresh()

    def status(self, run_id: str) -> dict[str, Any]:
        """A JSON-ready summary: id, kind, status, step, total, loss, eta, queue position, error, paths."""
        mon = self.monitor(self.folder(run_id).id)  # a folder deleted since: JobError, not its cached monitor's view
        info = mon.info
        prog = mon.progress()
        return {
            "id": run_id,
            "kind": info.get("kind"),
            "status": info.get("status"),
            "step": prog["step"],
            "total": prog["total"],
            "loss": prog["loss"],
            "eval_loss": prog["eval_loss"],
            "lr": prog["lr"],
            "tokens_per_s": prog["tokens_per_s"],
            "eta": prog["eta"],
            "elapsed": prog["elapsed"],
            "queue_position": self.queue_position(run_id),
            "exit_code": info.get("exit_code"),
            "error": mon.error_lines() or None,
            "output_dir": str(mon.folder.path),
            "port": info.get("port"),
            "ready": info.get("ready"),
        }

    def list(self) -> list[dict[str, Any]]:
        """Every run's run.json, newest first, with its queue position."""
        out = []
        for folder in list_runs(self.runs_dir):
            info = folder.info()
            info.setdefault("id", folder.id)
            info["queue_position"] = self.queue_position(folder.id)
            out.append(info)
        return out

    def wait(self, run_id: str, timeout: float = 60.0, statuses: tuple[str, ...] = FINAL_STATUSES) -> str:
        """Block until the run reaches one of ``statuses`` (or the timeout passes); returns the status."""
        deadline = time.time() + timeout
        status = self.folder(run_id).status()
        while status not in statuses and time.time() < deadline:
            time.sleep(0.1)
            status = self.folder(run_id).status()
        return status

    # -- the background thread ----------------------------------------------------------------------------
    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except Exception:  # keep the manager alive whatever one run does
                logger.exception("Job manager tick failed")
            self._wake.wait(self.poll_interval)
            self._wake.clear()

    def tick(self) -> None:
        """One round: reap, escalate aborts, start queued jobs, retry writes that failed.

        In-memory state changes only after run.json says so: a run leaves the live set once its outcome is
        written, and leaves the queue once it is marked running. A failed write (a full disk) is retried on the
        next tick, so no state change is lost and the board recovers by itself when space comes back.
        """
        with self._lock:
            for run_id, live in list(self._live.items()):
                folder = RunFolder(self.runs_dir / run_id)
                if not folder.exists():  # deleted by hand: writing its outcome would bring back a folder of one file
                    if live.has_ended():
                        logger.warning("Run %s: its folder was deleted; its process has ended, nothing recorded", run_id)
                        del self._live[run_id]
                    continue
                if live.pending and self._try_write(folder, live, live.pending):
                    live.pending = None
                if not live.ended:
                    code = live.proc.poll() if live.proc is not None else None
                    alive = code is None and (live.proc is not None or pid_alive(live.pid))
                    if alive:
                        if live.abort_deadline is not None and time.time() > live.abort_deadline and not live.killed:
                            logger.warning(
                                "Run %s ignored SIGTERM for %.0fs: sending SIGKILL", run_id, self.kill_grace
                            )
                            signal_run(_abort_target(folder, live), signal.SIGKILL, verified=live.proc is not None,
                                       run_dir=folder.path)
                            stop_ranks(folder.path, signal.SIGKILL)  # torchrun's ranks live in their own sessions
                            live.killed = True
                        continue
                    live.ended, live.exit_code = True, code
                    stop_ranks(folder.path, signal.SIGKILL)  # no rank outlives its launcher
                    live.reason = "aborted" if live.abort_deadline else None
                if self._finish(folder, live.exit_code, reason=live.reason, live=live):
                    del self._live[run_id]
            running_batch = sum(1 for live in self._live.values() if live.kind in BATCH_KINDS and not live.ended)
            while self._queue and running_batch < self.max_parallel:
                run_id = self._queue[0]
                folder = RunFolder(self.runs_dir / run_id)
                if folder.status() != "queued":
                    self._queue.pop(0)
                    continue
                if not self._launch(folder):
                    break  # run.json could not be written: the run stays first in the queue for the next tick
                self._queue.pop(0)
                running_batch += 1

    def _write(self, folder: RunFolder, **fields: Any) -> None:
        """Write run.json fields for a request; a failure becomes a JobError that names the cause."""
        try:
            folder.update(**fields)
        except OSError as err:
            if is_disk_full(err, folder.path):
                raise disk_full_error(folder.path) from None
            raise JobError("job_file_unwritable", path=folder.run_path, reason=err.strerror or err) from None

    def _try_write(self, folder: RunFolder, live: _Live | None, fields: dict[str, Any]) -> bool:
        """Merge ``fields`` into run.json; False when the write fails (logged as one line per run, not per tick)."""
        try:
            folder.update(**fields)
        except OSError as err:
            if folder.id not in self._write_failed:
                self._write_failed.add(folder.id)
                free = free_mb(folder.path)
                logger.warning("Run %s: could not write run.json (%s; %s MB free); retrying on each tick", folder.id,
                               err.strerror or err, "?" if free is None else f"{free:,}")
            return False
        if folder.id in self._write_failed:
            self._write_failed.discard(folder.id)
            logger.info("Run %s: run.json written again", folder.id)
        return True

    def _launch(self, folder: RunFolder) -> bool:
        """Mark a run running and start its process; False when run.json could not be written (nothing started)."""
        info = folder.info()
        kind = info.get("kind", "train")
        command = self.command_for(kind, folder.config_path, info.get("args"), info.get("launch"))
        now = time.time()
        fields = dict(status="running", started_at=now, launched_at=now, command=command, finished_at=None,
                      exit_code=None)
        if not self._try_write(folder, None, fields):
            return False
        try:
            with open_append(folder.log_path) as log:  # never through a link, never waiting on a pipe
                proc = subprocess.Popen(
                    command,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    cwd=self.cwd,
                    env={**child_env(), **self._env.pop(folder.id, {})},
                    start_new_session=True,
                )
        except OSError as err:
            error = Problem(f"Could not start `{' '.join(command)}`: {err}", "start_failed")
            if is_disk_full(err, folder.path):
                error = disk_full_problem(folder.path, "start")
            failed = _Live(folder.id, 0, kind=kind, ended=True)
            failed.pending = dict(status="failed", finished_at=time.time(), exit_code=None, error=str(error),
                                  error_code=error.code, error_params=getattr(error, "params", None))
            self._live[folder.id] = failed  # the tick writes the outcome (and retries it)
            return True
        live = _Live(folder.id, proc.pid, kind=kind, proc=proc, started=time.time())
        live.pending = dict(pid=proc.pid, pgid=proc.pid, pid_started=process_start_time(proc.pid))
        if self._try_write(folder, live, live.pending):
            live.pending = None
        self._live[folder.id] = live
        logger.info("Started run %s (pid %d): %s", folder.id, proc.pid, " ".join(command))
        return True

    def _finish(self, folder: RunFolder, exit_code: int | None, reason: str | None, live: _Live | None = None) -> bool:
        """Record the outcome of a process that has ended, unless the engine already did.

        Returns:
            Whether run.json now holds the outcome (False: the write failed; call again on the next tick).
        """
        info = folder.info()
        fields: dict[str, Any] = {}
        if live is not None and live.pending:
            return False  # earlier fields are still unwritten
        if info.get("status") in FINAL_STATUSES:
            if info.get("exit_code") is None and exit_code is not None:
                fields["exit_code"] = exit_code
            if not info.get("finished_at"):
                fields["finished_at"] = time.time()
        else:
            status, error = decide(folder, exit_code, reason)
            fields = {"status": status, "error": error, "error_code": getattr(error, "code", None),
                      "error_params": getattr(error, "params", None), "exit_code": exit_code, "finished_at": time.time()}
        if fields and not self._try_write(folder, live, fields):
            return False
        logger.info("Run %s ended: %s", folder.id, folder.status())
        return True
