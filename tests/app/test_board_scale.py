"""A workspace with many finished runs: run.json parsed once per version, History without a monitor per run."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

from app import monitor
from app.tabs import runs
from engine import runs as engine_runs

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "benchmark"))
from fake_runs import make_finished_runs  # noqa: E402


def test_run_json_is_parsed_once_per_version(tmp_path, monkeypatch):
    folder = engine_runs.RunFolder(tmp_path / "r1")
    folder.update(status="running", kind="train")
    parses = []
    real = engine_runs.read_json
    monkeypatch.setattr(engine_runs, "read_json", lambda path: parses.append(path) or real(path))
    first = folder.info()
    first["status"] = "changed by a caller"  # a private copy: the cache is not touched
    assert folder.info()["status"] == "running"
    assert len(parses) == 1
    folder.update(status="completed")  # an atomic replace: a new version
    assert folder.info()["status"] == "completed"
    assert len(parses) == 2  # update() used the cached copy; the new version was parsed once
    os.remove(folder.run_path)
    assert folder.info() == {}
    assert str(folder.run_path) not in engine_runs._JSON_CACHE


def test_final_loss_reads_the_tail_and_remembers_it(tmp_path, monkeypatch):
    make_finished_runs(tmp_path, 1, steps=2000)  # events.jsonl larger than the tail window
    folder = tmp_path / "bench-00000"
    assert (folder / "events.jsonl").stat().st_size > monitor.TAIL_BYTES
    assert monitor.final_loss(folder) == 1.0
    monkeypatch.setattr(monitor, "_tail_loss", lambda *a: (_ for _ in ()).throw(AssertionError("read again")))
    assert monitor.final_loss(folder) == 1.0  # unchanged file: remembered
    with (folder / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"event": "log", "step": 2001, "loss": 0.5}) + "\n")
    monkeypatch.undo()
    assert monitor.final_loss(folder) == 0.5


def test_final_loss_of_a_run_whose_tail_has_no_loss(tmp_path):
    folder = tmp_path / "r"
    folder.mkdir()
    lines = [{"event": "log", "step": 1, "loss": 2.0}] + [{"event": "eval", "eval_loss": 1.0, "pad": "x" * 500}] * 200
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    assert monitor.final_loss(folder) == 2.0
    assert monitor.final_loss(tmp_path / "none") is None


def test_history_over_many_finished_runs_keeps_no_monitors(board):
    make_finished_runs(board.jobs.runs_dir, 60, steps=20)
    frame, ids = runs.table_frame(board, "en")
    assert len(ids) == 60 and len(frame) == 60
    assert not board.jobs._monitors  # finished runs are summarised from their files, not followed
    losses = set(frame.iloc[:, list(runs.COLUMNS).index("final_loss")])
    assert 1.0 in losses
