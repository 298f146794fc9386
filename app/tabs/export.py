"""The Export tab: merge the picked adapter into a standalone model in a subprocess, then show the proof.

The engine's export reloads the saved folder and compares its logits with the merged model's; the tab shows
where the model went, its size and that check.
"""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from app import forms, progress_view, start_card, start_line
from app.context import Board
from app.engine_text import form_problems_text
from app.i18n import L, t
from app.jobs import JobError
from app.markup import SafeMarkdown
from app.scrolling import follow_end
from app.tabs.train import abort_run
from app.topbar import TopBar, top_values
from app.widgets import collect, empty_problems, make_widget


@dataclass
class ExportTab:
    export_dir: gr.Textbox
    start_btn: gr.Button
    abort_btn: gr.Button
    message: gr.Markdown
    status: gr.HTML
    result: gr.HTML
    error: gr.Textbox
    log: gr.Textbox
    watched: gr.BrowserState
    seen: gr.State
    started: gr.State  # the line Start wrote under it, followed (app.start_line)
    timer: gr.Timer
    keys: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)


def build(board: Board) -> ExportTab:
    fields: dict[str, Any] = {}
    export_dir = gr.Textbox(
        label=L("export_dir"), info=L("export_dir_info"), placeholder=str(board.workspace.exports_dir)
    )
    with gr.Row():
        for key in forms.EXPORT_KEYS:
            fields[key] = make_widget(key, {"export_size": 1}.get(key), tab="export")
    with gr.Row():
        start_btn = gr.Button(L("export_start"), variant="primary", elem_id="lf-export-start")
        abort_btn = gr.Button(L("job_abort"), variant="stop")
    message = SafeMarkdown(elem_id="lf-export-message")
    status = gr.HTML(progress_view.first_card(board.default_lang), js_on_load=None, elem_id="lf-export-status")
    result = gr.HTML(js_on_load=None)
    error = gr.Textbox(label=L("train_error"), lines=8, visible=False, elem_classes=["lf-error"])
    log = gr.Textbox(label=L("train_log"), lines=8, max_lines=8, autoscroll=True, interactive=False,
                     elem_id="lf-export-log", elem_classes=["lf-log"])
    return ExportTab(
        export_dir=export_dir,
        start_btn=start_btn,
        abort_btn=abort_btn,
        message=message,
        status=status,
        result=result,
        error=error,
        log=log,
        watched=gr.BrowserState("", storage_key="lfboard-export-run", secret=board.workspace.secret()),
        seen=gr.State(None),
        started=gr.State(None),
        timer=gr.Timer(1.5),
        keys=list(fields),
        fields=fields,
    )


def default_export_dir(board: Board, top: forms.TopValues) -> Path:
    """``<workspace>/exports/<checkpoint or model name>-merged-<time>``."""
    source = Path(top.checkpoint).name if top.checkpoint else str(top.model or "model").replace("/", "-")
    if top.checkpoint and source.startswith("checkpoint-"):
        source = f"{Path(top.checkpoint).parent.name}-{source}"
    return board.workspace.exports_dir / f"{source}-merged-{time.strftime('%Y%m%d-%H%M%S')}"


def start_export(board: Board, values: list[Any], keys: list[str], lang: str) -> tuple[str, str | None]:
    """Validate and submit an export run; (message, run id or None)."""
    model, ft, checkpoint, template, export_dir, *rest = values
    top = top_values(model, ft, checkpoint, template)
    if not top.checkpoint:
        return t(lang, "export_needs_checkpoint"), None
    target = str(export_dir or "").strip() or str(default_export_dir(board, top))
    mapping = forms.export_mapping(top, target, collect(keys, rest))
    refused = empty_problems(keys, rest, lang)  # an empty number box would run with its default unseen
    checked = forms.validate(mapping, "export")
    if refused or not checked.ok:
        return form_problems_text(lang, refused, checked.problems), None
    run_id = board.jobs.new_run_id("export")
    try:
        run_id = board.jobs.submit(
            "export",
            forms.resolved_mapping(checked.config, board.jobs.runs_dir / run_id),
            run_id=run_id,
            meta={"export_dir": mapping["export_dir"]},
        )
    except JobError as err:  # the run folder could not be written (a full disk)
        return err.text(lang), None
    position = board.jobs.queue_position(run_id)
    if position and board.jobs.busy():
        return t(lang, "train_queued", run=run_id, position=position), run_id
    return t(lang, "export_started", run=run_id, path=mapping["export_dir"]), run_id


def folder_size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else 0


def human_size(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if n < 1024 or unit == "TB":
            return f"{n:.1f} {unit}" if unit != "B" else f"{int(n)} B"
        n /= 1024
    return f"{n:.1f} TB"


def result_card(board: Board, run_id: str, lang: str) -> str:
    """Where the model went, its size, and the reload check of a finished export."""
    mon = board.jobs.monitor(run_id)
    if mon.status != "completed":
        return ""
    metrics = dict((mon.end or {}).get("metrics") or {})
    metrics.update({k: v for k, v in (mon.last_progress or {}).items() if k not in ("event", "time", "stage")})
    target = Path(str(metrics.get("export_dir") or mon.info.get("export_dir") or ""))
    size = metrics.get("size_bytes")
    if not isinstance(size, (int, float)) or isinstance(size, bool) or size <= 0:  # a run folder's word, not trusted
        size = folder_size(target)
    rows = [
        (t(lang, "export_where"), f"<code>{html.escape(str(target))}</code>"),
        (t(lang, "export_size_label"), html.escape(human_size(float(size)))),
    ]
    if "dtype" in metrics:
        rows.append((t(lang, "export_dtype"), html.escape(str(metrics["dtype"]))))
    if "verified" in metrics:
        ok = bool(metrics["verified"])
        detail = ""
        if isinstance(metrics.get("max_logit_diff"), (int, float)):
            detail = " " + t(lang, "export_logit_diff", diff=f"{metrics['max_logit_diff']:.2e}")
        rows.append(
            (
                t(lang, "export_verified"),
                html.escape(t(lang, "export_verified_yes" if ok else "export_verified_no") + detail),
            )
        )
    if "chat_template_matches" in metrics:
        rows.append(
            (
                t(lang, "export_template"),
                html.escape(
                    t(lang, "export_verified_yes" if metrics["chat_template_matches"] else "export_verified_no")
                ),
            )
        )
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{v}</td></tr>" for k, v in rows)
    return f'<table class="lf-result">{body}</table>'


def wire(tab: ExportTab, top: TopBar, board: Board, demo: gr.Blocks) -> None:
    follow_end(tab.log)
    private = {"api_visibility": "private"}

    def on_start(*values):
        *values, lang = values
        message, run_id = start_export(board, list(values), tab.keys, lang)
        return message, run_id if run_id else gr.skip(), start_line.track(message, run_id)

    tab.abort_btn.click(
        lambda run_id, lang: abort_run(board, run_id, lang), [tab.watched, top.lang], tab.message, **private
    )

    def on_tick(run_id: str, seen: Any, lang: str, message: Any, started: Any):
        line = start_line.follow(board, started, message, lang)  # "Export x started" follows the run and language
        view = progress_view.watch(board, run_id, seen, lang)
        if view is None:
            return (gr.skip(),) * 5 + line
        changed = view.get("changed", True)
        result = result_card(board, run_id, lang) if (changed and view["exists"]) else gr.skip()
        return (
            view["card"],
            view["log"] if changed else gr.skip(),
            result,
            gr.update(value=view["error"], visible=bool(view["error"])),
            view["seen"],
            *line,
        )

    start_card.wire(tab, top.lang, [tab.log, tab.result, tab.error], on_tick, on_start,
                    [*top.values(), tab.export_dir, *tab.fields.values(), top.lang],
                    [tab.message, tab.watched, tab.started])
