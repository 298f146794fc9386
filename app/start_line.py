"""The line under a tab's Start button follows the run it names.

Train's, Evaluate's and Export's Start answer with a line under the button: "Run `x` started." (an export's: "Export
`x` started; the model goes to PATH.") or "Run `x` is queued (position 1); it starts when the device is free.". It stayed as written: "queued" long after the run had started, "started"
after it had ended, and in the language of the moment it was written after a switch. The tab's tick (which also runs
on a language switch) now writes it again for the run's state: queued (with its place), started while it runs, and
nothing once it ended, where the status panel beside it says how. The tab keeps what it wrote (``tracked``); a line
that another message replaced since (Abort's, Save's) is no longer followed.
"""

from __future__ import annotations

from typing import Any

import gradio as gr

from app.context import Board
from app.i18n import t
from app.inert_text import inert
from app.jobs import JobError
from app.visible_text import reveal


def start_line(board: Board, run_id: str, lang: str) -> str | None:
    """The line for ``run_id`` as it is now, in ``lang``: queued with its place, started while it runs, "" once it
    ended (or its folder is gone); None where that is not known (queued, but not in this board's queue: the line is
    left as it is)."""
    try:
        info = board.jobs.folder(run_id).info()
    except JobError:
        return ""
    status = info.get("status")
    if status == "queued":
        position = board.jobs.queue_position(run_id)
        return t(lang, "train_queued", run=run_id, position=position) if position else None
    if status == "running" and info.get("kind") == "export" and info.get("export_dir"):  # where the model goes
        return t(lang, "export_started", run=run_id, path=str(info["export_dir"]))
    if status == "running":
        return t(lang, "train_started", run=run_id)
    return ""


def track(message: str, run_id: str | None) -> Any:
    """What a tab keeps of the line its Start just wrote: the run and the text; None where Start started nothing,
    or its line carries a note after it (a form that could not be kept: "\\n\\n" and the reason), which stays as
    written."""
    if not run_id or "\n\n" in message:
        return None
    return {"run": run_id, "text": message}


def follow(board: Board, tracked: Any, message: Any, lang: str) -> tuple[Any, Any]:
    """(the message, what the tab keeps): the line again for the run's state and ``lang`` where the message still
    shows the line Start wrote (``tracked``, see :func:`track`), each a skip where nothing changed."""
    if not isinstance(tracked, dict) or not tracked.get("run"):
        return gr.skip(), gr.skip()
    text = str(tracked.get("text", ""))
    if message not in (text, inert(reveal(text))):  # the page holds the text as shown (app.markup.SafeMarkdown)
        return gr.skip(), None
    line = start_line(board, str(tracked["run"]), lang)
    if line is None or line == text:
        return gr.skip(), gr.skip()
    return line, ({"run": tracked["run"], "text": line} if line else None)
