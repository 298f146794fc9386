"""History with no runs says so, and what to do: a table of headers alone told a new user nothing. The line is a
translation key (the page shows it in its language and puts it back on a switch); the refresh shows it while the
workspace has no run and hides it once one exists."""

from __future__ import annotations

import json
import time

import gradio as gr

from app.i18n import load_locale


def refresh_handler(demo: gr.Blocks):
    """History's refresh on page load (and language change), and the line it shows or hides."""
    empty = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-runs-empty")
    fn = next(f for f in demo.fns.values()
              if empty in f.outputs and any(target[1] == "load" for target in f.targets))
    return fn, empty


def test_history_says_there_are_no_runs_until_one_exists(board):
    from app.ui import build_ui

    demo = build_ui(board)
    fn, empty = refresh_handler(demo)
    assert empty.visible is False  # not shown before the page knows: a workspace with runs never flashes it
    assert str(empty.value) != "runs_empty" and "runs_empty" in str(empty.value)  # the key, translated by the page
    assert "Train" in load_locale("en")["runs_empty"] and "训练" in load_locale("zh")["runs_empty"]

    *_, shown = fn.fn(None, [], "en")
    assert shown["visible"] is True

    run = board.jobs.runs_dir / "20261207-120000-train-first"
    run.mkdir(parents=True)
    now = time.time()
    (run / "run.json").write_text(json.dumps({"id": run.name, "kind": "train", "status": "completed",
                                              "created_at": now - 5, "started_at": now - 4, "finished_at": now}))
    frame, _, _, hidden = fn.fn(None, [], "en")
    assert hidden["visible"] is False
    assert run.name in frame.to_string()

