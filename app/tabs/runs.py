"""The History tab: every run with status, stage, model, dataset, duration, final loss and why a run failed; overlay loss curves,
compare configs, watch, abort, resume (a failed or aborted training run, from its latest complete checkpoint) and
(after confirmation) delete runs of this workspace."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gradio as gr
import pandas as pd

from app import history, reward_view
from app.config_compare import config_diff
from app.context import Board
from app.engine_text import reason_text
from app.i18n import L, t
from app.jobs import JobError
from app.markup import SafeMarkdown
from app.monitor import final_loss
from app.progress_view import typed_frame
from app.run_errors import STOPPED, local_error
from app.tabs.train import abort_message
from app.topbar import follow_started
from app.visible_text import reveal
from engine.runs import FINAL_STATUSES, KINDS, RunFolder

# column widths in pixels (about 1,330 in all: a wide window shows the whole table; a narrow one scrolls it sideways
# instead of breaking headers and values letter by letter, as shares of a narrow window's width did); run ids and
# dates stay on one line, a failure's reason wraps in its column
WIDTHS = {"id": "260px", "kind": "80px", "status": "95px", "queue": "65px", "stage": "60px", "model": "90px",
          "dataset": "140px", "started": "165px", "duration": "95px", "final_loss": "85px", "reason": "195px"}
COLUMNS = list(WIDTHS)


@dataclass
class RunsTab:
    empty: gr.Markdown
    table: gr.Dataframe
    selected: gr.Dropdown
    refresh_btn: gr.Button
    compare_btn: gr.Button
    watch_btn: gr.Button
    abort_btn: gr.Button
    resume_btn: gr.Button
    delete_btn: gr.Button
    confirm_box: gr.Group
    confirm_text: gr.Markdown
    confirm_btn: gr.Button
    cancel_btn: gr.Button
    message: gr.Markdown
    overlay: gr.LinePlot
    diff: gr.Dataframe
    known: gr.State
    to_delete: gr.State
    timer: gr.Timer
    reward_overlay: gr.LinePlot | None = None


def build(board: Board) -> RunsTab:
    with gr.Row():
        refresh_btn = gr.Button(L("top_refresh"), size="sm", scale=0, min_width=100)
    # shown while the workspace has no run (a table of headers alone said nothing); a translation key, so the page
    # shows it in its language, a switch included, and the refresh only shows or hides it
    empty = SafeMarkdown(L("runs_empty"), visible=False, elem_id="lf-runs-empty")
    table = gr.Dataframe(
        headers=[L(f"col_{c}") for c in COLUMNS],  # in the page's language from the first paint
        label=L("runs_table"),
        interactive=False,
        wrap=True,
        column_widths=[WIDTHS[c] for c in COLUMNS],
        max_height=420,
        show_search="search",
        elem_id="lf-runs-table",
    )
    selected = gr.Dropdown(
        choices=[],
        multiselect=True,
        label=L("runs_selected"),
        info=L("runs_selected_info"),
        elem_id="lf-runs-selected",
    )
    with gr.Row():
        compare_btn = gr.Button(L("runs_compare"), variant="primary", scale=1)
        watch_btn = gr.Button(L("runs_watch"), scale=1)
        abort_btn = gr.Button(L("runs_abort"), scale=1)
        resume_btn = gr.Button(L("runs_resume"), scale=1, elem_id="lf-runs-resume")
        delete_btn = gr.Button(L("runs_delete"), variant="stop", scale=1)
    with gr.Group(visible=False) as confirm_box:
        confirm_text = SafeMarkdown()
        with gr.Row():
            confirm_btn = gr.Button(L("runs_confirm_delete"), variant="stop")
            cancel_btn = gr.Button(L("runs_cancel"))
    message = SafeMarkdown()
    overlay = gr.LinePlot(
        None,
        x="step",
        y="loss",
        x_title=L("axis_step"),
        y_title=L("axis_loss"),
        color="run",
        color_title=" ",
        label=L("runs_overlay"),
        height=340,
        elem_classes=["lf-plot"],
        elem_id="lf-runs-overlay",
    )
    reward_overlay = gr.LinePlot(None, x="step", y="reward", color="run", color_title=" ", visible=False,
                                 label=L("runs_reward_overlay"), height=340, elem_classes=["lf-plot"])
    diff = gr.Dataframe(label=L("runs_diff"), interactive=False, wrap=True, visible=False, elem_id="lf-runs-diff")
    return RunsTab(
        empty=empty,
        table=table,
        selected=selected,
        refresh_btn=refresh_btn,
        compare_btn=compare_btn,
        watch_btn=watch_btn,
        abort_btn=abort_btn,
        resume_btn=resume_btn,
        delete_btn=delete_btn,
        confirm_box=confirm_box,
        confirm_text=confirm_text,
        confirm_btn=confirm_btn,
        cancel_btn=cancel_btn,
        message=message,
        overlay=overlay,
        diff=diff,
        known=gr.State(None),
        to_delete=gr.State([]),
        timer=gr.Timer(4.0),
        reward_overlay=reward_overlay,
    )


def table_frame(board: Board, lang: str) -> tuple[pd.DataFrame, list[str]]:
    """The runs table (translated headers and statuses) and the run ids for the picker."""

    runs = [info for info in board.jobs.list() if history.shown_in_history(info)]
    finished = {info["id"] for info in runs if info.get("status") in FINAL_STATUSES}

    def last_loss(run_id: str) -> float | None:
        if run_id in finished:  # no live monitor per finished run: its log's tail, remembered until it changes
            return final_loss(board.jobs.runs_dir / run_id)
        try:
            return board.jobs.monitor(run_id).last_loss()
        except JobError:
            return None

    rows = history.summaries(runs, board.jobs.runs_dir, last_loss)
    started = {info["id"] for info in runs if info.get("started_at")}
    codes = {info["id"]: info.get("error_code") for info in runs}
    infos = {info["id"]: info for info in runs}
    for row in rows:
        if row["status"] == "aborted" and row["id"] not in started:  # cancelled while it waited in the queue
            row["reason"] = t(lang, "runs_reason_cancelled")
        elif row["status"] == "aborted" and row["reason"] in ("", STOPPED):  # Abort (no error, or always these words)
            row["reason"] = t(lang, "runs_reason_stopped")
        elif row["reason"]:  # the engine's words (where run.json has them as data, in the page's language: a full
            # disk...), headed by their kind in the page's language
            code = codes.get(row["id"]) or ("aborted" if row["status"] == "aborted" else None)
            info = infos[row["id"]]
            local = local_error(lang, code, info.get("error_params"), info.get("error"))
            row["reason"] = reason_text(lang, code, history.reason({**info, "error": local}) if local else row["reason"])
        row["status"] = t(lang, "status_" + row["status"]) if row["status"] else ""
        row["kind"] = t(lang, "kind_" + row["kind"]) if row["kind"] in KINDS else row["kind"]
        row["queue"] = row["queue"] or ""
        row["final_loss"] = "" if row["final_loss"] is None else row["final_loss"]
    ids = [row["id"] for row in rows]
    for row in rows:  # names from run folders and configs: no hidden character reorders what the table shows
        for key in ("id", "model", "dataset", "reason"):
            row[key] = reveal(str(row[key]))
    frame = pd.DataFrame(rows, columns=COLUMNS)
    frame.columns = [t(lang, f"col_{c}") for c in COLUMNS]
    return frame, ids


def run_choices(ids: list[str]) -> list[tuple[str, str]]:
    """The run picker's choices: each id shown with its hidden characters as marks (app.visible_text)."""
    return [(reveal(i), i) for i in ids]


def overlay_frame(board: Board, run_ids: list[str]) -> pd.DataFrame:
    rows = []
    for run_id in run_ids:
        for step, loss in history.loss_points(board.jobs.runs_dir / run_id):
            rows.append({"step": step, "loss": loss, "run": reveal(run_id)})
    return typed_frame(rows, {"step": "int64", "loss": "float64", "run": "str"})


def diff_frame(board: Board, run_ids: list[str], lang: str) -> pd.DataFrame:
    folders = {run_id: RunFolder(board.jobs.runs_dir / run_id) for run_id in run_ids}
    configs = {run_id: history.read_config(folder) for run_id, folder in folders.items()}
    kinds = {run_id: str(folder.info().get("kind", "")) for run_id, folder in folders.items()}

    def not_used(kind: str) -> str:
        return t(lang, "runs_diff_not_used", kind=t(lang, "kind_" + kind) if kind in KINDS else kind)

    rows = [[reveal(str(cell)) for cell in row] for row in config_diff(configs, kinds, not_used)]
    return pd.DataFrame(rows, columns=[t(lang, "col_key"), *map(reveal, run_ids)])


def delete_runs(board: Board, run_ids: list[str], lang: str) -> str:
    done, problems = [], []
    for run_id in run_ids:
        try:
            board.jobs.delete(run_id)
            done.append(run_id)
        except JobError as err:
            problems.append(err.text(lang))
    lines = [t(lang, "runs_deleted_one" if len(done) == 1 else "runs_deleted", n=len(done))] + problems
    return "\n\n".join(lines)


def resume_runs(board: Board, run_ids: list[str], lang: str) -> tuple[str, list[str]]:
    """Resume each failed or aborted training run; the message (one line per run) and the new run ids."""
    from app.api import Automation

    auto = Automation(board)
    lines, new_ids = [], []
    for run_id in run_ids:
        try:
            new_id = auto.resume_run(run_id, lang)
        except gr.Error as err:
            lines.append(str(getattr(err, "message", err)))
            continue
        checkpoint = RunFolder(board.jobs.runs_dir / new_id).info().get("resumed_checkpoint", "")
        lines.append(t(lang, "runs_resumed", run=run_id, new=new_id, checkpoint=checkpoint))
        new_ids.append(new_id)
    return "\n\n".join(lines), new_ids


def wire(tab: RunsTab, board: Board, demo: gr.Blocks, tabs: gr.Tabs, watchers: dict[str, Any], lang: gr.State,
         follow: gr.State, opened: gr.Tab | None = None) -> None:
    """``watchers`` maps a run kind to the (tab id, watched-run state) that shows it; ``opened`` is the History tab,
    whose table is brought up to date as it is opened instead of at the timer's next tick; ``follow`` is the top bar's
    (app.topbar.TopBar.follow): a live training run this page takes up (Watch) or starts (Resume, one run), whose final
    output the checkpoint picker takes when it completes."""
    private = {"api_visibility": "private"}

    def on_refresh(known, selected, lang_code, force=False):
        frame, ids = table_frame(board, lang_code)
        snapshot = [frame.to_dict("split")["data"], lang_code]
        if snapshot == known and not force:
            return gr.skip(), gr.skip(), known, gr.skip()
        empty = gr.update(visible=not ids)
        keep = [s for s in selected or [] if s in ids]
        if keep == list(selected or []):  # nothing picked went away: leave the value alone, so a pick made while
            return frame, gr.update(choices=run_choices(ids)), snapshot, empty  # this refresh was under way is kept
        return frame, gr.update(choices=run_choices(ids), value=keep), snapshot, empty

    tab.timer.tick(
        on_refresh,
        [tab.known, tab.selected, lang],
        [tab.table, tab.selected, tab.known, tab.empty],
        show_progress="hidden",
        concurrency_limit=None,
        **private,
    )
    if opened is not None:  # a run that ended while another tab was open shows as the tab opens
        opened.select(
            on_refresh,
            [tab.known, tab.selected, lang],
            [tab.table, tab.selected, tab.known, tab.empty],
            show_progress="hidden",
            **private,
        )
    tab.refresh_btn.click(
        lambda k, s, lc: on_refresh(k, s, lc, True),
        [tab.known, tab.selected, lang],
        [tab.table, tab.selected, tab.known, tab.empty],
        **private,
    )
    gr.on(  # on load, and at once when the page's language is known or changes (headers, statuses)
        [demo.load, lang.change],
        lambda k, s, lc: on_refresh(k, s, lc, True),
        [tab.known, tab.selected, lang],
        [tab.table, tab.selected, tab.known, tab.empty],
        show_progress="hidden",
        **private,
    )

    def on_compare(selected, lang_code):
        if not selected:
            yield t(lang_code, "runs_pick_some"), gr.skip(), gr.skip(), gr.skip()
            return
        # clear the chart first: gradio keeps the colours of the runs it drew first
        yield "", None, gr.skip(), gr.update(value=None)
        frame = overlay_frame(board, selected)
        rewards = reward_view.reward_overlay(board, selected)  # GRPO/RLOO runs: compared by their reward curves
        yield (
            "",
            (frame if len(frame) else None),
            gr.update(value=diff_frame(board, selected, lang_code), visible=True),
            gr.update(value=rewards, visible=rewards is not None),
        )

    tab.compare_btn.click(
        on_compare, [tab.selected, lang], [tab.message, tab.overlay, tab.diff, tab.reward_overlay], **private
    )

    kinds = list(watchers)
    states = [watchers[k][1] for k in kinds]

    def on_watch(selected, lang_code):
        skip = [gr.skip() for _ in (*states, follow)]
        if not selected or len(selected) != 1:
            return [t(lang_code, "runs_pick_one"), gr.skip(), *skip]
        run_id = selected[0]
        info = RunFolder(board.jobs.runs_dir / run_id).info()
        kind = info.get("kind", "")
        if kind not in watchers:
            return [t(lang_code, "runs_cannot_watch", kind=kind), gr.skip(), *skip]
        values = [run_id if k == kind else gr.skip() for k in kinds]
        live = kind == "train" and info.get("status") in ("queued", "running")
        return ["", gr.Tabs(selected=watchers[kind][0]), *values, follow_started(run_id) if live else gr.skip()]

    tab.watch_btn.click(on_watch, [tab.selected, lang], [tab.message, tabs, *states, follow], **private)

    def on_abort(selected, lang_code):
        if not selected:
            return t(lang_code, "runs_pick_some")
        lines = []
        for run_id in selected:
            try:
                lines.append(abort_message(board, run_id, board.jobs.abort(run_id), lang_code))
            except JobError as err:
                lines.append(err.text(lang_code))
        return "\n\n".join(lines)

    tab.abort_btn.click(on_abort, [tab.selected, lang], tab.message, **private)

    def on_resume(selected, known, lang_code):
        nothing = [gr.skip() for _ in range(5)]
        if not selected:
            return t(lang_code, "runs_pick_some"), *nothing
        message, new_ids = resume_runs(board, list(selected), lang_code)
        if not new_ids:
            return message, *nothing
        frame, ids = table_frame(board, lang_code)
        snapshot = [frame.to_dict("split")["data"], lang_code]
        followed = follow_started(new_ids[0]) if len(new_ids) == 1 else gr.skip()
        return (message, frame, gr.update(choices=run_choices(ids), value=new_ids), snapshot, gr.update(visible=False),
                followed)

    tab.resume_btn.click(
        on_resume, [tab.selected, tab.known, lang],
        [tab.message, tab.table, tab.selected, tab.known, tab.empty, follow], **private
    )

    def on_delete(selected, lang_code):
        if not selected:
            return t(lang_code, "runs_pick_some"), gr.skip(), gr.skip(), []
        text = t(lang_code, "runs_confirm_text_one" if len(selected) == 1 else "runs_confirm_text", n=len(selected), runs=", ".join(selected), folder=board.jobs.runs_dir)
        return "", text, gr.update(visible=True), list(selected)

    tab.delete_btn.click(
        on_delete, [tab.selected, lang], [tab.message, tab.confirm_text, tab.confirm_box, tab.to_delete], **private
    )

    def on_confirm(to_delete, known, lang_code):
        message = delete_runs(board, to_delete or [], lang_code)
        frame, ids, snapshot, empty = on_refresh(known, [], lang_code, True)
        return message, gr.update(visible=False), frame, ids, snapshot, [], empty

    tab.confirm_btn.click(
        on_confirm,
        [tab.to_delete, tab.known, lang],
        [tab.message, tab.confirm_box, tab.table, tab.selected, tab.known, tab.to_delete, tab.empty],
        **private,
    )
    tab.cancel_btn.click(lambda: (gr.update(visible=False), []), None, [tab.confirm_box, tab.to_delete], **private)
