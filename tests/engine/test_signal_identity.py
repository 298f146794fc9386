"""An abort signals only processes that show they are the run's: a rank record or run.json written by someone else
(a second user of a shared workspace) that names another of the user's processes, with its real start time and any
process group, is refused with a warning instead of signalling that group."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine import run_identity
from engine.ranks import RANKS_DIR, live_ranks, signal_ranks
from engine.runs import process_start_time, signal_run

REPO = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")


def _start(args: list[str], **env: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True, start_new_session=True,
                            env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert proc.stdout.readline().strip() == "ready"
    return proc


def _foreign() -> subprocess.Popen:
    """Another of the user's processes (an editor, a shell): nothing of the run's."""
    return _start(["-c", "import time; print('ready', flush=True); time.sleep(60)"])


def _rank(run: Path) -> subprocess.Popen:
    """A rank of the run as torchrun starts one (a session of its own), which records itself."""
    code = ("import time, sys\nfrom engine.ranks import record_rank\n"
            f"assert record_rank({str(run)!r})\nprint('ready', flush=True)\ntime.sleep(60)\n")
    return _start(["-c", code], WORLD_SIZE="2", RANK="1", LOCAL_RANK="1")


def _record(run: Path, rank: int, pid: int, pgid: int) -> None:
    (run / RANKS_DIR).mkdir(parents=True, exist_ok=True)
    (run / RANKS_DIR / f"{rank}.json").write_text(json.dumps({
        "rank": rank, "local_rank": rank, "pid": pid, "pgid": pgid, "host": socket.gethostname(),
        "started": process_start_time(pid)}))


def _stop(*procs: subprocess.Popen) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)


def test_a_crafted_rank_record_naming_another_process_signals_nothing(tmp_path, caplog):
    run = tmp_path / "run"
    run.mkdir()
    victim = _foreign()
    try:
        _record(run, 1, victim.pid, os.getpgid(victim.pid))  # host, pid, group and start time all match
        with caplog.at_level(logging.WARNING):
            assert signal_ranks(run, signal.SIGTERM) == 0
        assert live_ranks(run) == []
        time.sleep(0.2)
        assert victim.poll() is None, "the crafted record's process was signalled"
        assert f"names process {victim.pid}, which is not one of the run's" in caplog.text
    finally:
        _stop(victim)


def test_a_real_rank_is_signalled_but_not_with_another_group(tmp_path, caplog):
    run = tmp_path / "run"
    run.mkdir()
    rank, victim = _rank(run), _foreign()
    try:
        assert live_ranks(run) == [rank.pid]
        recorded = json.loads((run / RANKS_DIR / "1.json").read_text())
        _record(run, 1, rank.pid, os.getpgid(victim.pid))  # the rank's pid, someone else's process group
        with caplog.at_level(logging.WARNING):
            assert signal_ranks(run, signal.SIGTERM) == 0
        assert "but that process is in group" in caplog.text
        assert victim.poll() is None and rank.poll() is None
        (run / RANKS_DIR / "1.json").write_text(json.dumps(recorded))
        assert signal_ranks(run, signal.SIGTERM) == 1
        assert rank.wait(timeout=10) == -signal.SIGTERM
        assert victim.poll() is None
    finally:
        _stop(rank, victim)


def test_run_json_naming_another_process_is_refused_and_the_runs_own_is_signalled(tmp_path, caplog):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("stage: sft\n")
    victim = _foreign()
    # the board starts a job (and torchrun) with the run folder's config.yaml on its command line
    own = _start(["-c", "import time; print('ready', flush=True); time.sleep(60)", str(run / "config.yaml")])
    try:
        for proc in (victim, own):
            assert process_start_time(proc.pid) is not None
        crafted = {"pid": victim.pid, "pgid": victim.pid, "pid_started": process_start_time(victim.pid)}
        with caplog.at_level(logging.WARNING):
            assert not signal_run(crafted, signal.SIGTERM, run_dir=run)
        assert "which is not one of the run's" in caplog.text
        time.sleep(0.2)
        assert victim.poll() is None
        info = {"pid": own.pid, "pgid": own.pid, "pid_started": process_start_time(own.pid)}
        assert not signal_run(info | {"pgid": victim.pid}, signal.SIGTERM, verified=True, run_dir=run)
        assert victim.poll() is None and own.poll() is None
        assert signal_run(info, signal.SIGTERM, run_dir=run)
        assert own.wait(timeout=10) == -signal.SIGTERM
        assert victim.poll() is None
    finally:
        _stop(victim, own)


def test_without_proc_the_command_line_decides_through_psutil(tmp_path, monkeypatch):
    pytest.importorskip("psutil")
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.yaml").write_text("stage: sft\n")
    victim = _foreign()
    own = _start(["-c", "import time; print('ready', flush=True); time.sleep(60)", "config.yaml"], )
    try:
        monkeypatch.setattr(run_identity, "PROC", tmp_path / "no-proc")
        assert not run_identity.belongs_to_run(victim.pid, run)
        assert not run_identity.belongs_to_run(own.pid, run)  # a relative name, from the process's own folder
    finally:
        _stop(victim, own)
    own = subprocess.Popen([sys.executable, "-c", "import time; print('ready', flush=True); time.sleep(60)",
                            "config.yaml"], cwd=run, stdout=subprocess.PIPE, text=True)
    try:
        assert own.stdout.readline().strip() == "ready"
        assert run_identity.belongs_to_run(own.pid, run)
    finally:
        _stop(own)


def test_the_boards_own_child_is_its_own_group_whatever_run_json_says(tmp_path):
    from app.job_process import _Live
    from app.jobs import _abort_target
    from engine.runs import RunFolder

    folder = RunFolder(tmp_path / "r1")
    folder.create("train", "stage: sft\n")
    folder.update(pid=4242, pgid=1234)
    child = _foreign()
    try:
        assert _abort_target(folder, _Live("r1", child.pid, proc=child))["pgid"] == child.pid
        assert _abort_target(folder, _Live("r1", 4242))["pgid"] == 1234  # re-attached: run.json's, checked later
    finally:
        _stop(child)
