"""The training run the top bar's checkpoint picker follows, kept across a reload of the page.

The picker takes the final adapter of a training run this page started (or took up) when it completes
(:func:`app.topbar.follow_run`). That following lived in a ``gr.State`` only, so a reload of the page during the run
lost it: the run completed and the picker stayed on the base model, and Chat, Evaluate and Export used that. The page
now keeps it in its file (``pages/<id>.json`` of :mod:`app.page_memory`, under :data:`KEY`) at each change, and brings
it back as the reloaded page learns its id: a run still going is followed again; a run whose output the picker had
taken is shown in the picker again, with its line (the picker itself is not kept across a reload otherwise). A kept
run that no longer exists, or a following the user ended by picking a checkpoint, is not brought back.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import gradio as gr

from app.context import Board
from app.jobs import JobError
from app.page_memory import PageSlots, TooBig, memory, valid_page_id

logger = logging.getLogger(__name__)

KEY = "follow"


def valid_follow(board: Board, follow: Any) -> dict[str, Any] | None:
    """``follow`` as :attr:`app.topbar.TopBar.follow` holds it, when its run is a run of the workspace; else None."""
    if not isinstance(follow, dict) or not isinstance(follow.get("set"), bool):
        return None
    try:
        board.jobs.folder(follow.get("run"))
    except JobError:
        return None
    return {"run": follow["run"], "set": follow["set"]}


def save_follow(board: Board, page_id: Any, follow: Any) -> None:
    """Keep what the picker follows now (None: nothing, once the user picked a checkpoint or the run ended)."""
    if not valid_page_id(page_id):
        return
    try:
        memory(board).save(page_id, KEY, valid_follow(board, follow))
    except TooBig as err:
        logger.warning("not keeping the run the checkpoint picker follows: %s", err)


def restore_follow(board: Board, page_id: Any) -> tuple[Any, Any]:
    """(the follow state, the picker's value) the page kept, each a skip where there is nothing to bring back: the
    picker is set again only where it had taken the run's output."""
    follow = valid_follow(board, memory(board).read(page_id).get(KEY)) if valid_page_id(page_id) else None
    if follow is None:
        return gr.skip(), gr.skip()
    return follow, str(Path(board.workspace.runs_dir) / follow["run"]) if follow["set"] else gr.skip()


def wire(slots: PageSlots, board: Board, follow: gr.State, checkpoint: gr.Dropdown) -> None:
    """Bring the following back as the page learns its id; keep each change of it."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden", "queue": False}
    slots.page_id.change(lambda page_id: restore_follow(board, page_id), slots.page_id, [follow, checkpoint],
                         **private)
    follow.change(lambda page_id, value: save_follow(board, page_id, value), [slots.page_id, follow], None,
                  trigger_mode="always_last", **private)
