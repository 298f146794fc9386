"""Faults the job manager must survive: run.json writes that fail (a full disk), a disk that fills up under a run,
processes without a recorded start time, run ids that are not run ids."""

from __future__ import annotations

import errno
import json
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.jobs import JobError, JobManager
from engine.runs import RunFolder
from tests.full_disk import fill_disk

FAKE = Path(__file__).with_name("fake_engine.py")


class FullDisk:
    """Makes every run.json write fail with ENOSPC while ``on`` (as a full file system does), leaving no temp file."""

    def __init__(self, monkeypatch):
        self.on = False
        self.failures = 0
        real = RunFolder.update

        def update(folder, **fields):
            if self.on:
                self.failures += 1
                raise OSError(errno.ENOSPC, "No space left on device", str(folder.run_path))
            return real(folder, **fields)

        monkeypatch.setattr(RunFolder, "update", update)


@pytest.fixture()
def manager(tmp_path):
    jm = JobManager(tmp_path / "runs", [sys.executable, str(FAKE)], kill_grace=1.0, poll_interval=0.05)
    yield jm
    jm.shutdown()
    for run_id in jm.running():
        try:
            os.killpg(RunFolder(jm.runs_dir / run_id).info()["pgid"], signal.SIGKILL)
        except (KeyError, ProcessLookupError, TypeError):
            pass


def _tick_until(jm: JobManager, check, timeout: float = 20.0) -> None:
    deadline = time.time() + timeout
    while not check():
        assert time.time() < deadline, "timed out"
        jm.tick()
        time.sleep(0.05)


def test_failed_writes_lose_no_state_change_and_are_retried(manager, monkeypatch, caplog):
    disk = FullDisk(monkeypatch)
    first = manager.submit("train", {"fake_steps": 2, "fake_no_status": True})
    second = manager.submit("train", {"fake_steps": 1})
    manager.tick()
    assert manager.running() == [first] and manager.queue() == [second]
    # the disk fills up: the first run ends, but its outcome cannot be recorded yet; the queued run cannot start
    disk.on = True
    live = manager._live[first]
    live.proc.wait(20)
    with caplog.at_level(logging.WARNING, logger="app.jobs"):
        for _ in range(5):
            manager.tick()
    assert disk.failures >= 5
    assert manager.running() == [first]  # still watched: its end is not lost
    assert manager.queue() == [second]  # not dropped
    assert RunFolder(manager.runs_dir / second).status() == "queued"
    retries = [r.getMessage() for r in caplog.records if "could not write run.json" in r.getMessage()]
    assert len(retries) == 2 and all("No space left on device" in m for m in retries)  # one line per run, not tick
    assert not any(r.exc_info for r in caplog.records)
    # space comes back: the board recovers by itself on the next ticks
    disk.on = False
    _tick_until(manager, lambda: not manager.running() and not manager.queue())
    assert RunFolder(manager.runs_dir / first).info()["exit_code"] == 0
    assert RunFolder(manager.runs_dir / first).status() == "completed"
    assert RunFolder(manager.runs_dir / second).status() == "completed"
    assert manager.queue() == [] and manager.running() == []
    assert not list(manager.runs_dir.rglob("*.tmp"))


def test_a_run_killed_by_a_full_disk_ends_failed_with_the_free_space(manager):
    manager.start()
    run_id = manager.submit("train", {"fake_steps": 1, "fake_disk_full": True})
    assert manager.wait(run_id, 30) == "failed"
    error = RunFolder(manager.runs_dir / run_id).info()["error"]
    assert error.startswith(f"No space left on device: {manager.runs_dir / run_id}, free ")
    assert " MB" in error


def test_a_failed_cancel_keeps_the_run_queued(manager, monkeypatch):
    disk = FullDisk(monkeypatch)
    busy = manager.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    waiting = manager.submit("train", {"fake_steps": 1})
    manager.tick()
    disk.on = True
    with pytest.raises(JobError, match="No space left on device"):
        manager.abort(waiting)
    assert manager.queue() == [waiting]
    disk.on = False
    assert manager.abort(waiting) == "cancelled" and manager.queue() == []
    assert manager.abort(busy) == "stopping"
    _tick_until(manager, lambda: RunFolder(manager.runs_dir / busy).status() == "aborted")


def test_a_run_without_pid_started_is_watched_but_never_signalled(tmp_path):
    runs = tmp_path / "runs"
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        folder = RunFolder(runs / "20200101-000000-train-cli0")
        folder.create("train", "output_dir: x\n")
        folder.update(status="running", pid=sleeper.pid, pgid=sleeper.pid, started_at=time.time())  # no pid_started
        jm = JobManager(runs, [sys.executable, str(FAKE)], poll_interval=0.05)
        assert folder.id in jm.rediscover()["attached"]
        with pytest.raises(JobError, match="pid_started"):
            jm.abort(folder.id)
        time.sleep(0.3)
        assert sleeper.poll() is None  # the unrelated process was left alone
        sleeper.kill()
        sleeper.wait()
        _tick_until(jm, lambda: folder.status() == "failed")
    finally:
        sleeper.kill()


def test_a_reused_pid_is_not_attached(tmp_path):
    runs = tmp_path / "runs"
    folder = RunFolder(runs / "20200101-000000-train-old0")
    folder.create("train", "output_dir: x\n")
    # pid 1 is alive, but it started long before this run said its process did
    folder.update(status="running", pid=1, pgid=1, pid_started=time.time() - 5, started_at=time.time() - 5)
    jm = JobManager(runs, [sys.executable, str(FAKE)], poll_interval=0.05)
    assert folder.id in jm.rediscover()["failed"]
    assert folder.status() == "failed"


def test_engine_writes_pid_started_that_matches_its_process(manager):
    import psutil

    manager.start()
    run_id = manager.submit("train", {"fake_steps": 200, "fake_sleep": 0.05})
    folder = RunFolder(manager.runs_dir / run_id)
    deadline = time.time() + 20
    while not folder.info().get("pid_started") and time.time() < deadline:
        time.sleep(0.05)
    info = folder.info()
    assert abs(info["pid_started"] - psutil.Process(info["pid"]).create_time()) < 0.1
    assert manager.abort(run_id) == "stopping"
    assert manager.wait(run_id, 20) == "aborted"


@pytest.mark.parametrize("run_id", ["x" * 100_000, "a/b", "..", "\ud800bad", ""])
def test_bad_run_ids_give_a_short_clear_error(manager, run_id):
    with pytest.raises(JobError) as err:
        manager.folder(run_id)
    message = str(err.value)
    assert "run id" in message and len(message) < 300
    message.encode("utf-8")  # a lone surrogate is not echoed raw


def test_atomic_write_cleans_its_temp_file_on_a_full_disk(tmp_path, monkeypatch):
    folder = RunFolder(tmp_path / "run")
    folder.create("train", "output_dir: x\n")
    before = folder.run_path.read_text()
    fill_disk(monkeypatch, str(folder.path))
    with pytest.raises(OSError, match="No space left"):
        folder.update(status="running")
    monkeypatch.undo()
    assert folder.run_path.read_text() == before and json.loads(before)["status"] == "queued"
    assert sorted(p.name for p in folder.path.iterdir()) == ["config.yaml", "run.json"]


def test_submitting_on_a_full_disk_says_so_and_leaves_nothing(manager, monkeypatch):
    real = RunFolder.create

    def full(folder, *args, **kwargs):
        folder.path.mkdir(parents=True, exist_ok=True)
        (folder.path / "config.yaml").write_text("out")
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(RunFolder, "create", full)
    with pytest.raises(JobError, match=r"No space left on device: .*runs, free [\d,]+ MB.*then try again"):
        manager.submit("train", {"fake_steps": 1})
    assert list(manager.runs_dir.iterdir()) == [] and manager.queue() == []
    monkeypatch.setattr(RunFolder, "create", real)
    assert manager.submit("train", {"fake_steps": 1})


def test_the_train_tab_shows_a_full_disk_instead_of_crashing(board, monkeypatch):
    from app.tabs.train import start_run

    def full(*args, **kwargs):
        raise JobError("No space left on device: /ws/runs, free 0 MB. Free some space.")

    monkeypatch.setattr(board.jobs, "submit", full)
    mapping = {"model_name_or_path": "demo", "template": "chatml", "dataset": "demo_identity",
               "dataset_dir": str(Path(__file__).resolve().parents[2] / "examples" / "data")}
    message, run_id = start_run(board, mapping, "", "en")
    assert run_id is None and message.startswith("No space left on device")


def test_a_reattached_run_is_aborted_and_a_reused_pid_is_not(tmp_path):
    runs = tmp_path / "runs"
    first = JobManager(runs, [sys.executable, str(FAKE)], poll_interval=0.05, kill_grace=2.0).start()
    run_id = first.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    assert first.wait(run_id, 20, ("running",)) == "running"
    deadline = time.time() + 20
    while not RunFolder(runs / run_id).info().get("pid_started") and time.time() < deadline:
        time.sleep(0.05)
    first.shutdown()
    second = JobManager(runs, [sys.executable, str(FAKE)], poll_interval=0.05, kill_grace=2.0)
    assert run_id in second.rediscover()["attached"]
    second.start()
    try:
        assert second.abort(run_id) == "stopping"
        assert second.wait(run_id, 20) == "aborted"
    finally:
        second.shutdown()
    # a run whose recorded process is gone and whose pid now belongs to another process (pid 1)
    stale = RunFolder(runs / "20200101-000000-train-old1")
    stale.create("train", "output_dir: x\n")
    stale.update(status="running", pid=1, pgid=1, pid_started=time.time() - 5)
    assert second.abort(stale.id) == "finished" and stale.status() == "failed"


def test_damaged_run_files_do_not_keep_the_board_from_starting(tmp_path):
    """A run.json that is not UTF-8, not an object, or holds a pid or a creation time that is not one (damaged on
    disk, edited by hand; pid 1, init, was watched for ever and named in advice to run `kill -TERM -- -1`) raised UnicodeDecodeError, AttributeError, OverflowError or TypeError out of the job
    manager's start, so lf-board did not start at all."""
    runs = tmp_path / "runs"
    files = {
        "a-not-utf8": b"\xff\xfe[[",
        "b-a-list": b"[1, 2, 3]",
        "c-huge-pid": json.dumps({"kind": "train", "status": "running", "pid": 10**23, "created_at": 5}).encode(),
        "d-text-pid": json.dumps({"kind": "train", "status": "running", "pid": "abc", "pgid": -4}).encode(),
        "g-init": json.dumps({"kind": "chat", "status": "running", "pid": 1, "port": "abc"}).encode(),
        "e-text-time": json.dumps({"kind": "eval", "status": "completed", "created_at": "yesterday"}).encode(),
        "f-queued": json.dumps({"kind": "train", "status": "queued", "created_at": "soon"}).encode(),
    }
    for name, content in files.items():
        (runs / name).mkdir(parents=True)
        (runs / name / "run.json").write_bytes(content)
        (runs / name / "config.yaml").write_text("fake_steps: 1\n")
    manager = JobManager(runs, [sys.executable, str(FAKE)], poll_interval=0.05)
    manager.start()
    try:
        listed = {info["id"] for info in manager.list()}
        assert {"c-huge-pid", "d-text-pid", "e-text-time"} <= listed
        for name in ("c-huge-pid", "d-text-pid", "g-init"):  # a process that cannot be found: the run is lost, not signalled
            assert RunFolder(runs / name).status() == "failed"
            assert "pid" not in RunFolder(runs / name).info()
        assert manager.status("e-text-time")["status"] == "completed"
    finally:
        manager.shutdown()


@pytest.mark.parametrize("kind", ["link", "pipe"])
def test_a_queued_runs_log_that_is_a_link_or_a_pipe_is_replaced_not_written_through(manager, tmp_path, kind):
    """A run folder copied in from elsewhere (a workspace restored from another machine) can hold anything under
    stdout.log: the job's output was appended through a link to a file of the user's, and a named pipe held the
    board's tick (and so every run and page) until a reader came."""
    import os
    import threading

    from engine.runs import LOG_FILE

    run_id = manager.submit("train", {"fake_steps": 1})
    log = manager.runs_dir / run_id / LOG_FILE
    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    if kind == "link":
        log.symlink_to(mine)
    else:
        os.mkfifo(log)
    ticked = []
    ticker = threading.Thread(target=lambda: ticked.append(manager.tick()), daemon=True)
    ticker.start()
    ticker.join(20)
    if not ticked:
        os.close(os.open(log, os.O_RDONLY | os.O_NONBLOCK))  # let the blocked opener go
    assert ticked, "the tick waited on the pipe"
    assert manager.wait(run_id, 30) == "completed"
    assert mine.read_text() == "keep me\n" and log.is_file() and not log.is_symlink()
