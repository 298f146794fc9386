"""The status card between a Start click and the run it starts.

Train's, Evaluate's and Export's status cards follow the run a tab watches on the tab's timer. Start's handler checks
the form and queues the run, which takes a moment (more on a busy machine), and the card went on showing what it showed
before:
"No run yet" (or the previous run, as if it were the new one) until the first tick after that handler. Now a click
shows a "starting" card at once, the tab's ticks leave it alone meanwhile (the tab keeps :data:`STARTING` as the
marker of what it shows), and the card of the run started (or, when Start started nothing, of the run watched
before) replaces it as soon as Start's handler has answered.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.i18n import t

STARTING = "starting"


def starting(lang: str) -> tuple[str, list[str]]:
    """(the card, the marker the tab keeps) as Start is pressed."""
    text = html.escape(t(lang, "progress_start_pressed"))
    return f'<div class="lf-status lf-empty">{text}</div>', [STARTING, lang]


def is_starting(seen: Any) -> bool:
    """Whether the tab's card is :func:`starting`'s: its ticks leave it alone until Start's handler has answered."""
    return isinstance(seen, list) and seen[:1] == [STARTING]


def wire(tab: Any, lang: gr.Component, middle: list[Any], on_tick: Callable[..., Any], on_start: Callable[..., Any],
         start_inputs: list[Any], start_outputs: list[Any]) -> Any:
    """A tab's status ticks and its Start click, as Train, Evaluate and Export have them. ``tab`` has ``timer``,
    ``start_btn``, ``status``, ``seen``, ``watched``, ``message`` and ``started``; ``on_tick(run_id, seen, lang,
    message, started)`` answers ``[status, *middle, seen, message, started]``, on the tab's timer and on a language
    switch (so a card never shows the board's default language first), except while the card is :func:`starting`'s.
    A click shows :func:`starting` at once, runs ``on_start`` (``start_inputs`` -> ``start_outputs``), then the tick
    over the "starting" card: the started run's card, or the one watched before. Returns the click's last event, for
    more steps after it."""
    private: dict[str, Any] = {"api_visibility": "private"}
    outputs = [tab.status, *middle, tab.seen, tab.message, tab.started]

    def tick(run_id: str, seen: Any, *rest: Any):
        if is_starting(seen):  # Start's handler has not answered yet: the card says "starting"
            return (gr.skip(),) * len(outputs)
        return on_tick(run_id, seen, *rest)

    tick_io = {
        "inputs": [tab.watched, tab.seen, lang, tab.message, tab.started],
        "outputs": outputs,
        "show_progress": "hidden",
        "concurrency_limit": None,
        **private,
    }
    gr.on([tab.timer.tick, lang.change], tick, **tick_io)

    def after_start(run_id: str, seen: Any, *rest: Any):
        return on_tick(run_id, None, *rest)

    return tab.start_btn.click(starting, lang, [tab.status, tab.seen], queue=False, show_progress="hidden",
                               **private).then(on_start, start_inputs, start_outputs, **private).then(after_start,
                                                                                                      **tick_io)
