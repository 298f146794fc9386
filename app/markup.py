"""The board's message boxes: Markdown that shows quoted text as text (:mod:`app.inert_text`)."""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.inert_text import ZWSP, inert  # noqa: F401  (ZWSP: for callers that look for it)
from app.visible_text import reveal


class SafeMarkdown(gr.Markdown):
    """``gr.Markdown`` whose values (given at build or set by an event) are passed through :func:`inert` (after
    :func:`app.visible_text.reveal`: a hidden character in a quoted name shows as a mark);
    translations given as ``gr.I18n`` keys (the board's own texts) are shown as gradio shows them.

    A subclass, so that it stays one when gradio rebuilds a component for an update of its properties (it calls
    ``block.__class__``); gradio keeps a stub of it in ``markup.pyi``, as for every component class."""

    def get_block_name(self) -> str:  # the page's own Markdown component draws it
        return "markdown"

    def postprocess(self, value: Any) -> Any:
        return super().postprocess(inert(reveal(value)) if isinstance(value, str) else value)
