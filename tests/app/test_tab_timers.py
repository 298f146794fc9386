"""Only the shown tab's timers run (app.tab_timers): the page opens on Train with only its timers running, and
selecting a tab, by a click or by History's Watch, starts its timers and stops every other tab's."""

from __future__ import annotations

import gradio as gr

from app.tab_timers import pause_hidden_tabs


def _timer_states(updates: list) -> list[bool]:
    return [update.active if isinstance(update, gr.Timer) else update["active"] for update in updates]


def _select_handlers(demo: gr.Blocks) -> dict[str, object]:
    """Tab elem_id -> the fn its ``select`` event runs to set the timers."""
    tabs = {block._id: block for block in demo.blocks.values() if isinstance(block, gr.Tab)}
    found = {}
    for block_fn in demo.fns.values():
        timers_out = block_fn.outputs and all(isinstance(out, gr.Timer) for out in block_fn.outputs)
        for target, event in block_fn.targets:
            if event == "select" and target in tabs and timers_out:
                found[tabs[target].elem_id] = block_fn
    return found


def test_the_page_opens_with_only_the_train_tab_polling_and_each_tab_starts_its_own(board):
    from app.ui import build_ui

    demo = build_ui(board)
    timers = [block for block in demo.blocks.values() if isinstance(block, gr.Timer)]
    config = demo.get_config_file()
    active = {c["id"]: c["props"].get("active") for c in config["components"] if c["type"] == "timer"}
    assert len(timers) == len(active) == 6  # top bar, train, rewards, evaluate, export, history
    handlers = _select_handlers(demo)
    assert set(handlers) == {"lf-tab-train", "lf-tab-evaluate", "lf-tab-chat", "lf-tab-export", "lf-tab-history"}
    controlled = {out._id for out in handlers["lf-tab-train"].outputs}
    assert len(controlled) == 5  # every timer but the top bar's, which always runs
    (top_bar,) = [timer_id for timer_id in active if timer_id not in controlled]
    assert active[top_bar] is True
    train_timers = {timer_id for timer_id in controlled if active[timer_id]}
    assert len(train_timers) == 2  # the Train tab's status line and its rewards panel

    running_after = {}
    for elem_id, block_fn in handlers.items():
        states = _timer_states(block_fn.fn())
        running_after[elem_id] = {out._id for out, on in zip(block_fn.outputs, states, strict=True) if on}
    assert running_after["lf-tab-train"] == train_timers
    assert running_after["lf-tab-chat"] == set()
    for elem_id in ("lf-tab-evaluate", "lf-tab-export", "lf-tab-history"):
        assert len(running_after[elem_id]) == 1 and not running_after[elem_id] & train_timers
    assert len({frozenset(ids) for ids in running_after.values()}) == 5  # each tab runs its own


def test_a_tab_with_no_timers_stops_the_others_and_no_timers_is_a_no_op():
    with gr.Blocks() as demo:
        with gr.Tabs():
            with gr.Tab("a") as tab_a:
                one = gr.Timer(1.0)
            with gr.Tab("b") as tab_b:
                pass
            with gr.Tab("c") as tab_c:
                two = gr.Timer(2.0)
        pause_hidden_tabs([(tab_a, [one]), (tab_b, []), (tab_c, [two])])
    assert one.active is True and two.active is False
    fns = {target: fn for fn in demo.fns.values() for target, _ in fn.targets}
    assert _timer_states(fns[tab_b._id].fn()) == [False, False]
    assert _timer_states(fns[tab_c._id].fn()) == [False, True]
    assert _timer_states(fns[tab_a._id].fn()) == [True, False]

    with gr.Blocks() as empty:
        with gr.Tabs():
            with gr.Tab("x") as tab_x:
                pass
        pause_hidden_tabs([(tab_x, [])])
    assert not empty.fns
