"""One live job per run folder: two jobs started together on one output_dir, and a lock that a killed job leaves."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# A job that enters its run folder when told to. Its live-run check is slowed by a second, as a loaded machine slows
# it: two such jobs both read the folder before either has recorded itself in it. It says READY once imported, waits
# for a line on stdin ("go"), and then, if it got in, holds the folder until a second line (or the end of stdin).
JOB = """
import sys, time
from engine import lifecycle
from engine.errors import UserError
from engine.train import output_dir

real = output_dir.live_run_problem
def slow(folder):
    found = real(folder)
    time.sleep(1.0)
    return found
output_dir.live_run_problem = slow
print("READY", flush=True)
sys.stdin.readline()
try:
    with lifecycle.JobContext(sys.argv[1], "train", "stage: sft\\n", fresh=True):
        print("ENTERED", flush=True)
        sys.stdin.readline()
except UserError as err:
    print("REFUSED", err, flush=True)
"""


def _start(folder: Path) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": "0"}
    return subprocess.Popen([sys.executable, "-c", JOB, str(folder)], cwd=REPO, env=env, stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _go(*jobs: subprocess.Popen) -> None:
    """Once every job has imported (said READY), tell them all to enter."""
    for job in jobs:
        assert job.stdout.readline().strip() == "READY", job.communicate(timeout=60)
    for job in jobs:
        job.stdin.write("go\n")
        job.stdin.flush()


def test_two_jobs_started_together_on_one_folder_one_is_refused_naming_the_other(tmp_path):
    folder = tmp_path / "run"
    jobs = [_start(folder) for _ in range(2)]
    _go(*jobs)  # both imported: they enter at the same instant
    said = [job.stdout.readline().strip() for job in jobs]  # the winner holds the folder until both have spoken
    outs = [job.communicate(timeout=120) for job in jobs]
    assert sorted(s.split()[0] for s in said if s) == ["ENTERED", "REFUSED"], (said, outs)
    refused = next(s for s in said if s.startswith("REFUSED"))
    winner = next(job for job, s in zip(jobs, said) if s.startswith("ENTERED"))
    assert "is the output folder of a run that is still going" in refused
    assert f"`run`, process {winner.pid}" in refused and "choose another output_dir" in refused
    assert json.loads((folder / "run.json").read_text())["pid"] == winner.pid  # the refused one wrote nothing


def test_a_killed_job_leaves_the_folder_free(tmp_path):
    folder = tmp_path / "run"
    first = _start(folder)
    try:
        _go(first)
        assert first.stdout.readline().strip() == "ENTERED"
        os.kill(first.pid, signal.SIGKILL)  # no handler runs: the kernel drops the lock with the process
        first.wait(timeout=30)
    finally:
        first.kill()
    second = _start(folder)
    _go(second)
    out, err = second.communicate(timeout=120)
    assert out.strip() == "ENTERED", err[-2000:]


def test_a_lock_file_that_is_not_a_plain_file_is_named(tmp_path):
    from engine.errors import UserError
    from engine.lifecycle import JobContext

    folder = tmp_path / "run"
    folder.mkdir()
    os.mkfifo(folder / ".run.lock")
    try:
        with JobContext(folder, "train", "stage: sft\n", fresh=True):
            raise AssertionError("entered")
    except UserError as err:
        assert ".run.lock is not a plain file" in str(err) and "remove it" in str(err)
    (folder / ".run.lock").unlink()
    (folder / ".run.lock").symlink_to(tmp_path / "elsewhere")
    try:
        with JobContext(folder, "train", "stage: sft\n", fresh=True):
            raise AssertionError("entered")
    except UserError as err:
        assert "cannot be opened" in str(err) and "must be a plain file" in str(err)
    assert not (tmp_path / "elsewhere").exists()


def test_a_holder_that_has_not_yet_written_who_it_is_is_waited_for_briefly(tmp_path):
    """Two jobs started at the same instant: the loser may read the lock file before the winner has written its id
    and pid (CI, busy: the message then named no one); it asks again for a moment."""
    import threading

    from engine import run_lock

    path = tmp_path / ".run.lock"
    path.write_bytes(b"")
    fd = os.open(path, os.O_RDWR)
    try:
        late = threading.Timer(0.3, lambda: path.write_text(json.dumps({"pid": 4242, "id": "winner"})))
        late.start()
        assert run_lock._holder(fd) == "`winner`, process 4242"
        late.join()
        path.write_bytes(b"")
        assert run_lock._holder(fd, wait=0.1) == "it has only just started"
    finally:
        os.close(fd)


def test_a_lock_file_that_says_no_holder_json_can_give_is_not_a_traceback(tmp_path):
    """What the lock file says is read for the refusal's message only: a pid of Infinity (OverflowError) or a nesting
    past json's depth (RecursionError) in it ended the second job with a traceback instead of the refusal."""
    from engine import run_lock

    path = tmp_path / ".run.lock"
    fd = os.open(path, os.O_RDWR | os.O_CREAT)
    try:
        for text in ('{"id": "x", "pid": Infinity}', "[" * 3000 + "]" * 3000):
            os.ftruncate(fd, 0)
            os.pwrite(fd, text.encode(), 0)
            assert run_lock._holder(fd, wait=0.1) == "it has only just started"
    finally:
        os.close(fd)
