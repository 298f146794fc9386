"""Status lines wait for the page's language.

A page's language reaches the server through the hidden ``lang`` textbox, which the page fills once it has loaded
(app.topbar: the saved choice or the browser's language). Until then the textbox is empty. A page that gradio
loads again (a board restart under a page left open reconnects it) runs its timers from the first second, while its
language is still on its way: a timer's status line composed then would show in English for as long as that takes
(10-30 s on a busy board). :func:`gate_ticks` makes every timer-driven handler that reads ``lang`` leave its
outputs as they are while the language is unknown; the language's arrival (``lang.change``) composes them.
"""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

LANG_UNKNOWN = ""
"""The ``lang`` textbox's value before the page has set its language."""


def gate_ticks(demo: gr.Blocks, lang: gr.components.Component) -> int:
    """Wrap each handler of ``demo`` that a timer triggers and that reads ``lang``; the number wrapped."""
    timers = {block._id for block in demo.blocks.values() if isinstance(block, gr.Timer)}
    wrapped = 0
    for block_fn in demo.fns.values():
        fn = block_fn.fn
        if fn is None or lang not in block_fn.inputs or not any(t in timers for t, _ in block_fn.targets):
            continue
        block_fn.fn = _gated(fn, block_fn.inputs.index(lang), len(block_fn.outputs))
        wrapped += 1
    return wrapped


def _gated(fn: Any, index: int, outputs: int) -> Any:
    @functools.wraps(fn)
    def gated(*args: Any) -> Any:
        if index < len(args) and args[index] == LANG_UNKNOWN:
            skips = tuple(gr.skip() for _ in range(outputs))
            return skips[0] if outputs == 1 else skips
        return fn(*args)

    return gated
