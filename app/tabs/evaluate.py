"""The Evaluate tab: eval (loss, perplexity) or predict (generation, BLEU/ROUGE) runs on a chosen dataset."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr
import pandas as pd

from app import forms, progress_view, start_card, start_line
from app.context import Board
from app.engine_text import form_problems_text
from app.i18n import L, t
from app.jobs import JobError
from app.markup import SafeMarkdown
from app.scrolling import follow_end
from app.tabs.train import abort_run, dataset_choices
from app.tabs.train_data import dataset_note
from app.topbar import TopBar, top_values
from app.visible_text import choices as shown_choices
from app.visible_text import reveal
from app.widgets import collect, empty_problems, make_widget
from engine.runs import bounded_lines, open_regular, read_regular

EVAL_KEYS = ["cutoff_len", "max_samples", "per_device_eval_batch_size"]
SAMPLING_KEYS = ("temperature", "top_p", "top_k")
"""Generation settings that only sampling reads (greedy decoding ignores them)."""
MAX_PREDICTIONS = 2000
MAX_LINE_BYTES = 4 << 20
"""The longest generated_predictions.jsonl line read, and the largest result file (bytes): a prediction's prompt,
label and reply are a few tens of KB. A longer line (a file from elsewhere: one line of a gigabyte was read whole
into the board) is passed over without being held."""
METRIC_COLUMNS = ("metric", "value")
PREDICTION_COLUMNS = ("prompt", "label", "predict")
RESULT_FILES = ("all_results.json", "predict_results.json", "eval_results.json")


@dataclass
class EvaluateTab:
    mode: gr.Radio
    dataset_dir: gr.Dropdown
    dataset: gr.Dropdown
    start_btn: gr.Button
    abort_btn: gr.Button
    message: gr.Markdown
    status: gr.HTML
    error: gr.Textbox
    log: gr.Textbox
    metrics: gr.Dataframe
    predictions: gr.Dataframe
    watched: gr.BrowserState
    seen: gr.State
    started: gr.State  # the line Start wrote under it, followed (app.start_line)
    timer: gr.Timer
    keys: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    generation: gr.Accordion | None = None
    dataset_note: gr.Markdown | None = None


def build(board: Board) -> EvaluateTab:
    start = board.workspace.startup_settings()
    dataset_dir = str(start.get("dataset_dir") or board.workspace.default_dataset_dir())
    choices, _ = dataset_choices(dataset_dir)
    fields: dict[str, Any] = {}
    with gr.Row():
        mode = gr.Radio(
            choices=[(L("eval_mode_eval"), "eval"), (L("eval_mode_predict"), "predict")],
            value="predict",
            label=L("eval_mode"),
            info=L("eval_mode_info"),
            scale=2,
        )
        dataset_dir_w = gr.Dropdown(
            choices=shown_choices(board.workspace.dataset_dirs()),
            value=dataset_dir,
            allow_custom_value=True,
            label=L("train_dataset_dir"),
            info=L("train_dataset_dir_info"),
            scale=2,
        )
        dataset = gr.Dropdown(
            choices=choices,
            value=forms.split_names(start.get("dataset"))[:1],
            multiselect=True,
            label=L("eval_dataset"),
            info=L("eval_dataset_info"),
            scale=3,
            elem_id="lf-eval-dataset",
        )
    dataset_note = SafeMarkdown(visible=False, elem_id="lf-eval-dataset-note")  # why a picked entry is broken
    with gr.Row():
        for key in EVAL_KEYS:
            fields[key] = make_widget(key, {"max_samples": 50, "cutoff_len": start.get("cutoff_len")}.get(key),
                                      tab="eval")
    with gr.Accordion(L("eval_generation"), open=True) as generation:
        with gr.Row():
            for key in forms.GENERATION_KEYS:  # greedy by default: the sampling settings wait for "Sample"
                extra = {"interactive": False} if key in SAMPLING_KEYS else {}
                fields[key] = make_widget(key, {"do_sample": False, "max_new_tokens": 64}.get(key), tab="eval",
                                          **extra)
    with gr.Row():
        start_btn = gr.Button(L("eval_start"), variant="primary", elem_id="lf-eval-start")
        abort_btn = gr.Button(L("job_abort"), variant="stop")
    message = SafeMarkdown(elem_id="lf-eval-message")
    status = gr.HTML(progress_view.first_card(board.default_lang), js_on_load=None, elem_id="lf-eval-status")
    error = gr.Textbox(label=L("train_error"), lines=8, visible=False, elem_classes=["lf-error"])
    metrics = gr.Dataframe(
        headers=[L(f"col_{c}") for c in METRIC_COLUMNS], label=L("eval_metrics"), interactive=False,
        elem_id="lf-eval-metrics",
    )
    predictions = gr.Dataframe(
        headers=[L(f"col_{c}") for c in PREDICTION_COLUMNS],
        elem_id="lf-eval-predictions",
        label=L("eval_predictions"),
        interactive=False,
        wrap=True,
        max_height=520,
        show_search="search",
        column_widths=["40%", "30%", "30%"],
    )
    log = gr.Textbox(label=L("train_log"), lines=8, max_lines=8, autoscroll=True, interactive=False,
                     elem_id="lf-eval-log", elem_classes=["lf-log"])
    return EvaluateTab(
        mode=mode,
        dataset_dir=dataset_dir_w,
        dataset=dataset,
        start_btn=start_btn,
        abort_btn=abort_btn,
        message=message,
        status=status,
        error=error,
        log=log,
        metrics=metrics,
        predictions=predictions,
        watched=gr.BrowserState("", storage_key="lfboard-eval-run", secret=board.workspace.secret()),
        seen=gr.State(None),
        started=gr.State(None),
        timer=gr.Timer(1.5),
        keys=list(fields),
        fields=fields,
        generation=generation,
        dataset_note=dataset_note,
    )


def start_eval(board: Board, values: list[Any], keys: list[str], lang: str) -> tuple[str, str | None]:
    """Validate and submit an eval or predict run; (message, run id or None)."""
    model, ft, checkpoint, template, mode, dataset_dir, datasets, *rest = values
    mapping = forms.eval_mapping(
        top_values(model, ft, checkpoint, template), mode, dataset_dir, datasets, collect(keys, rest)
    )
    if not mapping.get("eval_dataset"):
        return t(lang, "eval_no_dataset"), None
    # an empty number box would run with its default unseen; the generation settings only matter to Predict
    used = [(k, v) for k, v in zip(keys, rest) if mode == "predict" or k not in forms.GENERATION_KEYS]
    refused = empty_problems([k for k, _ in used], [v for _, v in used], lang)
    kind = "predict" if mode == "predict" else "eval"
    run_id = board.jobs.new_run_id(kind)
    checked = forms.validate(mapping, "eval", run_folder=board.jobs.runs_dir / run_id)
    if refused or not checked.ok:
        return form_problems_text(lang, refused, checked.problems), None
    try:
        run_id = board.jobs.submit(
            kind, forms.resolved_mapping(checked.config, board.jobs.runs_dir / run_id), run_id=run_id
        )
    except JobError as err:  # the run folder could not be written (a full disk)
        return err.text(lang), None
    position = board.jobs.queue_position(run_id)
    if position and board.jobs.busy():
        return t(lang, "train_queued", run=run_id, position=position), run_id
    return t(lang, "train_started", run=run_id), run_id


def read_metrics(folder: Path, end_metrics: dict[str, Any]) -> list[list[Any]]:
    """[metric, value] rows from the result files LLaMA-Factory names (or the final event)."""
    found: dict[str, Any] = {}
    for name in RESULT_FILES:
        path = folder / name
        if path.is_file():
            try:
                raw = read_regular(path, max_bytes=MAX_LINE_BYTES + 1)
                data = json.loads(raw.decode("utf-8")) if len(raw) <= MAX_LINE_BYTES else None
            except (OSError, ValueError, RecursionError):  # unreadable, not JSON or not UTF-8, nested too deep
                continue
            if isinstance(data, dict):
                found.update(data)
    if not found:
        found = dict(end_metrics)
    return [
        [k, round(v, 4) if isinstance(v, float) else v]
        for k, v in found.items()
        if isinstance(v, (int, float, str)) and k != "traceback_tail"
    ]


def frame(rows: list[list[Any]], columns: tuple[str, ...], lang: str) -> pd.DataFrame:
    """A table with the page's language in its headers."""
    return pd.DataFrame(rows, columns=[t(lang, f"col_{c}") for c in columns])


def read_predictions(folder: Path, limit: int = MAX_PREDICTIONS) -> list[list[str]]:
    """[prompt, label, predict] rows of generated_predictions.jsonl."""
    path = folder / "generated_predictions.jsonl"
    rows: list[list[str]] = []
    if not path.is_file():
        return rows
    try:
        fh = open_regular(path)
    except OSError:  # gone, or not a regular file any more (a pipe would hold the page)
        return rows
    with fh:
        for line in bounded_lines(fh, MAX_LINE_BYTES):
            if len(rows) >= limit:
                break
            try:
                row = json.loads(line.decode("utf-8", errors="replace"))  # bad UTF-8 shows as U+FFFD
            except (ValueError, RecursionError):
                continue
            if not isinstance(row, dict):  # a line that is no prediction (a number, a list): passed over
                continue
            rows.append([reveal(str(row.get(key, "")), names=False) for key in ("prompt", "label", "predict")])
    return rows


def wire(tab: EvaluateTab, top: TopBar, board: Board, demo: gr.Blocks, opened: gr.Tab | None = None) -> None:
    follow_end(tab.log)
    private = {"api_visibility": "private"}

    def on_dataset_dir(dataset_dir: str, selected: list[str], lang: str):
        choices, _ = dataset_choices(dataset_dir)
        names = {value for _, value in choices}
        keep = [s for s in selected or [] if s in names]
        return gr.update(choices=choices, value=keep), on_picked(dataset_dir, keep, lang)

    def on_picked(dataset_dir: str, selected: list[str], lang: str):
        note = dataset_note(dataset_dir, selected, lang)
        return gr.update(value=note, visible=bool(note))

    tab.dataset_dir.change(on_dataset_dir, [tab.dataset_dir, tab.dataset, top.lang], [tab.dataset, tab.dataset_note],
                           **private)
    tab.dataset.input(on_picked, [tab.dataset_dir, tab.dataset, top.lang], tab.dataset_note, **private)

    def on_refresh(dataset_dir: str, selected: list[str]):
        # the picker's list was read as the board started: a reloaded page, or the tab opened after an upload on
        # Train, lacked the datasets registered since; a pick that went away is dropped, any other left as it is
        choices, _ = dataset_choices(dataset_dir)
        names = {value for _, value in choices}
        keep = [s for s in selected or [] if s in names]
        return gr.update(choices=choices) if keep == list(selected or []) else gr.update(choices=choices, value=keep)

    gr.on([demo.load, *([opened.select] if opened is not None else [])], on_refresh, [tab.dataset_dir, tab.dataset],
          tab.dataset, show_progress="hidden", **private)
    top.lang.change(on_picked, [tab.dataset_dir, tab.dataset, top.lang], tab.dataset_note, show_progress="hidden",
                    **private)  # the note follows the page's language
    # the generation settings only matter to Predict: Eval (loss, perplexity) generates nothing
    tab.mode.change(lambda mode: gr.update(visible=mode == "predict"), tab.mode, tab.generation, **private)
    # temperature, top-p and top-k change nothing in greedy decoding: they can be set while "Sample" is ticked
    sampling = [tab.fields[key] for key in SAMPLING_KEYS]
    tab.fields["do_sample"].change(lambda on: [gr.update(interactive=bool(on)) for _ in sampling],
                                   tab.fields["do_sample"], sampling, show_progress="hidden", queue=False, **private)

    def on_start(*values):
        *values, lang = values
        message, run_id = start_eval(board, list(values), tab.keys, lang)
        return message, run_id if run_id else gr.skip(), start_line.track(message, run_id)

    inputs = [*top.values(), tab.mode, tab.dataset_dir, tab.dataset, *tab.fields.values(), top.lang]
    tab.abort_btn.click(
        lambda run_id, lang: abort_run(board, run_id, lang), [tab.watched, top.lang], tab.message, **private
    )

    def on_tick(run_id: str, seen: Any, lang: str, message: Any, started: Any):
        line = start_line.follow(board, started, message, lang)  # "queued (position 1)" follows the run and language
        view = progress_view.watch(board, run_id, seen, lang)
        if view is None:
            return (gr.skip(),) * 6 + line
        changed = view.get("changed", True)
        metrics = predictions = gr.skip()
        if changed and view["exists"] and view["final"]:
            mon = board.jobs.monitor(run_id)
            metrics = frame(read_metrics(mon.folder.path, (mon.end or {}).get("metrics") or {}), METRIC_COLUMNS, lang)
            predictions = frame(read_predictions(mon.folder.path), PREDICTION_COLUMNS, lang)
        elif view.get("reset", True):  # another run or language: empty tables with translated headers
            metrics, predictions = frame([], METRIC_COLUMNS, lang), frame([], PREDICTION_COLUMNS, lang)
        return (
            view["card"],
            view["log"] if changed else gr.skip(),
            gr.update(value=view["error"], visible=bool(view["error"])),
            metrics,
            predictions,
            view["seen"],
            *line,
        )

    start_card.wire(tab, top.lang, [tab.log, tab.error, tab.metrics, tab.predictions], on_tick, on_start, inputs,
                    [tab.message, tab.watched, tab.started])
