"""The History tab's "Profile" panel: the per-module timing table of a finished run (``profile_modules``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app.context import Board
from app.i18n import L, t
from app.markup import SafeMarkdown
from engine.train.profile_files import read_profile

COLUMNS = ["module", "calls", "forward_ms", "backward_ms", "total_ms", "share"]


@dataclass
class ProfilePanel:
    run: gr.Dropdown
    refresh_btn: gr.Button
    summary: gr.Markdown
    table: gr.Dataframe


def build(board: Board) -> ProfilePanel:
    with gr.Accordion(L("profile_title"), open=False, elem_id="lf-profile"):
        with gr.Row():
            run = gr.Dropdown(choices=[], label=L("profile_run"), info=L("profile_run_info"), scale=4,
                              elem_id="lf-profile-run")
            refresh_btn = gr.Button(L("top_refresh"), size="sm", scale=0, min_width=100)
        summary = SafeMarkdown()
        table = gr.Dataframe(headers=[L(f"col_{c}") for c in COLUMNS], interactive=False, wrap=True, max_height=420,
                             elem_id="lf-profile-table")
    return ProfilePanel(run=run, refresh_btn=refresh_btn, summary=summary, table=table)


def profiled_runs(runs_dir: Path, runs: list[dict[str, Any]]) -> list[str]:
    """Ids of the runs (newest first) whose folder holds a profile."""
    return [r["id"] for r in runs if r.get("id") and read_profile(runs_dir / r["id"]) is not None]


def _number(value: Any) -> Any:
    """A number of profile.json as written; '?' for anything else (a file from elsewhere)."""
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else "?"


def _text(value: Any) -> str:
    return value[:100] if isinstance(value, str) else "?"


def _percent(share: Any) -> str:
    number = _number(share)
    return f"{100 * number:.1f}%" if number != "?" else "?"


def profile_view(runs_dir: Path, run_id: str | None, lang: str | None) -> tuple[str, pd.DataFrame]:
    """(summary line, table) of one run's profile; a hint and an empty table when there is none."""
    headers = [t(lang, f"col_{c}") for c in COLUMNS]  # in the page's language
    empty = pd.DataFrame(columns=headers)
    if not run_id:
        return t(lang, "profile_empty"), empty
    report = read_profile(runs_dir / run_id)
    if report is None:
        return t(lang, "profile_missing", run=run_id), empty
    rows = [{**r, "share": _percent(r.get("share", 0))} for r in report["modules"]]
    summary = t(lang, "profile_summary_one" if report.get("steps") == 1 else "profile_summary",
                steps=_number(report.get("steps", 0)), device=_text(report.get("device")),
                clock=_text(report.get("clock")), step_ms=_number(report.get("step_ms", 0)))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.columns = headers
    return summary, frame


def wire(panel: ProfilePanel, board: Board, demo: gr.Blocks, lang: gr.State) -> None:
    private = {"api_visibility": "private"}

    def on_refresh(current, lang_code):
        # ``current`` is the pick as it was when this was sent: answered late (a language switch on a busy board), it
        # must not put it back over one made meanwhile, so a pick still listed is left alone
        ids = profiled_runs(board.jobs.runs_dir, board.jobs.list())
        if current in ids:
            return gr.update(choices=ids)
        return gr.update(choices=ids, value=ids[0] if ids else None)

    def on_view(run, lang_code):  # the pick as it is once the list is up to date
        return profile_view(board.jobs.runs_dir, run, lang_code)

    view = {"fn": on_view, "inputs": [panel.run, lang], "outputs": [panel.summary, panel.table],
            "show_progress": "hidden", **private}
    panel.refresh_btn.click(on_refresh, [panel.run, lang], panel.run, **private).then(**view)
    # and again when the page's language is known (composed on load, a Chinese page kept its hint in English)
    gr.on([demo.load, lang.change], on_refresh, [panel.run, lang], panel.run, show_progress="hidden",
          **private).then(**view)
    panel.run.input(**view)
