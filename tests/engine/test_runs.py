"""The run-folder contract: atomic run.json, incremental readers, process-group signalling."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.runs import (
    EventReader,
    EventWriter,
    RunFolder,
    TextFollower,
    list_runs,
    pid_alive,
    process_start_time,
    signal_run,
)


def test_create_update_and_list(tmp_path):
    run = RunFolder(tmp_path / "r1")
    info = run.create("train", "stage: sft\n", command=["python", "-m", "engine", "train"])
    assert info["status"] == "queued" and info["kind"] == "train" and "torch" in info["versions"]
    run.update(status="running", pid=123)
    assert run.info()["status"] == "running" and run.info()["pid"] == 123
    assert run.config_path.read_text() == "stage: sft\n"
    time.sleep(0.01)
    RunFolder(tmp_path / "r2").create("export", "")
    assert [r.id for r in list_runs(tmp_path)] == ["r2", "r1"]


def test_event_reader_is_incremental_and_waits_for_whole_lines(tmp_path):
    path = tmp_path / "events.jsonl"
    writer, reader = EventWriter(path), EventReader(path)
    assert reader.read_new() == []
    writer.write({"event": "log", "step": 1})
    writer.write({"event": "log", "step": 2})
    assert [e["step"] for e in reader.read_new()] == [1, 2]
    with open(path, "a") as fh:
        fh.write(json.dumps({"event": "log", "step": 3})[:10])
    assert reader.read_new() == []  # partial line kept for later
    with open(path, "a") as fh:
        fh.write(json.dumps({"event": "log", "step": 3})[10:] + "\n")
    assert [e["step"] for e in reader.read_new()] == [3]


def test_text_follower(tmp_path):
    path = tmp_path / "stdout.log"
    follower = TextFollower(path)
    path.write_text("a\n")
    assert follower.read_new() == "a\n"
    with open(path, "a") as fh:
        fh.write("b\n")
    assert follower.read_new() == "b\n"


def test_signal_reaches_the_process_group():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
    try:
        assert pid_alive(proc.pid)
        info = {"pid": proc.pid, "pgid": os.getpgid(proc.pid)}
        assert not signal_run(info, signal.SIGTERM)  # no pid_started: never signalled
        assert not signal_run(info | {"pid_started": process_start_time(proc.pid) - 3600}, signal.SIGTERM)  # re-used
        assert proc.poll() is None
        assert signal_run(info | {"pid_started": process_start_time(proc.pid)}, signal.SIGTERM)
        proc.wait(timeout=10)
        assert proc.returncode == -signal.SIGTERM
        assert not pid_alive(proc.pid)
    finally:
        proc.kill()


def test_a_rank_is_told_when_its_launcher_dies_of_a_sigkill(tmp_path):
    """torchrun cannot forward a SIGKILL: its ranks had gone on training as orphans. A rank asks Linux for a SIGTERM
    when its parent dies (engine.ranks.signal_when_parent_dies), which its job turns into a checkpoint and stop."""
    if not sys.platform.startswith("linux"):
        pytest.skip("PR_SET_PDEATHSIG is Linux's")
    flag = tmp_path / "got-sigterm"
    child = (f"import signal, sys, time; sys.path.insert(0, {str(Path(__file__).resolve().parents[2])!r})\n"
             "from engine.ranks import signal_when_parent_dies\n"
             f"signal.signal(signal.SIGTERM, lambda *a: (open({str(flag)!r}, 'w').close(), sys.exit(0)))\n"
             "assert signal_when_parent_dies()\n"
             "print('ready', flush=True); time.sleep(60)\n")
    launcher = ("import subprocess, sys, time\n"
                f"p = subprocess.Popen([sys.executable, '-c', {child!r}], stdout=subprocess.PIPE, text=True)\n"
                "print(p.pid, p.stdout.readline().strip(), flush=True); time.sleep(60)\n")
    parent = subprocess.Popen([sys.executable, "-c", launcher], stdout=subprocess.PIPE, text=True)
    pid, ready = parent.stdout.readline().split()
    assert ready == "ready"
    parent.kill()
    parent.wait()
    deadline = time.time() + 60
    while time.time() < deadline and not flag.exists():
        time.sleep(0.05)
    assert flag.exists(), "the orphaned child was not told"


def test_a_resume_forgets_the_lines_of_the_steps_it_repeats(tmp_path):
    from engine.resumed_events import forget_steps_after

    lines = [{"event": "start"}, {"event": "log", "step": 2}, {"event": "log", "step": 3}, {"event": "save", "step": 4},
             {"event": "end", "status": "aborted"}]
    (tmp_path / "events.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines) + "not json\n")
    (tmp_path / "completions.jsonl").write_text(json.dumps({"step": 3, "completion": "x"}) + "\n")
    assert forget_steps_after(tmp_path, 2) == 3
    kept = (tmp_path / "events.jsonl").read_text().splitlines()
    assert [json.loads(x).get("step") for x in kept[:-1]] == [None, 2, None] and kept[-1] == "not json"
    assert (tmp_path / "completions.jsonl").read_text() == ""
    assert forget_steps_after(tmp_path / "nowhere", 2) == 0


def test_a_resume_forgets_its_repeated_steps_past_lines_that_are_damaged(tmp_path):
    """A line torn mid-character by a killed run (not UTF-8) made the whole file unread, so the resumed run's curve
    showed the repeated steps twice; a step of 1e400 (OverflowError) or a line nested past json's depth
    (RecursionError) stopped the resume itself. Such lines are kept byte for byte, the later steps dropped."""
    from engine.resumed_events import forget_steps_after

    torn = b'{"event": "log", "step": 1, "note": "\xe4\xb8'
    deep = b"[" * 100_000 + b"]" * 100_000
    lines = [b'{"event": "log", "step": 1}', torn, b'{"event": "log", "step": 1e400}', deep,
             b'{"event": "log", "step": 3}']
    (tmp_path / "events.jsonl").write_bytes(b"\n".join(lines) + b"\n")
    assert forget_steps_after(tmp_path, 2) == 1
    assert (tmp_path / "events.jsonl").read_bytes() == b"\n".join(lines[:-1]) + b"\n"



def test_an_atomic_write_never_follows_a_link_put_under_its_temp_name_after_making_it(tmp_path, monkeypatch):
    """write_text_atomic made its temp file without following a link, closed it, then opened it again by name to
    write: a link put under that name in between was followed, and the text written into the file it pointed to."""
    from engine.runs import write_text_atomic

    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    target = tmp_path / "state.json"
    real_open = os.open

    def swapped_once_made(path, flags, *args):  # the temp file, made, is swapped for a link at once
        fd = real_open(path, flags, *args)
        if str(path).endswith(".tmp") and flags & os.O_CREAT:
            os.unlink(path)
            os.symlink(mine, path)
        return fd

    monkeypatch.setattr(os, "open", swapped_once_made)
    write_text_atomic(target, "new text")
    monkeypatch.undo()
    assert mine.read_text() == "keep me\n"


def test_an_atomic_write_of_a_large_text_holds_no_copy_of_it(tmp_path):
    """A large file (a predictions file of tens of MB, loss.png) is written as it is given, not gathered into a
    buffer and copied again; short pieces (a resume's lines) come out joined, in order."""
    from engine.atomic_write import write_atomic, write_text_atomic
    from tests.peak_memory import traced_peak

    big = b"z" * (40 << 20)
    _, peak = traced_peak(lambda: write_text_atomic(tmp_path / "big", big))
    assert peak < 4 << 20, f"{peak:,} bytes held"
    assert (tmp_path / "big").stat().st_size == len(big)
    pieces = [b"a" * n for n in (0, 5, 1 << 20, 3, (1 << 20) - 1, 2, 5 << 20, 7)]
    write_atomic(tmp_path / "joined", iter(pieces))
    assert (tmp_path / "joined").read_bytes() == b"".join(pieces)

def test_a_resume_on_a_full_disk_keeps_the_events_whole(tmp_path, monkeypatch):
    """The events rewritten without the repeated steps go to a temp file renamed over the old one: a full disk
    half way leaves the old file as it was, and no temp file."""
    from engine.resumed_events import forget_steps_after
    from tests.full_disk import fill_disk

    events = tmp_path / "events.jsonl"
    events.write_text("".join(json.dumps({"event": "log", "step": s, "note": "x" * 300}) + "\n" for s in range(9)))
    before = events.read_bytes()
    fill_disk(monkeypatch, str(tmp_path / ".events.jsonl"))
    assert forget_steps_after(tmp_path, 2) == 0  # logged as a warning; the run goes on
    monkeypatch.undo()
    assert events.read_bytes() == before and [p.name for p in tmp_path.iterdir()] == ["events.jsonl"]


def test_rank_records_that_are_no_object_are_passed_over(tmp_path):
    """An abort reads ranks/*.json to reach every rank: a record that is a list raised AttributeError, a rank
    that is text TypeError, one nested past json's depth RecursionError."""
    from engine.ranks import RANKS_DIR, read_ranks

    ranks = tmp_path / RANKS_DIR
    ranks.mkdir()
    (ranks / "0.json").write_text(json.dumps({"rank": 0, "pid": 11}))
    (ranks / "1.json").write_text(json.dumps({"rank": "one", "pid": 12}))
    (ranks / "2.json").write_text("[2]")
    (ranks / "3.json").write_text("[" * 100_000 + "]" * 100_000)
    assert [r["pid"] for r in read_ranks(tmp_path)] == [11, 12]
