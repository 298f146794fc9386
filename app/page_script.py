"""Script the board's page runs once it has loaded (``Blocks.launch(js=...)``).

Copying: :func:`app.inert_text.inert` puts a zero-width space after a ``<`` or ``]`` in quoted text so that Markdown
shows it as text; a copy (Ctrl+C, the context menu) out of the page drops exactly those, so what is pasted is what
was shown. Zero-width spaces that are part of the text itself are left (the board shows those as visible marks).
"""

from __future__ import annotations

COPY_JS = r"""
  document.addEventListener('copy', (event) => {
    const selection = document.getSelection();
    if (!selection || selection.rangeCount === 0 || !event.clipboardData) { return; }
    const text = selection.toString();
    if (!text.includes('\u200b')) { return; }
    const holder = document.createElement('div');
    for (let i = 0; i < selection.rangeCount; i++) { holder.appendChild(selection.getRangeAt(i).cloneContents()); }
    event.clipboardData.setData('text/plain', text.replace(/([<\]])\u200b/g, '$1'));
    event.clipboardData.setData('text/html', holder.innerHTML.replace(/(&lt;|\])\u200b/g, '$1'));
    event.preventDefault();
  });
"""


def page_js() -> str:
    """The function the page runs once after loading (idempotent if gradio runs it again)."""
    return "() => {\n  if (window.lfBoardPage) { return; }\n  window.lfBoardPage = true;\n" + COPY_JS + "}\n"
