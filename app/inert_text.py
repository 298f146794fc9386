"""Text that Markdown shows as written, never as markup: the board's messages quote values from outside.

The board's messages are Markdown built from templates (``locales/*.json``) with values filled in, and many values
come from outside: a dataset_info.json's names and columns, an uploaded file's column names, a run folder's names
and files, an engine error quoting a config. gradio sanitizes what Markdown renders, but keeps ``<img>``, ``<a>``,
``<form>`` and Markdown images and links: a quoted value could load a remote image (and tell a third party that the
page was opened), or show a link or a form that looks like the board's own. A backtick in a value ends the code
span a template puts it in, so quoting is no guard.

:func:`inert` makes such text show as it is written: a zero-width space after each ``<`` that something follows (no
HTML tag, comment or autolink can start there), after each ``]`` followed by ``(``, ``[`` or ``:`` (no inline
link or image, reference link or link definition can form), and after the ``://``, ``www.`` or ``@`` of a bare web
or e-mail address (which gradio's Markdown would otherwise turn into a link). A ``<`` before a space or the end of the text (``loss
< 2``) and any other ``]`` (``[demo]``, ``a[0]``) start no markup and are left alone, so most messages carry no
zero-width space at all. Everything else of Markdown (code spans, bold, lists) still renders, and the text reads the
same. The page drops the zero-width spaces this inserts from whatever a user copies (:mod:`app.page_script`).
:class:`app.markup.SafeMarkdown` is a ``gr.Markdown`` passing every value through :func:`inert`; the board's messages use it.
The board's page also carries a Content-Security-Policy (:class:`app.security.ContentPolicyMiddleware`) that keeps
every sink (the chat's model replies, error pop-ups) from loading anything from elsewhere.
"""

from __future__ import annotations

import re

ZWSP = "\u200b"

# `<` before anything but whitespace or the end (a tag, comment, autolink or e-mail autolink could start there);
# `]` before `(` (inline link or image), `[` (reference link) or `:` (link definition); and the places where GitHub's
# bare-address links start: `://` and `www.` before the host, `@` before an e-mail address's domain
_MARKUP_START = re.compile(r"<(?=\S)|\](?=[(\[:])|://(?=\w)|\bwww\.(?=\w)|(?<=\w)@(?=\w)", re.IGNORECASE)


def inert(text: str) -> str:
    """``text`` with no HTML, link or image markup left for Markdown to render (see the module's docstring)."""
    return _MARKUP_START.sub(lambda m: m.group(0) + ZWSP, text)
