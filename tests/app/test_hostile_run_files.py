"""A run folder's JSON files as a damaged disk, a process killed mid-line or a folder copied in from elsewhere may
leave them: a line that is no JSON object (a number, a list), bytes that are not UTF-8 (a line torn in the middle
of a character, then appended to), JSON nested past the parser's depth. The board passes over such a line and
shows the rest of the run; before, each stopped the view that read it (AttributeError, UnicodeDecodeError,
RecursionError)."""

from __future__ import annotations

import json

import pytest

from app import curves, monitor, reward_view, run_outcome
from app.tabs import evaluate
from engine.runs import RunFolder

GOOD = [{"event": "log", "step": 1, "total_steps": 2, "loss": 2.5, "lr": 1e-3},
        {"event": "log", "step": 2, "total_steps": 2, "loss": 1.5, "lr": 1e-3}]
BAD_LINES = {
    "number": b"5",
    "list": b'["event", "log"]',
    "text": b'"end"',
    "torn_utf8": b'{"event": "log", "step": 3, "loss": 0.5, "note": "\xe4\xb8',
    "deep": b"[" * 100_000 + b"]" * 100_000,
}


def _run(tmp_path, bad: bytes) -> RunFolder:
    folder = RunFolder(tmp_path / "runs" / "20260101-000000-train-aaaa")
    folder.create("train", "stage: sft\n")
    folder.events_path.write_bytes(b"\n".join([json.dumps(GOOD[0]).encode(), bad, json.dumps(GOOD[1]).encode(), b""]))
    return folder


@pytest.mark.parametrize("bad", BAD_LINES.values(), ids=BAD_LINES.keys())
def test_the_run_view_and_history_pass_over_a_line_that_is_no_event(tmp_path, bad):
    folder = _run(tmp_path, bad)
    watched = monitor.RunMonitor(folder).refresh()
    assert watched.curves()["loss"] == [(1, 2.5), (2, 1.5)]
    assert monitor.final_loss(folder.path) == 1.5
    assert [e["step"] for e in curves.iter_events(folder.events_path)] == [1, 2]
    assert reward_view.RLFollower(folder.path).refresh().version == 1
    assert run_outcome.end_event(folder) is None


def test_the_final_loss_passes_over_a_last_line_nested_too_deep(tmp_path):
    folder = _run(tmp_path, b"")
    with folder.events_path.open("ab") as fh:
        fh.write(b'{"event": "end", "loss": ' + b"[" * 30_000 + b"]" * 30_000 + b"}\n")
    assert monitor.final_loss(folder.path) == 1.5
    assert run_outcome.end_event(folder) is None


def test_the_evaluate_tab_passes_over_result_files_it_cannot_read(tmp_path):
    (tmp_path / "predict_results.json").write_bytes(b'{"predict_bleu-4": 1.0, "x": "\xff"}')
    (tmp_path / "eval_results.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    assert evaluate.read_metrics(tmp_path, {"eval_loss": 2.0}) == [["eval_loss", 2.0]]
    (tmp_path / "generated_predictions.jsonl").write_bytes(b"\n".join([
        b"[1, 2]", b'{"prompt": "p\xff", "label": "l", "predict": "x"}', b"[" * 100_000 + b"]" * 100_000,
        json.dumps({"prompt": "q", "label": "m", "predict": "y"}).encode(),
    ]))
    assert evaluate.read_predictions(tmp_path) == [["p\ufffd", "l", "x"], ["q", "m", "y"]]


def test_the_evaluate_tab_never_holds_an_outsized_line_or_result_file(tmp_path):
    """A generated_predictions.jsonl line of 256 MB (sparse zeros, no line break) and an outsized all_results.json
    were read whole into the board; such a line is passed over and the rows after it still shown."""
    import tracemalloc

    with open(tmp_path / "generated_predictions.jsonl", "wb") as fh:
        fh.write(json.dumps({"prompt": "p", "label": "l", "predict": "x"}).encode() + b"\n")
        fh.truncate(256 << 20)
        fh.seek(0, 2)
        fh.write(b"\n" + json.dumps({"prompt": "q", "label": "m", "predict": "y"}).encode() + b"\n")
    with open(tmp_path / "all_results.json", "wb") as fh:
        fh.write(b'{"eval_loss": 1.0')
        fh.truncate(256 << 20)
    tracemalloc.start()
    try:
        assert evaluate.read_predictions(tmp_path) == [["p", "l", "x"], ["q", "m", "y"]]
        assert evaluate.read_metrics(tmp_path, {"eval_loss": 2.0}) == [["eval_loss", 2.0]]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20


@pytest.mark.parametrize("value", [5, ["completed"], {"x": 1}, "hacked"])
def test_history_shows_a_run_whose_status_or_kind_is_no_known_one(tmp_path, value):
    """run.json's status and kind are read as a damaged file may hold them: a list or number stopped the whole
    History table with a TypeError (one run hid every other), an unknown word showed as a locale key
    (status_hacked); such a value is left out."""
    from app.context import Board
    from app.jobs import JobManager
    from app.tabs.runs import table_frame
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    for run_id in ("20260101-000000-train-aaaa", "20260101-000001-train-bbbb"):
        RunFolder(ws.runs_dir / run_id).create("train", "stage: sft\n")
    bad = RunFolder(ws.runs_dir / "20260101-000000-train-aaaa")
    bad.run_path.write_text(json.dumps({**json.loads(bad.run_path.read_text()), "status": value, "kind": value}))
    assert "status" not in bad.info() and "kind" not in bad.info()
    frame, ids = table_frame(Board(workspace=ws, jobs=JobManager(ws.runs_dir)), "en")
    assert sorted(ids) == ["20260101-000000-train-aaaa", "20260101-000001-train-bbbb"]
    assert "status_hacked" not in frame.to_string()


@pytest.mark.parametrize("value", ["abc", float("nan"), 1e300, -1e20, True])
def test_history_shows_a_run_whose_times_are_no_times(tmp_path, value):
    """A started_at that is text, NaN or out of the clock's range stopped History's table (TypeError, ValueError,
    OverflowError from time.localtime); such a time is left out as a creation time already was."""
    from app.context import Board
    from app.jobs import JobManager
    from app.tabs.runs import table_frame
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    folder = RunFolder(ws.runs_dir / "20260101-000000-train-aaaa")
    folder.create("train", "stage: sft\n")
    times = {"started_at": value, "launched_at": value, "finished_at": value}
    folder.run_path.write_text(json.dumps({**json.loads(folder.run_path.read_text()), "status": "failed", **times}))
    assert not set(times) & set(folder.info())
    frame, ids = table_frame(Board(workspace=ws, jobs=JobManager(ws.runs_dir)), "en")
    assert ids == [folder.id]


def test_the_board_passes_over_run_files_replaced_by_a_pipe(tmp_path):
    """events.jsonl or config.yaml replaced by a named pipe while the board watches: opening it waited for a writer
    forever, holding the History page, the run view or the chat tab; it now reads as unreadable at once."""
    import os
    import sys
    from pathlib import Path
    from types import SimpleNamespace

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "engine"))
    from test_run_files_not_regular import within

    from app.chat_media import model_media
    from app.history import RunConfigError, load_run_config

    folder = _run(tmp_path, b"")
    for name in ("events.jsonl", "config.yaml"):
        (folder.path / name).unlink()
        os.mkfifo(folder.path / name)
    pipes = [folder.path / "events.jsonl", folder.path / "config.yaml"]
    assert within(5, lambda: monitor.final_loss(folder.path), *pipes) is None
    assert within(5, lambda: list(curves.iter_events(folder.path / "events.jsonl")), *pipes) == []
    with pytest.raises(RunConfigError, match="not a regular file"):
        within(5, lambda: load_run_config(folder.path / "config.yaml"), *pipes)
    board = SimpleNamespace(jobs=SimpleNamespace(runs_dir=folder.path.parent))
    assert within(5, lambda: model_media(board, folder.id), *pipes) == ()


def test_the_loss_curves_never_hold_an_outsized_events_line(tmp_path):
    """History's curves read events.jsonl line by line, but a line had no bound: one of 256 MB (sparse zeros, as a
    crash can leave, or a file from elsewhere) was held whole; it is passed over and the events after it kept."""
    import tracemalloc

    path = tmp_path / "events.jsonl"
    with open(path, "wb") as fh:
        fh.write(b'{"event": "log", "step": 1, "loss": 2.0}\n')
        fh.truncate(256 << 20)
        fh.seek(0, 2)
        fh.write(b'\n{"event": "log", "step": 2, "loss": 1.0}\n')
    tracemalloc.start()
    try:
        steps = [e["step"] for e in curves.iter_events(path)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert steps == [1, 2] and peak < 32 << 20
