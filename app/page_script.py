"""Script the board's page runs once it has loaded (``Blocks.launch(js=...)``).

Copying: :func:`app.inert_text.inert` puts a zero-width space after a ``<``, ``]``, ``://``, ``www.`` or ``@`` in
quoted text so that Markdown shows it as text; a copy (Ctrl+C, the context menu) out of the page drops exactly those,
so what is pasted is what was shown. Zero-width spaces that are part of the text itself are left (the board shows those as visible marks).

gradio's own chrome: gradio 6.31 writes some of its components' tooltips, placeholders and screen-reader labels in
English whatever the page's language (the table search box's "Search...", "Copy table data", "Fullscreen", a code
box's "Copy"...): they are not in its i18n files, and no component property sets them. :data:`CHROME` lists them
with the board's locale key for each (``chrome_<name>``); the page replaces them in the ``placeholder``, ``title`` and
``aria-label`` attributes as gradio draws them, and puts them back when the language changes
(:data:`app.i18n.SET_LOCALE_JS` tells the page the language in effect).

Whole steps on the charts' step axes: every ``.lf-plot`` chart (loss, learning rate, rewards, History's overlays) has
training steps on its x axis, and vega puts its ticks at "nice" values: over a run of a few steps, at 0.2 or 0.5
steps ("1.0 1.2 1.4 ..."), which are no steps at all. gradio passes no tick settings through (only a d3 number
format, which would print 1.5 as "2", beside the real 2), so the page hides the x axis' labels, ticks and grid lines
that fall between whole steps and writes the others as whole numbers ("2", not "2.0"), each time vega draws.
"""

from __future__ import annotations

import json

from app.i18n import LANGUAGES, t

CHROME = {
    "Search...": "search",
    "Filter...": "filter",
    "Enter text to search the table": "search_title",
    "Enter text to filter the table": "filter_title",
    "Copy table data": "copy_table",
    "Copied to clipboard": "copied_clipboard",
    "Fullscreen": "fullscreen",
    "Exit fullscreen": "exit_fullscreen",
    "Copy": "copy",
    "Copied": "copied",
    "Copy message": "copy_message",
    "Copy conversation": "copy_conversation",
    "Download": "download",
    "Clear": "clear",
    "Retry": "retry",
    "Undo": "undo",
    "Edit": "edit",
    "Like": "like",
    "Dislike": "dislike",
    "Reset to default value": "reset",
    "Click to upload or drop files": "upload_click",
    "Upload a file": "upload_file",
    "Submit": "submit",
    "More tabs": "more_tabs",
    "Table actions": "table_actions",
    "Open cell menu": "cell_menu",
    "File upload": "file_upload",
    "Empty value": "empty_value",
    "chatbot conversation": "conversation",
    "Multimedia input field": "multimodal_input",
    "Fold line": "fold_line",
    "Unfold line": "unfold_line",
    "Gradio footer navigation": "footer_navigation",
}
"""gradio's hard-coded English chrome string -> the name of its locale key (``chrome_<name>``)."""


def chrome_table() -> dict[str, dict[str, str]]:
    """{language: {gradio's English string: the string in that language}}."""
    return {lang: {english: t(lang, "chrome_" + name) for english, name in CHROME.items()} for lang in LANGUAGES}


COPY_JS = r"""
  // the zero-width spaces app.inert_text.inert puts after these (and only those) are dropped
  const MARKS = /(<|\]|:\/\/|www\.|@)\u200b/gi;
  const HTML_MARKS = /(&lt;|\]|:\/\/|www\.|@)\u200b/gi;
  document.addEventListener('copy', (event) => {
    const selection = document.getSelection();
    if (!selection || selection.rangeCount === 0 || !event.clipboardData) { return; }
    const text = selection.toString();
    if (!text.includes('\u200b')) { return; }
    const holder = document.createElement('div');
    for (let i = 0; i < selection.rangeCount; i++) { holder.appendChild(selection.getRangeAt(i).cloneContents()); }
    event.clipboardData.setData('text/plain', text.replace(MARKS, '$1'));
    event.clipboardData.setData('text/html', holder.innerHTML.replace(HTML_MARKS, '$1'));
    event.preventDefault();
  });
"""

CHROME_JS = r"""
  const chrome = __CHROME__;
  const english = {};  // any language's string -> gradio's English one
  for (const table of Object.values(chrome)) {
    for (const [en, shown] of Object.entries(table)) { english[shown] = en; english[en] = en; }
  }
  const ATTRS = ['placeholder', 'title', 'aria-label'];
  const fix = (el) => {
    const table = chrome[window.lfBoardLang] || {};
    for (const attr of ATTRS) {
      const now = el.getAttribute(attr);
      if (now === null || !(now in english)) { continue; }
      const want = table[english[now]] || english[now];
      if (now !== want) { el.setAttribute(attr, want); }
    }
  };
  const sweep = (root) => {
    if (root.nodeType !== 1) { return; }
    fix(root);
    for (const el of root.querySelectorAll('[placeholder],[title],[aria-label]')) { fix(el); }
  };
  window.lfBoardLocalize = () => sweep(document.body);
  new MutationObserver((records) => {
    for (const record of records) {
      if (record.type === 'attributes') { fix(record.target); }
      else { for (const node of record.addedNodes) { sweep(node); } }
    }
  }).observe(document.body, { subtree: true, childList: true, attributes: true, attributeFilter: ATTRS });
  sweep(document.body);
"""


STEPS_JS = r"""
  // whole steps only on the charts' step axes (see the module's docstring)
  const stepNumber = (text) => Number(text.replace(/,/g, ''));
  const wholeSteps = (plot) => {
    const axis = plot.querySelector('.role-axis[aria-label^="X-axis"]');
    if (!axis) { return; }
    const labels = [...axis.querySelectorAll('.role-axis-label text')];
    const ticks = [...axis.querySelectorAll('.role-axis-tick line')];
    const grid = [...plot.querySelectorAll('.role-axis-grid')].map((g) => [...g.querySelectorAll('line')])
      .find((lines) => lines.length === labels.length && lines.every((l) => l.getAttribute('x2') === '0')) || [];
    labels.forEach((label, i) => {
      const value = stepNumber(label.textContent);
      if (Number.isNaN(value)) { return; }
      const whole = Number.isInteger(value);
      for (const el of [label, ticks[i], grid[i]]) {
        if (el && el.style.display !== (whole ? '' : 'none')) { el.style.display = whole ? '' : 'none'; }
      }
      const text = label.textContent.replace(/\.0+$/, '');
      if (whole && text !== label.textContent) { label.textContent = text; }
    });
  };
  const pending = new Set();
  const redraw = () => { for (const plot of pending) { wholeSteps(plot); } pending.clear(); };
  new MutationObserver((records) => {
    for (const record of records) {
      const el = record.target.nodeType === 1 ? record.target : record.target.parentElement;
      const plot = el && el.closest('.lf-plot');
      if (plot) {
        if (!pending.size) { requestAnimationFrame(redraw); }
        pending.add(plot);
      }
    }
  }).observe(document.body, { subtree: true, childList: true, characterData: true });
"""


def page_js() -> str:
    """The function the page runs once after loading (idempotent if gradio runs it again)."""
    chrome = CHROME_JS.replace("__CHROME__", json.dumps(chrome_table(), ensure_ascii=False))
    return "() => {\n  if (window.lfBoardPage) { return; }\n  window.lfBoardPage = true;\n" + COPY_JS + chrome + STEPS_JS + "}\n"
