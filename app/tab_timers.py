"""Only the tab a page shows keeps its timers running.

Each tab that follows a live run (Train and its rewards panel, Evaluate, Export, History) polls the board with a
timer. Every tick is a round trip through gradio's queue and costs the browser more than the board: an idle page
with every timer running fired about two events a second and kept half a CPU core busy in the browser (gradio's
client redoes its bookkeeping for the whole page on each event). A hidden tab's status line needs no update, so
its timers stop while another tab is shown and start again when it is selected. A tab is selected by a click or by
a handler that switches tabs (History's Watch): gradio fires the tab's ``select`` event for both. Each tab's
handlers also run on the page's language change, so a hidden tab is in the right language when it is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

import gradio as gr


def pause_hidden_tabs(tab_timers: Sequence[tuple[gr.Tab, Sequence[gr.Timer]]]) -> None:
    """Wire each tab's ``select`` to start its own timers and stop every other tab's; the first tab is the one a
    page opens on, so only its timers start active. Call inside the ``gr.Blocks`` context, after the tabs exist."""
    every = [timer for _, timers in tab_timers for timer in timers]
    if not every:
        return
    for index, (tab, timers) in enumerate(tab_timers):
        mine = {id(timer) for timer in timers}
        if index:
            for timer in timers:
                timer.active = False  # read when the page's config is built, so the page starts with it stopped
        tab.select(
            lambda mine=mine: [gr.Timer(active=id(timer) in mine) for timer in every],
            None,
            every,
            show_progress="hidden",
            queue=False,
            api_visibility="private",
        )
