"""The job manager with a fake engine: queue order, logs to a file, abort, SIGKILL escalation, rediscovery."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app.jobs import JobError, JobManager
from engine.runs import RunFolder

FAKE = Path(__file__).with_name("fake_engine.py")


@pytest.fixture()
def manager(tmp_path):
    jm = JobManager(tmp_path / "runs", [sys.executable, str(FAKE)], kill_grace=1.0, poll_interval=0.05)
    jm.start()
    yield jm
    jm.shutdown()
    for run_id in jm.running():
        try:
            os.killpg(RunFolder(jm.runs_dir / run_id).info()["pgid"], signal.SIGKILL)
        except (KeyError, ProcessLookupError, TypeError):
            pass


def test_run_completes_with_folder_contract(manager):
    run_id = manager.submit("train", {"fake_steps": 3, "model_name_or_path": "demo"})
    assert manager.wait(run_id, 30) == "completed"
    folder = RunFolder(manager.runs_dir / run_id)
    info = folder.info()
    assert info["kind"] == "train" and info["exit_code"] == 0 and info["pid"] > 0
    assert info["command"][-2:] == ["train", str(folder.config_path)]
    cfg = folder.config_path.read_text()
    assert f"output_dir: {folder.path}" in cfg and "model_name_or_path: demo" in cfg
    assert "step 3/3" in folder.log_path.read_text()  # the child's stdout went straight to the file
    status = manager.status(run_id)
    assert status["status"] == "completed" and status["step"] == 3 and status["total"] == 3
    assert status["loss"] == pytest.approx(2.0 / 3)
    mon = manager.monitor(run_id)
    assert [s for s, _ in mon.curves()["loss"]] == [1, 2, 3]
    assert mon.curves()["eval_loss"] == [(3, 0.5)]


def test_queue_runs_in_order_one_at_a_time(manager):
    first = manager.submit("train", {"fake_steps": 20, "fake_sleep": 0.05})
    second = manager.submit("eval", {"fake_steps": 1})
    third = manager.submit("export", {"fake_steps": 1})
    assert manager.wait(first, 60, ("running",)) == "running"
    assert RunFolder(manager.runs_dir / second).status() == "queued"
    assert manager.queue_position(second) == 1 and manager.queue_position(third) == 2
    assert manager.abort(third) == "cancelled"
    assert RunFolder(manager.runs_dir / third).status() == "aborted"
    assert manager.wait(first, 30) == "completed"
    assert manager.wait(second, 30) == "completed"
    assert (
        RunFolder(manager.runs_dir / second).info()["started_at"]
        >= RunFolder(manager.runs_dir / first).info()["finished_at"] - 0.5
    )
    assert RunFolder(manager.runs_dir / second).info()["command"][-2:] == [
        "eval",
        str(manager.runs_dir / second / "config.yaml"),
    ]


def test_chat_servers_skip_the_queue(manager):
    busy = manager.submit("train", {"fake_steps": 4000, "fake_sleep": 0.05})
    assert manager.wait(busy, 60, ("running",)) == "running"
    chat = manager.submit("chat", {"fake_steps": 4000, "fake_sleep": 0.05}, args=["--host", "127.0.0.1", "--port", "0"])
    assert manager.wait(chat, 60, ("running",)) == "running"
    info = RunFolder(manager.runs_dir / chat).info()
    assert info["command"][-6:] == [
        "api",
        str(manager.runs_dir / chat / "config.yaml"),
        "--host",
        "127.0.0.1",
        "--port",
        "0",
    ]
    assert manager.abort(chat) == "stopping"
    assert manager.abort(busy) == "stopping"
    assert manager.wait(chat, 60) == "aborted"
    assert manager.wait(busy, 60) == "aborted"


def test_abort_sends_sigterm_and_engine_reports_aborted(manager):
    run_id = manager.submit("train", {"fake_steps": 4000, "fake_sleep": 0.02})
    mon = None
    deadline = time.time() + 60
    while time.time() < deadline:
        mon = manager.monitor(run_id)
        if mon.loss:
            break
        time.sleep(0.05)
    assert mon is not None and mon.loss
    assert manager.abort(run_id) == "stopping"
    assert manager.wait(run_id, 60) == "aborted"
    assert manager.monitor(run_id).checkpoints  # the engine saved on SIGTERM
    assert manager.abort(run_id) == "finished"


def test_abort_escalates_to_sigkill(manager):
    run_id = manager.submit("train", {"fake_steps": 500, "fake_sleep": 0.02, "fake_ignore_term": True})
    assert manager.wait(run_id, 60, ("running",)) == "running"
    # "running" is written at spawn; abort only once the engine is up (it ignores SIGTERM from then on), or a
    # slow start on a busy machine dies of the SIGTERM itself
    events = manager.runs_dir / run_id / "events.jsonl"
    deadline = time.time() + 30
    while '"start"' not in (events.read_text() if events.exists() else "") and time.time() < deadline:
        time.sleep(0.05)
    manager.abort(run_id)
    assert manager.wait(run_id, 60) == "aborted"
    info = RunFolder(manager.runs_dir / run_id).info()
    assert info["exit_code"] == -signal.SIGKILL


def test_failure_keeps_the_error_lines(manager):
    failed = manager.submit("train", {"fake_steps": 1, "fake_fail": True})
    silent = manager.submit("train", {"fake_steps": 1, "fake_silent_exit": True})
    assert manager.wait(failed, 20) == "failed"
    assert manager.wait(silent, 20) == "failed"
    assert "told to fail" in manager.status(failed)["error"]
    err = manager.status(silent)["error"]
    assert "exited with code 3" in err and "something went badly wrong" in err


def test_an_exit_0_that_recorded_nothing_is_a_failure(manager):
    """A reward calling os._exit(0) mid-run had been shown as completed: the engine records every end it reaches,
    so an exit 0 without a record (and without the engine saying it could not write one) is not a completion."""
    run_id = manager.submit("train", {"fake_steps": 1, "fake_os_exit": True})
    assert manager.wait(run_id, 20) == "failed"
    assert "exited (code 0) without recording how the run ended" in manager.status(run_id)["error"]


def test_unknown_and_bad_ids(manager):
    with pytest.raises(JobError, match="no run"):
        manager.status("nope")
    with pytest.raises(JobError, match="not a run id"):
        manager.abort("../etc")
    with pytest.raises(JobError, match="Unknown job kind"):
        manager.submit("dance", {})


def test_delete_refuses_live_runs(manager):
    run_id = manager.submit("train", {"fake_steps": 4000, "fake_sleep": 0.05})
    manager.wait(run_id, 60, ("running",))
    with pytest.raises(JobError, match="abort it"):
        manager.delete(run_id)
    manager.abort(run_id)
    manager.wait(run_id, 60)
    manager.delete(run_id)
    assert not (manager.runs_dir / run_id).exists()


def test_delete_takes_a_run_that_just_finished(tmp_path):
    """A run whose outcome is written but whose process no tick has reaped yet (slow polling, a busy machine) is
    finished for the user: deleting it works at once instead of asking to abort a finished run."""
    jm = JobManager(tmp_path / "runs", [sys.executable, str(FAKE)], poll_interval=3600).start()
    try:
        run_id = jm.submit("train", {"fake_steps": 1})
        assert jm.wait(run_id, 30) == "completed"
        assert run_id in jm.running()  # not reaped: the next tick is an hour away
        jm.delete(run_id)
        assert not (jm.runs_dir / run_id).exists()
    finally:
        jm.shutdown()


def test_a_folder_deleted_by_hand_before_its_process_was_reaped_is_forgotten_not_brought_back(tmp_path, caplog):
    """``rm -rf`` of a run whose outcome is written but whose process no tick has reaped yet: the next tick drops
    it instead of writing an outcome into a re-created folder of one run.json (a ghost run in History) and keeping
    it live for good (a test's teardown then aborted a run with no folder)."""
    import shutil

    jm = JobManager(tmp_path / "runs", [sys.executable, str(FAKE)], poll_interval=3600).start()
    try:
        run_id = jm.submit("train", {"fake_steps": 1})
        assert jm.wait(run_id, 30) == "completed"
        assert run_id in jm.running()  # not reaped: the next tick is an hour away
        shutil.rmtree(jm.runs_dir / run_id)
        deadline = time.time() + 20
        while run_id in jm.running() and time.time() < deadline:
            jm.tick()
            time.sleep(0.05)
        assert run_id not in jm.running()
        assert not (jm.runs_dir / run_id).exists()
        assert "its folder was deleted" in caplog.text
    finally:
        jm.shutdown()


def test_rediscovery_after_restart(tmp_path):
    runs = tmp_path / "runs"
    cmd = [sys.executable, str(FAKE)]
    first = JobManager(runs, cmd, poll_interval=0.05).start()
    live = first.submit("train", {"fake_steps": 60, "fake_sleep": 0.05})
    waiting = first.submit("train", {"fake_steps": 1})
    assert first.wait(live, 60, ("running",)) == "running"
    first.shutdown()  # the board dies; the child keeps running in its own session

    # a run that claims to be running but whose process is gone
    dead = RunFolder(runs / "20200101-000000-train-dead")
    dead.create("train", "output_dir: x\n")
    dead.update(status="running", pid=2**22 + 7, pgid=2**22 + 7, started_at=time.time() - 5)
    dead.log_path.write_text("loading...\nRuntimeError: out of memory\n")

    second = JobManager(runs, cmd, poll_interval=0.05)
    found = second.rediscover()
    assert live in found["attached"] and waiting in found["queued"] and dead.id in found["failed"]
    info = dead.info()
    assert info["status"] == "failed" and "out of memory" in info["error"]
    second.start()
    try:
        assert second.queue() == [waiting]
        assert second.wait(live, 30) == "completed"
        assert second.wait(waiting, 30) == "completed"
    finally:
        second.shutdown()


def test_a_queued_run_whose_secret_died_with_the_board_fails_with_the_fix_instead_of_starting_without_it(tmp_path):
    runs, cmd = tmp_path / "runs", [sys.executable, str(FAKE)]
    first = JobManager(runs, cmd, poll_interval=0.05)  # never started: both runs stay queued
    secret = first.submit("train", {"fake_steps": 1}, env={"LF_TEST_SECRET_TOKEN": "hf_abc123"})
    plain = first.submit("train", {"fake_steps": 1})
    info = RunFolder(runs / secret).info()
    assert info["secret_env"] == ["LF_TEST_SECRET_TOKEN"] and "hf_abc123" not in json.dumps(info)
    first.shutdown()

    found = JobManager(runs, cmd, poll_interval=0.05).rediscover()
    assert found["failed"] == [secret] and found["queued"] == [plain]
    info = RunFolder(runs / secret).info()
    assert info["status"] == "failed" and "(LF_TEST_SECRET_TOKEN) was kept only in that board's memory" in info["error"]
    assert "Submit it again" in info["error"] and info["error_params"] == {"secrets": ["LF_TEST_SECRET_TOKEN"]}


def test_child_gets_repo_on_pythonpath(tmp_path):
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, os, sys, yaml\n"
        "cfg = yaml.safe_load(open(sys.argv[2]))\n"
        "import engine.runs\n"
        "open(os.path.join(cfg['output_dir'], 'probe.json'), 'w').write(json.dumps(os.environ['PYTHONPATH']))\n"
    )
    jm = JobManager(tmp_path / "runs", [sys.executable, str(script)], poll_interval=0.05, cwd=tmp_path).start()
    try:
        run_id = jm.submit("train", {})
        assert jm.wait(run_id, 20) == "failed"  # exit code 0 without a final status: it did not finish a run
        path = json.loads((jm.runs_dir / run_id / "probe.json").read_text())
        assert str(Path(__file__).resolve().parents[2]) in path.split(os.pathsep)
    finally:
        jm.shutdown()


def test_a_job_never_gets_the_boards_login(tmp_path, monkeypatch):
    """LF_BOARD_AUTH (the board's USER:PASS) reached every job's environment: reward code, a model's remote code or a
    tracker that uploads the environment could have read the board's password. Other variables (a hub token) still
    reach the job."""
    monkeypatch.setenv("LF_BOARD_AUTH", "alice:board-password-123")
    monkeypatch.setenv("HF_TOKEN", "hf_stillNeededByTheJob123")
    script = tmp_path / "probe.py"
    script.write_text(
        "import json, os, sys, yaml\n"
        "cfg = yaml.safe_load(open(sys.argv[2]))\n"
        "open(os.path.join(cfg['output_dir'], 'probe.json'), 'w').write(json.dumps(dict(os.environ)))\n"
    )
    jm = JobManager(tmp_path / "runs", [sys.executable, str(script)], poll_interval=0.05, cwd=tmp_path).start()
    try:
        run_id = jm.submit("train", {})
        jm.wait(run_id, 20)
        env = json.loads((jm.runs_dir / run_id / "probe.json").read_text())
        assert "LF_BOARD_AUTH" not in env and "board-password-123" not in json.dumps(env)
        assert env["HF_TOKEN"] == "hf_stillNeededByTheJob123"
    finally:
        jm.shutdown()


def test_board_process_does_not_hold_log_pipes(manager):
    run_id = manager.submit("train", {"fake_steps": 4000, "fake_sleep": 0.02})
    manager.wait(run_id, 60, ("running",))
    deadline = time.time() + 60
    while "pid" not in RunFolder(manager.runs_dir / run_id).info() and time.time() < deadline:
        time.sleep(0.02)
    pid = RunFolder(manager.runs_dir / run_id).info()["pid"]
    out = subprocess.run(["ls", "-l", f"/proc/{pid}/fd/1"], capture_output=True, text=True).stdout
    assert "stdout.log" in out
    manager.abort(run_id)
    manager.wait(run_id, 60)


def test_two_submits_of_one_pre_chosen_id_get_a_folder_each(tmp_path):
    """Start's handlers run side by side (gradio's concurrency 4): a double click submits the page's one pending
    run id twice at once. The folder was checked for, then made, so both could take it and the run was queued twice
    into one folder (90 of 200 tries here). Now each submit makes its own folder with one mkdir."""
    import threading

    jobs = JobManager(tmp_path / "runs", [sys.executable, "-c", "pass"])  # not started: nothing launches
    for _ in range(40):
        pending = jobs.new_run_id("train")
        got: list[str] = []
        both = threading.Barrier(2)

        def submit(pending=pending, got=got, both=both):
            both.wait()
            got.append(jobs.submit("train", {"stage": "sft"}, run_id=pending))

        threads = [threading.Thread(target=submit) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert len(set(got)) == 2 and pending in got
    assert len(jobs.queue()) == len(set(jobs.queue())) == 80
    assert all(RunFolder(tmp_path / "runs" / run_id).status() == "queued" for run_id in jobs.queue())
