"""Board messages as Markdown that shows text, never markup, from whatever the message quotes.

The board's messages are Markdown built from templates (``locales/*.json``) with values filled in, and many values
come from outside: a dataset_info.json's names and columns, an uploaded file's column names, a run folder's names
and files, an engine error quoting a config. gradio sanitizes what Markdown renders, but keeps ``<img>``, ``<a>``,
``<form>`` and Markdown images and links: a quoted value could load a remote image (and tell a third party that the
page was opened), or show a link or a form that looks like the board's own. A backtick in a value ends the code
span a template puts it in, so quoting is no guard.

:func:`inert` makes such text show as it is written: a zero-width space after each ``<`` (no HTML tag, comment or
autolink can start there) and after each ``]`` (no inline link or image, reference link or link definition can
form). Everything else of Markdown (code spans, bold, lists) still renders, and the text reads the same.
:class:`SafeMarkdown` is a ``gr.Markdown`` passing every value through :func:`inert`; the board's messages use it.
The board's page also carries a Content-Security-Policy (:class:`app.security.ContentPolicyMiddleware`) that keeps
every sink (the chat's model replies, error pop-ups) from loading anything from elsewhere.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

ZWSP = "\u200b"


def inert(text: str) -> str:
    """``text`` with no HTML, link or image markup left for Markdown to render (see the module's docstring)."""
    return text.replace("<", "<" + ZWSP).replace("]", "]" + ZWSP)

from gradio.events import Dependency

class SafeMarkdown(gr.Markdown):
    """``gr.Markdown`` whose values (given at build or set by an event) are passed through :func:`inert`;
    translations given as ``gr.I18n`` keys (the board's own texts) are shown as gradio shows them.

    A subclass, so that it stays one when gradio rebuilds a component for an update of its properties (it calls
    ``block.__class__``); gradio keeps a stub of it in ``markup.pyi``, as for every component class."""

    def get_block_name(self) -> str:  # the page's own Markdown component draws it
        return "markdown"

    def postprocess(self, value: Any) -> Any:
        return super().postprocess(inert(value) if isinstance(value, str) else value)
    from typing import Callable, Literal, Sequence, Any, TYPE_CHECKING
    from gradio.blocks import Block
    if TYPE_CHECKING:
        from gradio.components import Timer
        from gradio.components.base import Component