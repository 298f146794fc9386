"""The script that gives each browser tab its page id (``sessionStorage``), for :mod:`app.page_memory`.

Each tab keeps its id in ``sessionStorage``, which survives a reload and is not shared with other tabs, except that
the browser's "Duplicate tab" copies it: a live tab holds a Web Lock named after its id (or, where the browser has no
locks, answers on a BroadcastChannel), and a tab that finds its id held takes a new one, which starts as a copy of the
original's state.
"""

from __future__ import annotations

STORAGE_KEY = "lfboard-page"
CHANNEL = "lfboard-page-ids"
LOCK_PREFIX = "lfboard-page-"
CLAIM_MS = 1500

PAGE_ID_JS = """async () => {
  if (window.lfBoardPageId) { return ""; }  // (gradio ran the load again: the same document)
  const ok = /^[A-Za-z0-9_-]{16,64}$/;
  let id = null, origin = "";
  try { id = window.sessionStorage.getItem("__KEY__"); } catch (err) { return ""; }
  // A tab duplicated by the browser starts with a copy of its original's sessionStorage, id included. A live tab
  // holds a lock named by its id (released as its document goes: a reload finds it free), or, where the browser
  // has no locks (a page not served over https or from localhost), answers on a channel when asked (a busy tab
  // took up to 2.6 s). A duplicate takes an id of its own, which starts as a copy of the original's.
  const navigation = (performance.getEntriesByType("navigation")[0] || {}).type;
  if (id && ok.test(id) && navigation !== "reload") {
    let held = false;
    if (navigator.locks) {
      const state = await navigator.locks.query();
      held = (state.held || []).some((lock) => lock.name === "__LOCK__" + id);
    } else if (window.BroadcastChannel) {
      held = await new Promise((resolve) => {
        const probe = new BroadcastChannel("__CHANNEL__");
        const done = (answer) => { probe.close(); resolve(answer); };
        probe.onmessage = (event) => { if (event.data && event.data.holds === id) { done(true); } };
        probe.postMessage({ asks: id });
        setTimeout(() => done(false), __CLAIM_MS__);
      });
    }
    if (held) { origin = id; id = null; }
  }
  if (!id || !ok.test(id)) {
    const bytes = new Uint8Array(16);
    window.crypto.getRandomValues(bytes);
    id = Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
    try { window.sessionStorage.setItem("__KEY__", id); } catch (err) { return ""; }
  }
  window.lfBoardPageId = id;
  if (navigator.locks) {  // held while this document lives
    navigator.locks.request("__LOCK__" + id, () => new Promise(() => {}));
  } else if (window.BroadcastChannel) {
    const channel = new BroadcastChannel("__CHANNEL__");
    channel.onmessage = (event) => {
      if (event.data && event.data.asks === id) { channel.postMessage({ holds: id }); }
    };
    window.lfBoardPageChannel = channel;
  }
  return origin;
}""".replace("__KEY__", STORAGE_KEY).replace("__CHANNEL__", CHANNEL).replace("__LOCK__", LOCK_PREFIX).replace(
    "__CLAIM_MS__", str(CLAIM_MS))
"""Runs in the page as it loads: makes this tab's id (once per tab; none where the browser keeps no sessionStorage)
and returns the id of the tab this one is a duplicate of ("" for none). A duplicated tab (the browser's "Duplicate
tab" copies sessionStorage) is told apart from a reload by whether a live tab holds the id."""

PAGE_ID_THEN_JS = "() => window.lfBoardPageId || ''"
"""Then the tab's id (a step of its own: the handlers its change starts read the origin already set)."""
