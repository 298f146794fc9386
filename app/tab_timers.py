"""A tab's timers run only while the tab is shown and, for a tab that follows a run, while it follows one.

Each tab that follows a live run (Train and its rewards panel, Evaluate, Export) and History poll the board with a
timer. Every tick is a round trip through gradio's queue and costs the browser more than the board: an idle page
with every timer running fired about two events a second and kept half a CPU core busy in the browser (gradio's
client redoes its bookkeeping for the whole page on each event). So a timer runs only while its tab is shown and,
where it has a gate (the tab's watched-run state), while the gate holds a run.

The timers are set again whenever either side changes: a tab's ``select`` (a click, or a handler that switches tabs
such as History's Watch: gradio fires ``select`` for both), a gate's ``change`` (Start, Watch, a live run adopted as
the page loads), and the page's load (a watched run restored from the browser's storage sets no ``change``). Each
tab's own handlers also run on the page's language change, so a hidden tab is in the right language when shown.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import gradio as gr


@dataclass
class TabTimers:
    """One tab: its timers and, when they should run only while the tab follows a run, that run's state."""

    tab: gr.Tab
    timers: Sequence[gr.Timer] = ()
    gate: gr.components.Component | None = None


def running(entries: Sequence[TabTimers], shown: int, gates: Sequence) -> list[bool]:
    """Whether each timer, in the order :func:`pause_hidden_tabs` lists them, runs while tab ``shown`` is shown and
    the gates hold ``gates`` (one value per entry; ignored where an entry has no gate)."""
    states = []
    for index, (entry, gate) in enumerate(zip(entries, gates, strict=True)):
        on = index == shown and (entry.gate is None or bool(gate))
        states += [on] * len(entry.timers)
    return states


def pause_hidden_tabs(entries: Sequence[TabTimers], demo: gr.Blocks) -> None:
    """Wire the tabs' ``select``, the gates' ``change`` and ``demo.load`` to start and stop the timers. The first
    entry is the tab a page opens on. Call inside the ``gr.Blocks`` context, after the tabs and gates exist."""
    every = [timer for entry in entries for timer in entry.timers]
    if not every:
        return
    gates = [entry.gate for entry in entries if entry.gate is not None]
    shown = gr.State(0)
    before = running(entries, 0, [None] * len(entries))
    for timer, active in zip(every, before, strict=True):
        timer.active = active  # read when the page's config is built: the page starts with these

    def values(gate_values: Sequence) -> list:
        found = iter(gate_values)
        return [next(found) if entry.gate is not None else None for entry in entries]

    def update(index: int, gate_values: Sequence) -> list[gr.Timer]:
        return [gr.Timer(active=on) for on in running(entries, index, values(gate_values))]

    options = {"show_progress": "hidden", "queue": False, "api_visibility": "private"}
    for index, entry in enumerate(entries):
        entry.tab.select(lambda *g, index=index: [index, *update(index, g)], gates, [shown, *every], **options)
    gr.on([demo.load, *[gate.change for gate in gates]], lambda index, *g: update(index, g), [shown, *gates], every,
          **options)
