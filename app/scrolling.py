"""Keep a log box scrolled to its end, so the newest lines (and "Done. Outputs in ...") are in view."""

from __future__ import annotations

import gradio as gr

_SCROLL_JS = """
() => {
  requestAnimationFrame(() => {
    for (const box of document.querySelectorAll('.lf-log textarea')) {
      const atEnd = box.dataset.lfScrolled !== 'up';
      if (atEnd) { box.scrollTop = box.scrollHeight; }
      if (!box.dataset.lfWatch) {
        box.dataset.lfWatch = '1';
        box.addEventListener('scroll', () => {
          box.dataset.lfScrolled = box.scrollTop + box.clientHeight >= box.scrollHeight - 8 ? 'end' : 'up';
        });
      }
    }
  });
}
"""


def follow_end(box: gr.Textbox) -> None:
    """Scroll ``box`` (which must carry the ``lf-log`` class) to its end whenever its value changes, unless the
    reader has scrolled up to read earlier lines."""
    box.change(None, None, None, js=_SCROLL_JS, api_visibility="private", show_progress="hidden")
