"""What the page costs the browser as it loads (app.ui.quiet_progress): gradio's page keeps a loading status for every
component an event outputs to and sends them all again on every status message of every event, so an event that
shows no progress records none, and the Train form's page load (173 fields) leaves no status behind."""

from __future__ import annotations


def _dependencies(board) -> list[dict]:
    from app.ui import build_ui

    return build_ui(board).get_config_file()["dependencies"]


def test_events_that_show_no_progress_keep_no_loading_status_on_their_outputs(board):
    deps = _dependencies(board)
    hidden = [d for d in deps if d["show_progress"] == "hidden"]
    assert len(hidden) > 40  # the load-time, timer and background events
    assert all(d["show_progress_on"] == [] for d in hidden)
    shown = [d for d in deps if d["show_progress"] != "hidden"]
    assert shown and all(d["show_progress_on"] is None for d in shown)  # Start, Chat's send... keep theirs
    form_load = [d for d in deps if any(t[1] == "load" for t in d["targets"]) and len(d["outputs"]) > 100]
    assert len(form_load) == 1 and form_load[0]["show_progress_on"] == []
