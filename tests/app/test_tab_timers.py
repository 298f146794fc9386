"""A tab's timers run only while it is shown and, for a tab that follows a run, while it follows one
(app.tab_timers): the page opens on Train with nothing polling but the top bar; selecting a tab, by a click or by
History's Watch, a run to watch (Start, Watch, a run restored or adopted as the page loads) start its timers."""

from __future__ import annotations

import gradio as gr

from app.tab_timers import TabTimers, pause_hidden_tabs, running


def _states(updates: list) -> list[bool]:
    return [update.active for update in updates if isinstance(update, gr.Timer)]


def _handlers(demo: gr.Blocks) -> dict[tuple[str, str], object]:
    """(elem_id or block id, event) -> the fn that sets the timers on that event (it outputs timers and the shown
    tab only: the top bar's refresh, which sets its own timer's interval, is not one)."""
    found = {}
    for block_fn in demo.fns.values():
        if not block_fn.outputs or not any(isinstance(out, gr.Timer) for out in block_fn.outputs):
            continue
        if not all(isinstance(out, (gr.Timer, gr.State)) for out in block_fn.outputs):
            continue
        for target, event in block_fn.targets:
            block = demo.blocks.get(target)
            found[(getattr(block, "elem_id", None) or str(target), event)] = block_fn
    return found


def test_the_board_page_polls_only_the_shown_tab_and_only_while_it_follows_a_run(board):
    from app.ui import build_ui

    demo = build_ui(board)
    config = demo.get_config_file()
    active = {c["id"]: c["props"].get("active") for c in config["components"] if c["type"] == "timer"}
    assert len(active) == 6  # top bar, train, rewards, evaluate, export, history
    handlers = _handlers(demo)
    tabs = ["lf-tab-train", "lf-tab-evaluate", "lf-tab-chat", "lf-tab-export", "lf-tab-history"]
    assert {(tab, "select") for tab in tabs} <= set(handlers)
    select = {tab: handlers[(tab, "select")] for tab in tabs}
    controlled = [out._id for out in select["lf-tab-train"].outputs if isinstance(out, gr.Timer)]
    assert len(controlled) == 5  # every timer but the top bar's, which always runs
    assert [active[i] for i in active if i not in controlled] == [True]
    assert not any(active[i] for i in controlled)  # the page opens on Train, watching no run

    gates = [b for b in select["lf-tab-train"].inputs]
    assert len(gates) == 3  # train, evaluate, export watch a run; chat and history have no gate

    def after(tab, watched):
        shown_and_timers = select[tab].fn(*watched)
        return {i for i, on in zip(controlled, _states(shown_and_timers), strict=True) if on}

    assert after("lf-tab-train", ["", "", ""]) == set()  # no run: the Train tab sends no ticks
    train = after("lf-tab-train", ["run-1", "", ""])
    assert len(train) == 2  # its status line and its rewards panel
    assert after("lf-tab-chat", ["run-1", "run-2", "run-3"]) == set()
    history = after("lf-tab-history", ["", "", ""])
    assert len(history) == 1 and history == after("lf-tab-history", ["run-1", "run-2", "run-3"])
    assert after("lf-tab-evaluate", ["run-1", "", ""]) == set()
    evaluate, export = after("lf-tab-evaluate", ["", "run-2", ""]), after("lf-tab-export", ["", "", "run-3"])
    assert len(evaluate) == len(export) == 1 and len({*train, *history, *evaluate, *export}) == 5

    # a gate's change and the page's load set them from the tab shown (index 0: Train) and the gates
    (on_change,) = {id(fn): fn for key, fn in handlers.items() if key[1] in ("change", "load")}.values()
    shown_timers = _states(on_change.fn(0, "run-1", "", ""))
    assert {i for i, on in zip(controlled, shown_timers, strict=True) if on} == train
    assert not any(_states(on_change.fn(2, "run-1", "run-2", "run-3")))  # Chat shown


def test_running_reads_tabs_and_gates():
    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("a") as tab_a:
                one = gr.Timer(1.0)
            with gr.Tab("b") as tab_b:
                two = gr.Timer(2.0)
                gate = gr.State("")
            with gr.Tab("c") as tab_c:
                three = gr.Timer(3.0)
        entries = [TabTimers(tab_a, [one]), TabTimers(tab_b, [two], gate=gate), TabTimers(tab_c, [three])]
        pause_hidden_tabs(entries, demo)
    assert (one.active, two.active, three.active) == (True, False, False)  # the page opens on a
    assert running(entries, 0, [None, "x", None]) == [True, False, False]
    assert running(entries, 1, [None, "", None]) == [False, False, False]  # b waits for its gate
    assert running(entries, 1, [None, "x", None]) == [False, True, False]
    assert running(entries, 2, [None, "", None]) == [False, False, True]

    with gr.Blocks() as empty:
        with gr.Tabs():
            with gr.Tab("x") as tab_x:
                pass
        pause_hidden_tabs([TabTimers(tab_x)], empty)
    assert not empty.fns
