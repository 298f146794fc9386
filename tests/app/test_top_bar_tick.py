"""The top bar's timer on an idle page: gradio's page updates every loading status it keeps on each status message of
every event, about 175 of them once the Train form was edited (each of the form's fields an event read), so each tick
cost an idle page about 0.3 s of the browser's CPU. The tick is cheap and rare where nothing can change."""

from __future__ import annotations

import json

import gradio as gr


def test_the_top_bar_tick_is_light_and_slow_while_no_run_can_add_a_checkpoint(board, monkeypatch):
    """The top bar's timer ticks on every open page, and each event costs the page work for every loading status it
    keeps (about 175 after an edit of the Train form): the tick is not queued (fewer status messages), shows no
    progress, answers with skips where nothing changed, and slows to IDLE_TICK while no run is queued or running;
    a new checkpoint still comes through, and a live run brings the timer back to LIVE_TICK."""
    from app import catalog
    from app.topbar import IDLE_TICK, LIVE_TICK
    from app.ui import build_ui

    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}}, None))
    demo = build_ui(board)
    timers = {b._id: b for b in demo.blocks.values() if isinstance(b, gr.Timer)}
    fn = next(f for f in demo.fns.values()
              if any(t[0] in timers and t[1] == "tick" for t in f.targets)
              and any(getattr(o, "elem_id", None) == "lf-checkpoint" for o in f.outputs))
    assert fn.queue is False and fn.show_progress == "hidden" and fn.show_progress_on == []
    assert len(fn.inputs) == 5  # two states, the language, the picker and the run it follows (none here)
    timer = next(timers[t[0]] for t in fn.targets if t[0] in timers)
    assert timer.value == LIVE_TICK and timer in fn.outputs

    picker, known, devices, shown, every, *follow = fn.fn([], {}, "en", "", None)  # no checkpoint yet: left as it is
    assert picker == gr.skip() and known == gr.skip() and follow == [gr.skip(), gr.skip()]
    assert "CPU" in devices and shown == {"devices": devices, "every": IDLE_TICK}
    assert every.value == IDLE_TICK  # no run can add a checkpoint: the timer slows down
    assert fn.fn([], shown, "en", "", None) == (gr.skip(),) * 7  # nothing changed: nothing sent
    assert fn.fn([], shown, "zh", "", None)[2] != shown["devices"]  # a language switch composes the line again

    looking = {"report": None}
    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: (looking["report"], None))
    *_, now, every, _, _ = fn.fn([], {}, "en", "", None)  # the devices are still being looked for: the line is due soon
    assert now["every"] == LIVE_TICK and every == gr.skip()
    looking["report"] = {"cpu": {"cores": 2}}
    assert fn.fn([], now, "en", "", None)[4].value == IDLE_TICK

    run = board.jobs.runs_dir / "done"
    (run / "checkpoint-3").mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "done", "kind": "train", "status": "running"}))
    header = b"{}"
    for folder in (run, run / "checkpoint-3"):
        (folder / "adapter_config.json").write_text("{}")
        (folder / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    picker, known, devices, now, every, _, _ = fn.fn([], shown, "en", "", None)
    assert [c[1] for c in picker["choices"]] == ["", str(run / "checkpoint-3")]  # the run's own folder once done
    assert known == [["done / checkpoint-3", str(run / "checkpoint-3")]]
    assert devices == gr.skip() and now["every"] == LIVE_TICK and every.value == LIVE_TICK  # a live run: back to fast


def test_a_run_started_from_a_tab_brings_the_fast_tick_back_at_once(board, monkeypatch):
    """While idle the top bar ticks every IDLE_TICK (30 s): a run started from the page then waited up to that long for
    the fast tick, and a short run's checkpoints reached the Evaluate and Chat pickers up to 30 s after it ended.
    A tab starting (or taking up) a run now refreshes the top bar at once, which sees the live run."""
    from app import catalog
    from app.topbar import IDLE_TICK, LIVE_TICK
    from app.ui import build_ui

    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}}, None))
    demo = build_ui(board)
    fn = next(f for f in demo.fns.values()
              if f.targets and all(t[1] == "change" for t in f.targets)
              and any(getattr(o, "elem_id", None) == "lf-checkpoint" for o in f.outputs))
    assert len(fn.targets) == 3  # the run each of Train, Evaluate and Export watches
    assert fn.queue is False and fn.show_progress == "hidden"
    *_, shown, every, _, _ = fn.fn([], {}, "en", "", None)
    assert shown["every"] == IDLE_TICK and every.value == IDLE_TICK  # nothing live yet
    run = board.jobs.runs_dir / "started"
    run.mkdir(parents=True)
    (run / "run.json").write_text(json.dumps({"id": "started", "kind": "train", "status": "queued"}))
    *_, now, every, _, _ = fn.fn([], shown, "en", "", None)
    assert now["every"] == LIVE_TICK and every.value == LIVE_TICK
