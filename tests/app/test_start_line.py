"""The line under Train's and Evaluate's Start follows its run and the page's language.

"Run `x` is queued (position 1); it starts when the device is free." stayed under Evaluate's Start long after the
run had started (and ended), "Run `x` started." under Train's after the run had completed, and neither followed a
switch between English and Chinese. The tabs' tick now writes the line again for the run's state and language, and
clears it once the run ended (the status panel says how); a line another message replaced is left alone.
"""

from __future__ import annotations

import gradio as gr
import pytest

from app import start_line
from app.inert_text import inert


def tick_of(demo, status_id: str):
    """A tab's tick (its timer and a language switch), found by the status card it draws."""
    return next(f for f in demo.fns.values()
                if any(getattr(o, "elem_id", None) == status_id for o in f.outputs)
                and any(t[1] == "tick" for t in f.targets))


def chain(demo, button_id: str) -> list:
    """The functions a click of the button runs, in order (the click's, then each ``.then``'s)."""
    fns = [next(f for f in demo.fns.values() if not f.is_cancel_function and any(
        getattr(demo.blocks.get(t[0]), "elem_id", None) == button_id and t[1] == "click" for t in f.targets))]
    while nxt := [f for f in demo.fns.values() if f.trigger_after is not None and demo.fns[f.trigger_after] is fns[-1]]:
        fns.append(nxt[0])
    return fns


def start_of(demo, button_id: str):
    """The tab's Start handler (after the click's "starting" card, app.start_card)."""
    return next(f for f in chain(demo, button_id) if getattr(f.fn, "__name__", "") == "on_start")


def page_values(fn, lang: str) -> list:
    """The inputs of ``fn`` as the page is built, in ``lang`` (Evaluate on the demo's dataset)."""
    given = {"lf-lang-code": lang, "lf-eval-dataset": ["demo_identity"]}
    return [given.get(getattr(c, "elem_id", None), c.value) for c in fn.inputs]


@pytest.mark.parametrize(("button", "status"), [("lf-train-start", "lf-train-status"),
                                                 ("lf-eval-start", "lf-eval-status")])
def test_the_start_line_follows_the_run_and_the_language(board, demo, button, status):
    """Queued (its place) -> started -> cleared once ended; in the page's language at each step."""
    blocker = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    board.jobs.wait(blocker, 60, ("running",))
    start, tick = start_of(demo, button), tick_of(demo, status)
    outputs = dict(zip(start.outputs, start.fn(*page_values(start, "en")), strict=True))
    message = next(v for o, v in outputs.items() if getattr(o, "elem_id", None) and o.elem_id.endswith("-message"))
    tracked = next(v for v in outputs.values() if isinstance(v, dict) and "text" in v)
    run_id = tracked["run"]
    assert message == tracked["text"] == f"Run `{run_id}` is queued (position 1); it starts when the device is free."

    def ticked(lang, shown_message, kept):
        *_, line, kept_now = tick.fn(run_id, None, lang, shown_message, kept)
        return line, kept_now

    assert ticked("en", message, tracked) == (gr.skip(), gr.skip())  # nothing changed
    line, kept = ticked("zh", message, tracked)  # a switch to Chinese
    assert line == f"运行 `{run_id}` 已排队（第 1 位），设备空闲后开始。" and kept["text"] == line

    board.jobs.abort(blocker)
    board.jobs.wait(run_id, 60, ("running", "completed", "failed"))
    if board.jobs.folder(run_id).info().get("status") == "running":
        line, kept = ticked("zh", inert(line), kept)  # the page holds the text as shown
        assert line == f"运行 `{run_id}` 已开始。"
    board.jobs.wait(run_id, 60)
    line, kept = ticked("en", line, kept)
    assert line == "" and kept is None  # ended: the status panel says how


def test_a_line_another_message_replaced_is_left_alone(board, demo):
    """Abort's (or Save's) message in the same place is not overwritten by the run's line."""
    tick = tick_of(demo, "lf-train-status")
    run_id = board.jobs.submit("train", {"fake_steps": 1})
    board.jobs.wait(run_id, 60)
    tracked = {"run": run_id, "text": f"Run `{run_id}` started."}
    *_, line, kept = tick.fn(run_id, None, "en", "Saved the config as `a.yaml`.", tracked)
    assert line == gr.skip() and kept is None


def test_start_line_states(board):
    assert start_line.start_line(board, "gone", "en") == ""  # no folder
    assert start_line.track("Run `x` started.\n\nThe form could not be kept", "x") is None  # a note: stays as is
    assert start_line.track("refused", None) is None
    assert start_line.follow(board, None, "anything", "zh") == (gr.skip(), gr.skip())


def test_the_export_line_follows_its_run_and_language_and_keeps_where_the_model_goes(board, demo, tmp_path):
    """Export's "Export `x` started; the model goes to PATH." stayed after the export had completed, and in the
    language it was written in (noticed in a newcomer round): it now follows the run as Train's and Evaluate's do,
    with the path still named while it runs."""
    tick = tick_of(demo, "lf-export-status")
    target = str(tmp_path / "merged")
    run_id = board.jobs.submit("export", {"fake_steps": 400, "fake_sleep": 0.05}, meta={"export_dir": target})
    board.jobs.wait(run_id, 60, ("running",))
    written = f"Export `{run_id}` started; the model goes to {target}."
    tracked = start_line.track(written, run_id)

    def ticked(lang, shown_message, kept):
        *_, line, kept_now = tick.fn(run_id, None, lang, shown_message, kept)
        return line, kept_now

    assert ticked("en", written, tracked) == (gr.skip(), gr.skip())  # nothing changed
    line, kept = ticked("zh", written, tracked)  # a switch to Chinese: the path is still named
    assert line == f"导出 `{run_id}` 已开始；模型将保存到 {target}。" and kept["text"] == line
    board.jobs.abort(run_id)
    board.jobs.wait(run_id, 60)
    line, kept = ticked("zh", inert(line), kept)
    assert line == "" and kept is None  # ended: the status panel and the result card say how and where
