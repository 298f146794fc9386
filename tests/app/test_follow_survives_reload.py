"""The run the checkpoint picker follows survives a reload of the page (app.page_follow).

A newcomer started the demo's training, reloaded the page while it ran, and the run completed: the picker stayed on
"None (base model)", so Chat, Evaluate and Export used the untrained model, since the following lived in the page's
memory of the board (a gr.State) only. The page now keeps it in its file and brings it back on a reload.
"""

from __future__ import annotations

import gradio as gr
import pytest

from app import catalog, page_follow
from app.page_memory import memory
from app.ui import build_ui
from tests.app.test_checkpoint_follows_run import fake_run, refresh

PAGE = "reloaded-page-0123456789"


@pytest.fixture()
def page(board, monkeypatch):
    """The built page and its top bar's refresh (as in test_checkpoint_follows_run)."""
    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}}, None))
    demo = build_ui(board)
    timers = {b._id for b in demo.blocks.values() if isinstance(b, gr.Timer)}
    tick = next(f for f in demo.fns.values() if any(t[0] in timers and t[1] == "tick" for t in f.targets)
                and any(getattr(o, "elem_id", None) == "lf-checkpoint" for o in f.outputs))
    return demo, tick


def wiring(demo):
    """(the page-load restore, the keeping of each change) as the page wires them."""
    page_id = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-page-id")
    picker = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-checkpoint")
    restore = next(f for f in demo.fns.values() if (page_id._id, "change") in f.targets and picker in f.outputs)
    follow = restore.outputs[0]
    keep = next(f for f in demo.fns.values() if (follow._id, "change") in f.targets)
    return restore, keep


@pytest.mark.parametrize(("lang", "words"), [("en", "now uses `run-1`, the run this page just trained"), ("zh", "本页刚训练完成的运行 `run-1`")])
def test_a_reload_during_the_run_still_takes_its_adapter(board, page, lang, words):
    demo, tick = page
    restore, keep = wiring(demo)
    path = fake_run(board, "run-1", "running")
    keep.fn(PAGE, {"run": "run-1", "set": False})  # Start (or Watch) made the page follow the run
    follow, picker = restore.fn(PAGE)  # the page is reloaded: a new session, whose picker is on the base model
    assert follow == {"run": "run-1", "set": False} and picker == gr.skip()
    fake_run(board, "run-1", "completed")
    shown, follow_now, line = refresh(tick, "", follow, lang)
    assert shown["value"] == path and follow_now == {"run": "run-1", "set": True}
    assert words in line["value"], line
    keep.fn(PAGE, follow_now)
    # reloaded again after the picker took it: the picker shows the run's adapter again, with its line
    follow, picker = restore.fn(PAGE)
    assert follow == {"run": "run-1", "set": True} and picker == path
    _, again, line = refresh(tick, picker, follow, lang)
    assert again == gr.skip() and words in line["value"]


def test_what_ended_the_following_is_kept_too(board, page):
    demo, _ = page
    restore, keep = wiring(demo)
    fake_run(board, "run-2", "running")
    keep.fn(PAGE, {"run": "run-2", "set": False})
    keep.fn(PAGE, None)  # the user picked a checkpoint of their own
    assert restore.fn(PAGE) == (gr.skip(), gr.skip())
    keep.fn(PAGE, {"run": "gone", "set": False})  # a run that does not exist (deleted meanwhile, or made up)
    assert memory(board).read(PAGE)[page_follow.KEY] is None and restore.fn(PAGE) == (gr.skip(), gr.skip())
    memory(board).save(PAGE, page_follow.KEY, {"run": "../run-2", "set": "yes"})  # a file of an unknown shape
    assert restore.fn(PAGE) == (gr.skip(), gr.skip())
    assert restore.fn("not a page id") == (gr.skip(), gr.skip())
