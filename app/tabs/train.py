"""The Train tab: data, method and hyperparameters as typed widgets, the exact command, Start/Abort, live progress."""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gradio as gr

from app import forms, progress_view, start_card, start_line
from app.config_names import checked_config_name
from app.context import Board
from app.engine_text import form_problems_text
from app.i18n import LANGUAGES, L, t
from app.jobs import JobError
from app.lang_gate import LANG_UNKNOWN
from app.markup import SafeMarkdown
from app.resume import form_resume
from app.scrolling import follow_end
from app.tabs import rewards, train_data
from app.tabs import strategy as scaleout
from app.tabs.train_data import dataset_choices, upload_dataset  # noqa: F401 - the Evaluate tab's and tests' too
from app.topbar import TopBar, follow_started, top_values
from app.visible_text import choices as shown_choices
from app.widgets import advanced_keys, collect, empty_problems, fill, make_widget, skip_unchanged
from app.workspace import LAST_CONFIG, SavedConfigError
from engine.data.rows import ROW_READERS

logger = logging.getLogger(__name__)

PER_ROW = 4
ADVANCED_SECTIONS = ("model", "data", "finetuning", "train", "methods")


@dataclass
class TrainTab:
    """The Train tab's components."""

    stage: gr.Dropdown
    dataset_dir: gr.Dropdown
    dataset: gr.Dropdown
    eval_dataset: gr.Dropdown
    dataset_note: gr.Markdown
    upload_file: gr.File
    upload_name: gr.Textbox
    upload_btn: gr.Button
    preview_btn: gr.Button
    preview_summary: gr.Markdown
    preview_rows: gr.HTML
    preview_hist: gr.BarPlot
    lora_box: gr.Accordion
    freeze_box: gr.Accordion
    pref_box: gr.Accordion
    config_name: gr.Textbox
    save_btn: gr.Button
    saved_configs: gr.Dropdown
    load_btn: gr.Button
    load_file: gr.File
    command_view: gr.Code
    yaml_view: gr.Code
    start_btn: gr.Button
    abort_btn: gr.Button
    message: gr.Markdown
    status: gr.HTML
    loss_plot: gr.LinePlot
    lr_plot: gr.LinePlot
    error: gr.Textbox
    log: gr.Textbox
    watched: gr.BrowserState
    pending: gr.State
    seen: gr.State
    timer: gr.Timer
    started: gr.State  # the line Start wrote under it, followed (app.start_line)
    keys: list[str] = field(default_factory=list)
    fields: dict[str, Any] = field(default_factory=dict)
    scaleout: scaleout.StrategyBox | None = None
    rl: rewards.RewardsSection | None = None
    rl_live: rewards.RewardsLive | None = None

    def form(self, top: TopBar) -> list[Any]:
        """Every input that makes up the config, in the order ``mapping_of`` expects."""
        return [*top.values(), self.stage, self.dataset_dir, self.dataset, self.eval_dataset, *self.fields.values()]


def _grid(keys: list[str], values: dict[str, Any], out: dict[str, Any]) -> None:
    for start in range(0, len(keys), PER_ROW):
        with gr.Row():
            for key in keys[start : start + PER_ROW]:
                out[key] = make_widget(key, values.get(key))


def build(board: Board) -> TrainTab:
    start = board.workspace.startup_settings()
    dataset_dir = str(start.get("dataset_dir") or board.workspace.default_dataset_dir())
    choices, _ = dataset_choices(dataset_dir)
    fields: dict[str, Any] = {}
    with gr.Row():
        stage = make_widget("stage", start.get("stage"), scale=1)
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
            value=forms.split_names(start.get("dataset")),
            multiselect=True,
            allow_custom_value=True,  # a data file's path, or a hub dataset with dataset_dir ONLINE
            label=L("train_dataset"),
            info=L("train_dataset_info"),
            scale=3,
            elem_id="lf-dataset",
        )
        eval_dataset = gr.Dropdown(
            choices=choices,
            value=forms.split_names(start.get("eval_dataset")),
            multiselect=True,
            allow_custom_value=True,
            label=L("train_eval_dataset"),
            info=L("train_eval_dataset_info"),
            scale=2,
        )
    dataset_note = SafeMarkdown(visible=False, elem_id="lf-dataset-note")
    with gr.Accordion(L("train_data_tools"), open=False):
        with gr.Row(equal_height=True):
            upload_file = gr.File(
                label=L("train_upload"),
                file_types=list(ROW_READERS),  # every extension the engine reads
                scale=2,
                height=110,
            )
            upload_name = gr.Textbox(label=L("train_upload_name"), info=L("train_upload_name_info"), scale=2)
            upload_btn = gr.Button(L("train_upload_btn"), scale=1)
        preview_btn = gr.Button(L("train_preview_btn"), size="sm")
        preview_summary = SafeMarkdown()
        with gr.Row():
            preview_rows = gr.HTML(elem_classes=["lf-preview"], js_on_load=None)
            # no data until a preview: a chart drawn as the page opens may draw before the page's translations
            # are ready and keep `__i18n__{...}` as its axis titles (the loss charts start empty the same way)
            preview_hist = gr.BarPlot(
                None,
                x="tokens",
                y="rows",
                x_title=L("axis_tokens"),
                y_title=L("axis_rows"),
                label=L("train_length_hist"),
                height=260,
            )
    with gr.Accordion(L("train_hyper"), open=True):
        _grid(forms.DATA_KEYS + forms.TRAIN_KEYS, start, fields)
    ft = start.get("finetuning_type", "lora")
    with gr.Accordion(L("train_lora"), open=True, visible=ft == "lora") as lora_box:
        _grid(forms.LORA_KEYS, start, fields)
    with gr.Accordion(L("train_freeze"), open=True, visible=ft == "freeze") as freeze_box:
        _grid(forms.FREEZE_KEYS, start, fields)
    with gr.Accordion(L("train_pref"), open=True, visible=start.get("stage") in forms.PREFERENCE_STAGES) as pref_box:
        _grid(forms.PREF_KEYS, start, fields)
    rl = rewards.build_section(start, fields)
    with gr.Accordion(L("train_advanced"), open=False):
        shown = set(fields) | forms.MANAGED_KEYS | {"stage", "finetuning_type"}
        _grid(advanced_keys(ADVANCED_SECTIONS, exclude=shown), start, fields)
    with gr.Accordion(L("train_config_io"), open=False):
        with gr.Row(equal_height=True):
            config_name = gr.Textbox(label=L("train_config_name"), info=L("train_config_name_info"), scale=2)
            save_btn = gr.Button(L("train_save_btn"), scale=1)
            saved_configs = gr.Dropdown(
                choices=shown_choices(board.workspace.list_configs()), label=L("train_saved_configs"), scale=2
            )
            load_btn = gr.Button(L("train_load_btn"), scale=1)
            load_file = gr.File(label=L("train_load_file"), file_types=[".yaml", ".yml"], scale=2, height=110)
    with gr.Accordion(L("train_command"), open=False):
        command_view = gr.Code(
            language="shell", label=L("train_command_label"), lines=4, max_lines=40, interactive=False,
            buttons=["copy"], elem_id="lf-train-command",
        )
        yaml_view = gr.Code(
            language="yaml", label=L("train_yaml_label"), lines=12, interactive=False, buttons=["copy", "download"],
            elem_id="lf-train-yaml",
        )
    scaleout_box = scaleout.build(board)
    with gr.Row():
        start_btn = gr.Button(L("train_start"), variant="primary", elem_id="lf-train-start")
        abort_btn = gr.Button(L("train_abort"), variant="stop", elem_id="lf-train-abort")
    message = SafeMarkdown(elem_id="lf-train-message")
    status = gr.HTML(progress_view.first_card(board.default_lang), elem_id="lf-train-status", js_on_load=None)
    with gr.Row():
        loss_plot = gr.LinePlot(
            None,
            x="step",
            y="loss",
            x_title=L("axis_step"),
            y_title=L("axis_loss"),
            color="series",
            color_title=" ",
            label=L("train_loss_chart"),
            height=300,
            elem_id="lf-loss-plot",
            elem_classes=["lf-plot"],
        )
        lr_plot = gr.LinePlot(
            None,
            x="step",
            y="lr",
            x_title=L("axis_step"),
            y_title=L("axis_lr"),
            label=L("train_lr_chart"),
            height=300,
            elem_id="lf-lr-plot",
            elem_classes=["lf-plot"],
        )
    rl_live = rewards.build_live()
    error = gr.Textbox(
        label=L("train_error"),
        lines=8,
        max_lines=30,
        visible=False,
        elem_id="lf-train-error",
        elem_classes=["lf-error"],
    )
    log = gr.Textbox(
        label=L("train_log"), lines=12, max_lines=12, autoscroll=True, interactive=False, elem_id="lf-train-log",
        elem_classes=["lf-log"],
    )
    keys = list(fields)
    return TrainTab(
        stage=stage,
        dataset_dir=dataset_dir_w,
        dataset=dataset,
        eval_dataset=eval_dataset,
        dataset_note=dataset_note,
        upload_file=upload_file,
        upload_name=upload_name,
        upload_btn=upload_btn,
        preview_btn=preview_btn,
        preview_summary=preview_summary,
        preview_rows=preview_rows,
        preview_hist=preview_hist,
        lora_box=lora_box,
        freeze_box=freeze_box,
        pref_box=pref_box,
        config_name=config_name,
        save_btn=save_btn,
        saved_configs=saved_configs,
        load_btn=load_btn,
        load_file=load_file,
        command_view=command_view,
        yaml_view=yaml_view,
        start_btn=start_btn,
        abort_btn=abort_btn,
        message=message,
        status=status,
        loss_plot=loss_plot,
        lr_plot=lr_plot,
        error=error,
        log=log,
        watched=gr.BrowserState("", storage_key="lfboard-train-run", secret=board.workspace.secret()),
        pending=gr.State(""),
        seen=gr.State(None),
        timer=gr.Timer(1.0),
        started=gr.State(None),
        keys=keys,
        fields=fields,
        scaleout=scaleout_box,
        rl=rl,
        rl_live=rl_live,
    )


# -- pure handlers (tested without a browser) ------------------------------------------------------------------
def mapping_of(tab_keys: list[str], values: list[Any]) -> dict[str, Any]:
    """The flat config mapping from the form's values (top bar, stage, data, fields)."""
    model, ft, checkpoint, template, stage, dataset_dir, dataset, eval_dataset, *rest = values
    top = top_values(model, ft, checkpoint, template)
    return forms.train_mapping(top, stage, dataset_dir, dataset, eval_dataset, collect(tab_keys, rest))


def empty_boxes(tab_keys: list[str], values: list[Any], mapping: dict[str, Any], lang: str) -> list[Any]:
    """Problems (in ``lang``) for the required number boxes of the form's ``values`` that are empty, among the fields
    that reach ``mapping`` (a hidden method's boxes do not)."""
    shown = [(key, value) for key, value in zip(tab_keys, values[8:]) if key in mapping]
    return empty_problems([key for key, _ in shown], [value for _, value in shown], lang)


def checked_form(board: Board, mapping: dict[str, Any], output_dir: Path, lang: str,
                 refused: list[Any] | None) -> tuple[forms.Checked, dict[str, Any], list[Any]]:
    """The form as Preview and Start both check it: ``resume_from_checkpoint`` read as the API reads it (a run id
    resumes that run's latest complete checkpoint, ``true`` is refused), then the config validated for a run
    writing to ``output_dir``. Returns (checked form, the run's resume meta, ``refused`` with the resume refusal)."""
    mapping, resumed, resume_refused = form_resume(board.jobs, mapping, lang)
    refused = [*(refused or []), *([resume_refused] if resume_refused else [])]
    return forms.validate(mapping, "train", run_folder=output_dir), resumed, refused


def preview_command(board: Board, mapping: dict[str, Any], pending: str, lang: str,
                    refused: list[Any] | None = None) -> tuple[str, str, str]:
    """(command, YAML, pending run id): exactly what Start will write and run (``refused``: the form's own problems,
    such as an empty number box, which Start refuses too)."""
    pending = pending or board.jobs.new_run_id("train")
    output_dir = board.jobs.runs_dir / pending
    checked, _, refused = checked_form(board, mapping, output_dir, lang, refused)
    if checked.config is None or refused:
        problems = "\n".join(f"# - {p}" for p in [*(str(r).replace("**", "") for r in refused), *checked.problems])
        return "", f"# {t(lang, 'train_invalid')}\n{problems}\n", pending
    resolved = forms.resolved_mapping(checked.config, output_dir)
    text = forms.yaml_text(resolved)
    return pasteable_command("train", text), text, pending


def retitled_preview(yaml_text: Any, lang: str) -> Any:
    """The preview's YAML with its "cannot run" heading (:func:`preview_command`) in ``lang``; skip where it has
    none or it is in ``lang`` already. The page load composes the preview before the page's language is known."""
    first, newline, rest = str(yaml_text or "").partition("\n")
    if lang == LANG_UNKNOWN or first not in {f"# {t(code, 'train_invalid')}" for code in LANGUAGES}:
        return gr.skip()
    retitled = f"# {t(lang, 'train_invalid')}{newline}{rest}"
    return retitled if retitled != yaml_text else gr.skip()


def pasteable_command(command: str, yaml_text: str) -> str:
    """A shell command that runs ``yaml_text`` as pasted: the config goes in on standard input (a here-document),
    so it works before the run folder exists (the run then appears in this workspace's History)."""
    marker = "LF_CONFIG"
    while marker in yaml_text:
        marker += "_"
    return f"lf-engine {command} - <<'{marker}'\n{yaml_text.rstrip()}\n{marker}"


_START_LOCK = threading.Lock()
"""Held while Start checks the page's pending run id and submits it (Start's handlers run side by side)."""


def start_run(board: Board, mapping: dict[str, Any], pending: str, lang: str,
              launch: dict[str, Any] | None = None, refused: list[Any] | None = None) -> tuple[str, str | None]:
    """Validate and submit (``launch``: strategy and processes, see app.launch; ``refused``: the form's own problems,
    see :func:`empty_boxes`); returns (message, run id or None)."""
    output_dir = board.jobs.runs_dir / (pending or board.jobs.new_run_id("train"))
    checked, resumed, refused = checked_form(board, mapping, output_dir, lang, refused)
    if refused or not checked.ok:
        return form_problems_text(lang, refused, checked.problems), None
    resolved = forms.resolved_mapping(checked.config, output_dir)
    with _START_LOCK:  # a double click sends the page's one pending id twice, side by side: one run, not two
        if pending and (board.jobs.runs_dir / pending).exists():
            return t(lang, "train_already_started", run=pending), pending
        try:
            meta = {**resumed, **({"launch": launch} if launch else {})}
            run_id = board.jobs.submit("train", resolved, run_id=pending or None, meta=meta or None)
        except JobError as err:  # the run folder could not be written (a full disk)
            return err.text(lang), None
    note = ""
    try:  # the run has started whatever happens here: the page must still learn its id and follow it
        board.workspace.save_config(LAST_CONFIG, {k: v for k, v in resolved.items() if k != "output_dir"})
    except OSError as err:
        logger.warning("Run %s: the form could not be kept as %s (%s)", run_id, LAST_CONFIG, err)
        note = "\n\n" + t(lang, "config_last_unsaved", name=LAST_CONFIG, reason=write_failure(board, err, lang))
    position = board.jobs.queue_position(run_id)
    if position and board.jobs.busy():
        return t(lang, "train_queued", run=run_id, position=position) + note, run_id
    return t(lang, "train_started", run=run_id) + note, run_id


def write_failure(board: Board, err: OSError, lang: str) -> str:
    """Why a file of the workspace could not be written, in ``lang`` (a full disk named as such)."""
    from app.jobs import disk_full_error
    from engine.diskfull import is_disk_full

    if is_disk_full(err, board.workspace.root):
        return disk_full_error(board.workspace.root).text(lang)
    where = f"{err.filename}: " if err.filename else ""
    return f"{where}{err.strerror or err}."


def abort_run(board: Board, run_id: str, lang: str) -> str:
    if not run_id:
        return t(lang, "train_nothing_to_abort")
    try:
        outcome = board.jobs.abort(run_id)
    except JobError as err:
        return err.text(lang)
    return abort_message(board, run_id, outcome, lang)


def abort_message(board: Board, run_id: str, outcome: str, lang: str) -> str:
    """What an abort does, truthfully: only training saves a checkpoint on the way out."""
    if outcome == "stopping":
        try:
            kind = board.jobs.folder(run_id).info().get("kind")
        except JobError:
            kind = None
        if kind != "train":
            return t(lang, "abort_stopping_job", run=run_id)
    return t(lang, f"abort_{outcome}", run=run_id)


def loaded_message(lang: str, name: str, mapping: dict[str, Any], keys: list[str]) -> str:
    """"Loaded", and the keys of the file the form does not carry (they would not reach the run), if any."""
    from app.config_import import left_out, misspelt, named

    message = t(lang, "config_loaded", name=name)
    missing = left_out(mapping, keys)
    if missing:
        message += t(lang, "config_left_out", keys=named(missing), name=name)  # en starts with a space, zh not
    typos = [t(lang, "config_did_you_mean", typo=key, close=close) for key, close in misspelt(mapping)]
    return "\n\n".join([message, *typos])


def form_values(tab: TrainTab, mapping: dict[str, Any], board: Board) -> list[Any]:
    """Widget values for the whole form (top bar included) from a config mapping."""
    dataset_dir = str(mapping.get("dataset_dir") or board.workspace.default_dataset_dir())
    choices, _ = dataset_choices(dataset_dir)
    checkpoint = mapping.get("adapter_name_or_path") or ""
    return [
        mapping.get("model_name_or_path") or "demo",
        mapping.get("finetuning_type") or "lora",
        checkpoint if isinstance(checkpoint, str) else "",
        mapping.get("template") or "",
        mapping.get("stage") or "sft",
        gr.update(value=dataset_dir,
                  choices=shown_choices(list(dict.fromkeys([*board.workspace.dataset_dirs(), dataset_dir])))),
        gr.update(value=forms.split_names(mapping.get("dataset")), choices=choices),
        gr.update(value=forms.split_names(mapping.get("eval_dataset")), choices=choices),
        *fill(tab.keys, mapping),
    ]


# -- events ---------------------------------------------------------------------------------------------------
def wire(tab: TrainTab, top: TopBar, board: Board, demo: gr.Blocks) -> None:
    follow_end(tab.log)
    form = tab.form(top)
    private = {"api_visibility": "private"}

    train_data.wire(tab, top, board, form, mapping_of)

    def on_form(*values):
        *values, pending, lang = values
        mapping = mapping_of(tab.keys, list(values))
        return preview_command(board, mapping, pending, lang, empty_boxes(tab.keys, list(values), mapping, lang))

    form_io = {
        "inputs": [*form, tab.pending, top.lang],
        "outputs": [tab.command_view, tab.yaml_view, tab.pending],
        "show_progress": "hidden",
        **private,
    }
    gr.on([c.change for c in form], on_form, trigger_mode="always_last", **form_io)

    top.finetuning_type.change(
        lambda ft: (gr.update(visible=ft == "lora"), gr.update(visible=ft == "freeze")),
        top.finetuning_type,
        [tab.lora_box, tab.freeze_box],
        **private,
    )
    tab.stage.change(lambda s: gr.update(visible=s in forms.PREFERENCE_STAGES), tab.stage, tab.pref_box, **private)

    def on_start(*values):
        *values, strategy, nproc, pending, lang = values
        mapping, launch, refusal = scaleout.prepare(mapping_of(tab.keys, list(values)), strategy, nproc, lang)
        if refusal:
            return refusal, gr.skip(), gr.skip(), gr.skip(), None
        refused = empty_boxes(tab.keys, list(values), mapping, lang)
        message, run_id = start_run(board, mapping, pending, lang, launch, refused)
        if run_id is None:
            return message, gr.skip(), gr.skip(), gr.skip(), None
        # the checkpoint picker takes the run's final output when it completes (app.topbar.follow_run)
        return message, run_id, board.jobs.new_run_id("train"), follow_started(run_id), start_line.track(message, run_id)

    scaleout.wire(tab.scaleout, form, lambda values: mapping_of(tab.keys, values), top.lang)
    tab.abort_btn.click(
        lambda run_id, lang: abort_run(board, run_id, lang), [tab.watched, top.lang], tab.message, **private
    )

    def on_tick(run_id: str, seen: Any, lang: str, message: Any, started: Any):
        line = start_line.follow(board, started, message, lang)  # "Run x started." follows the run and the language
        view = progress_view.watch(board, run_id, seen, lang)
        if view is None:
            return (gr.skip(),) * 6 + line
        changed = view.get("changed", True)
        if view.get("reset", True) or not view["exists"]:
            plots = (None, None)
        elif changed:
            plots = (progress_view.loss_frame(board, run_id, lang), progress_view.lr_frame(board, run_id))
        else:
            plots = (gr.skip(), gr.skip())
        return (
            view["card"],
            view["log"] if changed else gr.skip(),
            *plots,
            gr.update(value=view["error"], visible=bool(view["error"])),
            view["seen"],
            *line,
        )

    start_card.wire(tab, top.lang, [tab.log, tab.loss_plot, tab.lr_plot, tab.error], on_tick, on_start,
                    [*form, *tab.scaleout.inputs(), tab.pending, top.lang],
                    [tab.message, tab.watched, tab.pending, top.follow, tab.started]).then(on_form, **form_io)

    def on_save(name, *values):
        *values, lang = values
        name, refused = checked_config_name(name, lang)  # trimmed, `x.yaml` saved as x.yaml
        if refused:
            return refused, gr.skip()
        mapping = {k: v for k, v in mapping_of(tab.keys, list(values)).items() if v is not None}
        replaced = board.workspace.config_path(name).exists()
        try:
            path = board.workspace.save_config(name, mapping)
        except OSError as err:  # a full disk, a configs folder that is not writable: the old file is kept
            return t(lang, "config_save_failed", name=name, reason=write_failure(board, err, lang)), gr.skip()
        configs = shown_choices(board.workspace.list_configs())
        return t(lang, "config_replaced" if replaced else "config_saved", path=path), gr.update(choices=configs,
                                                                                              value=name)

    tab.save_btn.click(on_save, [tab.config_name, *form, top.lang], [tab.message, tab.saved_configs], **private)

    def on_load_saved(name, lang):
        if not name:
            return [t(lang, "config_pick"), *(gr.skip() for _ in form)]
        try:
            mapping = board.workspace.read_config(name)
        except SavedConfigError as err:
            return [t(lang, "config_unreadable", name=name) + f"\n- {err}", *(gr.skip() for _ in form)]
        return [loaded_message(lang, name, mapping, tab.keys), *form_values(tab, mapping, board)]

    tab.load_btn.click(on_load_saved, [tab.saved_configs, top.lang], [tab.message, *form], **private)

    def on_load_file(file, lang):
        from engine.config import ConfigError, read_yaml

        if not file:
            return [gr.skip() for _ in range(len(form) + 1)]
        try:
            mapping = read_yaml(file)
        except ConfigError as err:  # named as the user knows it, not by gradio's copy of it
            name = Path(file).name
            problems = "\n".join(f"- {p.replace(str(file), name)}" for p in err.problems)
            return [t(lang, "config_unreadable", name=name) + "\n" + problems, *(gr.skip() for _ in form)]
        return [loaded_message(lang, Path(file).name, mapping, tab.keys), *form_values(tab, mapping, board)]

    tab.load_file.upload(on_load_file, [tab.load_file, top.lang], [tab.message, *form], **private)

    def on_page_load(pending, lang):
        # the form as last started, and its command: only the fields that differ from the page as built are sent,
        # so that a page opened on the same settings fires no field's change (whose preview would read all 175)
        values = form_values(tab, board.workspace.startup_settings(), board)
        plain = [v.get("value") if isinstance(v, dict) else v for v in values]
        return [*skip_unchanged(form, values), *on_form(*plain, pending, lang)]

    loaded = demo.load(on_page_load, [tab.pending, top.lang], [*form, *form_io["outputs"]], show_progress="hidden",
                       **private)  # no timer on every field
    # its preview is composed before the page's language is known: a "cannot run" heading follows the language,
    # whether it came before the load ended (then) or after (change); a language switch later too
    retitle = {"inputs": [tab.yaml_view, top.lang], "outputs": [tab.yaml_view], "show_progress": "hidden",
               "queue": False, **private}  # a moment's work: not queued behind the page's other events
    loaded.then(retitled_preview, **retitle)
    top.lang.change(retitled_preview, **retitle)
    rewards.wire(tab.rl, tab.rl_live, tab, top, board, mapping_of)
