"""Train's, Evaluate's and Export's status card between a Start click and the run it starts (app.start_card).

The card said "No run yet" (or showed the run watched before, as if it were the new one) until the first timer tick
after Start's handler had answered: a second or more, 15 s on a busy machine. Now the click shows a "starting" card
at once, in the page's language, which the tab's ticks leave alone; the started run's card replaces it as soon as
Start's handler has answered, and the card of the run watched before when Start started nothing.
"""

from __future__ import annotations

import gradio as gr
import pytest

from app import start_card
from tests.app.test_start_line import chain, page_values, start_of, tick_of


@pytest.mark.parametrize(("button", "status"), [("lf-train-start", "lf-train-status"),
                                                 ("lf-eval-start", "lf-eval-status")])
@pytest.mark.parametrize(("lang", "words"), [("en", "Starting: checking the settings"), ("zh", "正在启动：检查设置")])
def test_a_click_on_start_shows_a_starting_card_at_once(board, demo, button, status, lang, words):
    fns = chain(demo, button)
    first, start = fns[0], fns[1]
    assert start is start_of(demo, button) and not first.queue  # answered at once, not behind the queue
    card, seen = first.fn(lang)
    assert first.outputs[0].elem_id == status and words in card and start_card.is_starting(seen)
    tick = tick_of(demo, status)
    assert tick.fn("", seen, lang, "", None) == (gr.skip(),) * 8  # the tab's timer leaves it alone meanwhile
    # Start answers; the next step draws the started run's card over "starting", without waiting for a tick
    outputs = dict(zip(start.outputs, start.fn(*page_values(start, lang)), strict=True))
    run_id = next(v for v in outputs.values() if isinstance(v, dict) and "run" in v)["run"]
    after = fns[2]
    assert after.outputs[0].elem_id == status
    drawn = after.fn(run_id, seen, lang, "", None)
    assert run_id in drawn[0] and not start_card.is_starting(drawn[after.outputs.index(tick.outputs[5])])
    board.jobs.wait(run_id, 60)


def test_a_start_that_starts_nothing_puts_the_watched_runs_card_back(board, demo):
    fns = chain(demo, "lf-eval-start")
    _, seen = fns[0].fn("en")
    drawn = fns[2].fn("", seen, "en", "Nothing was started.", None)  # nothing watched: "No run yet" again
    assert "No run yet" in drawn[0]


def test_export_shows_a_starting_card_at_once_too(board, demo):
    fns = chain(demo, "lf-export-start")
    first, start, after = fns[:3]
    assert not first.queue and getattr(start.fn, "__name__", "") == "on_start"
    card, seen = first.fn("zh")
    assert first.outputs[0].elem_id == "lf-export-status" and "正在启动" in card
    tick = next(f for f in demo.fns.values() if any(t[1] == "tick" for t in f.targets)
                and first.outputs[0] in f.outputs)
    assert tick.fn("", seen, "zh", "", None) == (gr.skip(),) * 7
    drawn = after.fn("", seen, "en", "", None)  # nothing started (no adapter picked): the card of what was watched
    assert "No run yet" in drawn[0]
