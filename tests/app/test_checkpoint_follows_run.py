"""After a run this page started, the top bar's checkpoint picker takes what was just trained.

A newcomer clicked Start on the demo, saw "completed", went to Chat and clicked Load: the picker was still on
"None (base model)", so they chatted with the untrained model ("Ready: demo, no adapter"), and Evaluate and Predict
ran on it too. Now a run started (or taken up) from the page that completes with its final adapter is selected while
the picker is still on the base model, and a line under the picker says so. A choice of the user's is never
overridden, a failed or aborted run is never selected, and a page that did not start the run is left alone.
"""

from __future__ import annotations

import json
from pathlib import Path

import gradio as gr
import pytest

from app import catalog
from app.ui import build_ui
from tests.app.test_start_line import start_of

HEADER = b"{}"


def saved_adapter(folder: Path) -> None:
    """What training leaves in a run folder (or a checkpoint-N) that the picker lists."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "adapter_config.json").write_text("{}")
    (folder / "adapter_model.safetensors").write_bytes(len(HEADER).to_bytes(8, "little") + HEADER)


def fake_run(board, run_id: str, status: str, final: bool = True) -> str:
    """A training run folder in ``status``, with its final adapter (``final``) and one checkpoint; its path."""
    run = board.workspace.runs_dir / run_id
    saved_adapter(run / "checkpoint-2")
    if final:
        saved_adapter(run)
    (run / "run.json").write_text(json.dumps({"id": run_id, "kind": "train", "status": status}))
    return str(run)


@pytest.fixture()
def page(board, monkeypatch):
    """The built page and its top bar's refresh (the timer's tick, the Refresh button, a language switch)."""
    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}}, None))
    demo = build_ui(board)
    timers = {b._id for b in demo.blocks.values() if isinstance(b, gr.Timer)}
    tick = next(f for f in demo.fns.values()
                if any(t[0] in timers and t[1] == "tick" for t in f.targets)
                and any(getattr(o, "elem_id", None) == "lf-checkpoint" for o in f.outputs))
    return demo, tick


def refresh(tick, checkpoint, follow, lang="en", shown=None):
    """(picker, follow state, line under the picker) of one refresh of a page whose picker shows ``checkpoint``."""
    picker, _, _, _, _, follow_now, line = tick.fn([], shown or {}, lang, checkpoint, follow)
    return picker, follow_now, line


def test_a_run_this_page_started_is_selected_when_it_completes(board, page):
    """The picker on the base model takes the completed run's final adapter (not its checkpoint), and the line under
    it names the run in the page's language; while the run is live, nothing moves."""
    _, tick = page
    follow = {"run": "r1", "set": False}
    fake_run(board, "r1", "running", final=False)
    picker, follow_now, line = refresh(tick, "", follow)
    assert "value" not in picker and follow_now == gr.skip() and line == gr.skip()  # still training

    path = fake_run(board, "r1", "completed")
    picker, known, _, shown, _, follow_now, line = tick.fn([], {}, "en", "", follow)
    assert picker["value"] == path
    assert follow_now == {"run": "r1", "set": True}
    assert line["visible"] and "`r1`" in line["value"] and "just trained" in line["value"]
    # the next refresh (the picker now on the run): nothing more to send; a language switch composes the line again
    assert tick.fn(known, shown, "en", path, follow_now) == (gr.skip(),) * 7
    zh = tick.fn(known, shown, "zh", path, follow_now)[6]
    assert zh["value"].startswith("检查点选择已切换") and "`r1`" in zh["value"]


@pytest.mark.parametrize("status", ["failed", "aborted"])
def test_a_failed_or_aborted_run_is_never_selected(board, page, status):
    """Its checkpoints are listed, but the picker stays on the base model and stops following the run."""
    _, tick = page
    fake_run(board, "r2", status)
    picker, follow_now, line = refresh(tick, "", {"run": "r2", "set": False})
    assert "value" not in picker and follow_now is None and line == gr.skip()


def test_a_completed_run_without_its_final_output_selects_nothing(board, page):
    _, tick = page
    fake_run(board, "r3", "completed", final=False)
    picker, follow_now, _ = refresh(tick, "", {"run": "r3", "set": False})
    assert "value" not in picker and follow_now is None


def test_the_users_own_choice_wins(board, page):
    """A checkpoint the user picked while the run trained stays picked; picking anything (the base model too) ends
    the following, and the line under the picker goes."""
    demo, tick = page
    other = fake_run(board, "older", "completed")
    fake_run(board, "r4", "completed")
    picker, follow_now, _ = refresh(tick, other, {"run": "r4", "set": False})
    assert "value" not in picker and follow_now is None

    picked = next(f for f in demo.fns.values()
                  if any(t[1] == "input" for t in f.targets)
                  and any(getattr(demo.blocks.get(t[0]), "elem_id", None) == "lf-checkpoint" for t in f.targets))
    follow_now, line, shown = picked.fn({"devices": "d", "every": 30.0, "note": "x"})
    assert follow_now is None and line["visible"] is False and shown == {"devices": "d", "every": 30.0}
    # the user went back to the base model after the run was selected: it is not selected again
    picker, follow_now, _ = refresh(tick, "", follow_now)
    assert "value" not in picker and follow_now == gr.skip()  # following nothing, as before
    # ... and a picker moved off the run by anything else (a config loaded) ends the line too
    path = str(board.workspace.runs_dir / "r4")
    assert refresh(tick, other, {"run": "r4", "set": True})[1] is None
    assert refresh(tick, path, {"run": "r4", "set": True})[1] == gr.skip()


def test_a_second_page_is_not_moved_by_the_first_pages_run(board, page):
    """A page that did not start the run (its own follow state, None) keeps the base model; the page-load event that
    lets it watch a live run (adopt_live_runs) does not make it follow the run."""
    demo, tick = page
    fake_run(board, "r5", "completed")
    picker, follow_now, line = refresh(tick, "", None)
    assert "value" not in picker and follow_now == gr.skip() and line == gr.skip()
    follow = tick.inputs[4]  # the top bar's follow state
    assert follow.value is None  # each page (session) starts following nothing
    on_load = [f for f in demo.fns.values() if follow in f.outputs and any(t[1] == "load" for t in f.targets)]
    assert on_load == []


def test_train_start_makes_the_page_follow_its_run(board, page):
    """Start on the Train tab (with the page's form as built) makes the page follow the run it started."""
    demo, _ = page
    start = start_of(demo, "lf-train-start")
    values = [c.value if not isinstance(c, gr.Textbox) or c.elem_id != "lf-lang-code" else "en" for c in start.inputs]
    outputs = start.fn(*values)
    follow = dict(zip(start.outputs, outputs, strict=True))
    run_id = outputs[1]
    assert isinstance(run_id, str) and run_id
    assert {"run": run_id, "set": False} in follow.values()
    assert board.jobs.wait(run_id, 60) in ("completed", "failed")
