"""The top bar: language, model, fine-tuning type, checkpoint, template, and the devices found."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app import catalog
from app.api_sessions import ClosedSessions
from app.context import Board
from app.forms import TopValues
from app.history import checkpoints, scan_checkpoints
from app.i18n import LANGUAGES, SET_LOCALE_JS, L, t
from app.lang_gate import LANG_UNKNOWN
from app.markup import SafeMarkdown
from app.visible_text import reveal
from app.widgets import make_widget
from app.workspace import REPO_ROOT
from engine.runs import RunFolder

LOGO = REPO_ROOT / "assets" / "logo.svg"
LIVE_TICK = 4.0
"""Seconds between the top bar's refreshes while a run of the workspace is queued or running (it can add checkpoints)."""
IDLE_TICK = 30.0
"""... and while none is: a run started from the page, or by lf-engine in this workspace, is seen within this time and
the timer goes back to :data:`LIVE_TICK` (the refresh button reads the workspace at once)."""


@dataclass
class TopBar:
    """The top bar's components; ``values()`` are the inputs every tab reads."""

    lang_choice: gr.Dropdown
    lang: gr.Textbox
    saved_lang: gr.BrowserState
    model: gr.Dropdown
    finetuning_type: gr.Dropdown
    checkpoint: gr.Dropdown
    template: gr.Dropdown
    refresh: gr.Button
    devices: gr.Markdown
    note: gr.Markdown
    known_checkpoints: gr.State
    shown: gr.State
    timer: gr.Timer
    follow: gr.State
    """The training run this page started (or took up) whose final output the checkpoint picker takes when it
    completes: ``{"run": id, "set": False}``, then ``"set": True`` once taken; None when there is none
    (:func:`follow_run`)."""
    followed: gr.Markdown
    """The line under the picker that says it took that run's output."""

    def values(self) -> list[gr.components.Component]:
        return [self.model, self.finetuning_type, self.checkpoint, self.template]


def top_values(model: Any, finetuning_type: Any, checkpoint: Any, template: Any) -> TopValues:
    return TopValues.of(model, finetuning_type, checkpoint, template)


def logo_html() -> str:
    svg = LOGO.read_text(encoding="utf-8") if LOGO.is_file() else ""
    return f'<div class="lf-brand">{svg}<span class="lf-title">LF Board</span></div>'


def checkpoint_choices(found: list[tuple[str, str]]) -> list[tuple[Any, str]]:
    """The checkpoint picker's choices: "none" and ``found`` (``history.checkpoints``). The page is built with
    "none" only; the workspace's runs are read when a page loads, not while the board starts."""
    return [(L("top_no_checkpoint"), ""), *((reveal(shown), value) for shown, value in found)]


def template_choices() -> list[tuple[Any, str]]:
    names, _ = catalog.templates()
    return [(L("top_tokenizer_template"), ""), *((n, n) for n in names)]


def build(board: Board) -> TopBar:
    # the full model list is filled in when a page loads: the engine's registry may import torch
    models = [("LF-Demo", catalog.DEMO_MODEL)]
    with gr.Row(elem_classes=["lf-topbar"], equal_height=True):
        gr.HTML(logo_html(), elem_id="lf-brand", js_on_load=None)
        lang_choice = gr.Dropdown(
            choices=[(L("lang_auto"), "auto"), *((name, code) for code, name in LANGUAGES.items())],
            value=board.default_lang,
            label=L("top_language"),
            scale=0,
            min_width=200,
            elem_id="lf-lang",
        )
    with gr.Row():
        model = gr.Dropdown(
            choices=models,
            value="demo",
            label=L("top_model"),
            info=L("top_model_info"),
            allow_custom_value=True,
            filterable=True,
            scale=3,
            elem_id="lf-model",
        )
        finetuning_type = make_widget("finetuning_type", scale=1)
        checkpoint = gr.Dropdown(
            choices=checkpoint_choices([]),
            value="",
            label=L("top_checkpoint"),
            info=L("top_checkpoint_info"),
            allow_custom_value=True,
            scale=3,
            elem_id="lf-checkpoint",
        )
        template = gr.Dropdown(
            choices=template_choices(),
            value="chatml",
            label=L("top_template"),
            info=L("top_template_info"),
            allow_custom_value=True,
            scale=2,
            elem_id="lf-template",
        )
        refresh = gr.Button(L("top_refresh"), scale=0, min_width=90, size="sm", elem_classes=["lf-refresh"])
    followed = SafeMarkdown(visible=False, elem_id="lf-checkpoint-followed")
    with gr.Row():
        # empty until the page's language is known (its change composes the line): a text that starts as a translation
        # key is put back by the page on every language switch (gradio 6.31), and the line said "looking…" again
        devices = SafeMarkdown(elem_classes=["lf-devices"], elem_id="lf-devices")
        note = SafeMarkdown(visible=False)
    return TopBar(
        lang_choice=lang_choice,
        lang=gr.Textbox(LANG_UNKNOWN, visible=False, elem_id="lf-lang-code"),  # set as the page loads
        saved_lang=gr.BrowserState(None, storage_key="lfboard-lang", secret=board.workspace.secret()),
        model=model,
        finetuning_type=finetuning_type,
        checkpoint=checkpoint,
        template=template,
        refresh=refresh,
        devices=devices,
        note=note,
        known_checkpoints=gr.State([]),
        shown=gr.State({}),  # the devices line as the page shows it, and the timer's interval
        timer=gr.Timer(LIVE_TICK),
        follow=gr.State(None),
        followed=followed,
    )


def render_devices(report: dict[str, Any] | None, error: str | None, lang: str) -> str:
    """One line per device (or the CPU), with memory."""
    if error:
        return t(lang, "top_devices_error", error=error)
    if report is None:
        return t(lang, "top_devices_loading_text")
    parts = []
    for dev in report.get("devices") or []:
        memory = ""
        if "memory_total_gib" in dev:
            free = dev.get("memory_free_gib", "?")
            memory = " · " + t(lang, "top_memory", total=dev["memory_total_gib"], free=free)
        parts.append(f"**{dev.get('type', '')}:{dev.get('index', 0)}** {dev.get('name', '')}{memory}")
    cpu = report.get("cpu") or {}
    parts.append(
        t(
            lang,
            "top_cpu",
            cores=cpu.get("cores", "?"),
            total=cpu.get("memory_total_gib", "?"),
            free=cpu.get("memory_free_gib", "?"),
        )
    )
    torch_version = report.get("torch")
    if torch_version:
        parts.append(f"torch {torch_version}")
    return t(lang, "top_devices") + " " + " · ".join(parts)


def refresh_choices(board: Board, known: list[Any], shown: dict[str, Any] | None, lang: str,
                    checkpoint: Any = "", follow: Any = None) -> tuple[Any, ...]:
    """(checkpoint picker, the choices as known, the devices line, what the page shows, the timer, the run the picker
    follows, the line saying it took a run's output), each skipped where it did not change: the top bar's timer ticks
    on every open page, almost always with nothing new. The timer ticks every :data:`LIVE_TICK` seconds while a run is
    queued or running (or the devices are still being looked for), every :data:`IDLE_TICK` otherwise. ``checkpoint``
    is the picker's value and ``follow`` the run it follows (:func:`follow_run`)."""
    choices, live = scan_checkpoints(board.workspace.runs_dir)
    flat = [list(c) for c in choices]
    report, error = catalog.ENVIRONMENT.get()
    shown = shown if isinstance(shown, dict) else {}
    waiting = report is None and error is None  # the devices line says "looking…" until the report comes
    now = {"devices": render_devices(report, error, lang), "every": LIVE_TICK if live or waiting else IDLE_TICK}
    select, follow_now = follow_run(board, follow, checkpoint, choices)
    if follow_now and follow_now.get("set"):
        now["note"] = t(lang, "top_checkpoint_followed", run=follow_now["run"])
    selected = {"value": select} if select else {}
    if flat == known:
        update = gr.update(**selected) if selected else gr.skip()
        flat = gr.skip()
    else:
        update = gr.update(choices=checkpoint_choices(choices), **selected)
    devices = gr.skip() if now["devices"] == shown.get("devices") else now["devices"]
    timer = gr.skip() if now["every"] == shown.get("every", LIVE_TICK) else gr.Timer(now["every"])
    note = now.get("note", "")
    followed = gr.skip() if note == shown.get("note", "") else gr.update(value=note, visible=bool(note))
    return (update, flat, devices, gr.skip() if now == shown else now, timer,
            gr.skip() if follow_now == follow else follow_now, followed)


def follow_run(board: Board, follow: Any, checkpoint: Any,
               choices: list[tuple[str, str]]) -> tuple[str | None, dict[str, Any] | None]:
    """What the checkpoint picker does about the training run this page started or took up (``follow``, see
    :attr:`TopBar.follow`): (the value to select, or None; the follow state after this refresh).

    A run that completed with its final adapter or model (in ``choices``) is selected while the picker is still on
    the base model (``checkpoint`` empty): a newcomer who trains the demo and goes to Chat chats with what was just
    trained. A failed or aborted run, one that left no final output, or a picker on anything else (the user's own
    choice) ends the following with nothing selected. Once selected, the following (and its line) lasts while the
    picker shows that output."""
    if not isinstance(follow, dict) or not follow.get("run"):
        return None, None
    run = str(follow["run"])
    path = str(Path(board.workspace.runs_dir) / run)
    if follow.get("set"):
        return None, (follow if str(checkpoint or "") == path else None)
    status = RunFolder(Path(board.workspace.runs_dir) / run).info().get("status")
    if status in ("queued", "running"):
        return None, follow
    if status == "completed" and not checkpoint and path in {value for _, value in choices}:
        return path, {"run": run, "set": True}
    return None, None


def follow_started(run_id: Any) -> Any:
    """The follow state (:attr:`TopBar.follow`) for a training run this page just started or took up; a skip when
    there is none."""
    return {"run": str(run_id), "set": False} if isinstance(run_id, str) and run_id else gr.skip()


def unfollow(shown: dict[str, Any] | None) -> tuple[Any, Any, Any]:
    """The user picked a checkpoint (the base model too): the picker follows no run any more and its line goes."""
    shown = {k: v for k, v in (shown if isinstance(shown, dict) else {}).items() if k != "note"}
    return None, gr.update(value="", visible=False), shown


def language_choice(board: Board, saved: str | None) -> str:
    """The language a page starts in: the one it saved, else the board's default. Its own quick load event, so that
    what handlers compose in that language does not wait for the model list and the run scan of ``load_values``."""
    return saved if saved in ("auto", *LANGUAGES) else board.default_lang


def load_values(board: Board, lang: str | None = None) -> tuple[Any, ...]:
    """What else a page gets when it loads: notes (in ``lang``, the page's language), the model list and the
    checkpoint choices (with the list the top bar's refresh compares against). The workspace's runs are read here,
    not while the board starts."""
    catalog.ENVIRONMENT.start()
    models, note = catalog.models(lang or board.default_lang)
    found = checkpoints(board.workspace.runs_dir)
    return (engine_notes(lang or board.default_lang, note), gr.update(choices=models),
            gr.update(choices=checkpoint_choices(found)), [list(c) for c in found])


def engine_notes(lang: str | None, model_note: Any = False) -> Any:
    """The top bar's note, in ``lang``: what the model list and the template list lack when engine parts are
    missing (``model_note``: the model list's note when already asked for)."""
    if model_note is False:
        model_note = catalog.models(lang)[1]
    notes = [n for n in (model_note, catalog.templates(lang)[1]) if n]
    return gr.update(value="\n\n".join(notes), visible=bool(notes))


def wire(bar: TopBar, board: Board, demo: gr.Blocks) -> None:
    """Events of the top bar (after the whole layout exists)."""

    # Runs in the page only: switches gradio's display language and stores the language in effect in the hidden
    # `lang` textbox, which every handler reads to translate what it composes.
    lang_io = {
        "inputs": [bar.lang_choice],
        "outputs": [bar.lang, bar.saved_lang],
        "js": SET_LOCALE_JS,
        "api_visibility": "private",
        "show_progress": "hidden",
    }
    bar.lang_choice.input(None, **lang_io).then(
        engine_notes, inputs=[bar.lang], outputs=[bar.note], api_visibility="private", show_progress="hidden")

    def on_model(model: str, template: str) -> Any:
        found = catalog.default_template(model)
        return found if found is not None else template

    bar.model.input(on_model, inputs=[bar.model, bar.template], outputs=[bar.template], api_visibility="private")
    # a pick of the user's own (the base model too) is never overridden by a run that finishes later
    bar.checkpoint.input(unfollow, inputs=[bar.shown], outputs=[bar.follow, bar.followed, bar.shown],
                         api_visibility="private", show_progress="hidden", queue=False)

    closed = ClosedSessions(demo)

    def on_refresh(known: list[Any], shown: dict[str, Any], lang: str, checkpoint: Any, follow: Any) -> tuple[Any, ...]:
        closed.prune()  # every open tab ticks: closed tabs' sessions are dropped without a thread of their own
        return refresh_choices(board, known, shown, lang, checkpoint, follow)

    # Each tick costs the page more than the board: gradio's page updates every loading status it keeps on each
    # status message of every event (see app.ui.quiet_progress), and after an edit of the Train form it keeps one
    # per field (about 0.3 s of the browser's CPU a tick). So the timer ticks slowly while no run can add a
    # checkpoint, and the tick reads two states and the language, answers with skips where nothing changed, shows no
    # progress and is not queued (a queued event has more status messages: estimation and start as well).
    gr.on(  # and at once on a language switch, so the devices line does not stay in the old one until the tick
        [bar.refresh.click, bar.timer.tick, bar.lang.change], on_refresh, **_refresh_io(bar))

    demo.load(
        lambda saved: language_choice(board, saved), inputs=[bar.saved_lang], outputs=[bar.lang_choice],
        api_visibility="private", show_progress="hidden", concurrency_limit=None,
    ).then(None, **lang_io).then(  # the notes in the page's language, once it is known
        lambda lang: load_values(board, lang), inputs=[bar.lang],
        outputs=[bar.note, bar.model, bar.checkpoint, bar.known_checkpoints], api_visibility="private",
        show_progress="hidden",  # gradio's timer on the model and checkpoint pickers while the lists are read
    )


def follow_started_runs(bar: TopBar, board: Board, watched: list[gr.State]) -> None:
    """Tick quickly from the moment a tab of this page starts (or starts watching) a run, not only from the next slow
    tick: otherwise the run could finish before that tick came, and its checkpoints reached the Evaluate and Chat
    pickers up to :data:`IDLE_TICK` seconds after it ended."""
    gr.on([state.change for state in watched], functools.partial(refresh_choices, board), **_refresh_io(bar))


def _refresh_io(bar: TopBar) -> dict[str, Any]:
    """What every refresh of the top bar reads and writes (:func:`refresh_choices`), and how it runs: cheaply, as
    :func:`wire` explains (no progress shown, not queued)."""
    return {
        "inputs": [bar.known_checkpoints, bar.shown, bar.lang, bar.checkpoint, bar.follow],
        "outputs": [bar.checkpoint, bar.known_checkpoints, bar.devices, bar.shown, bar.timer, bar.follow, bar.followed],
        "api_visibility": "private",
        "show_progress": "hidden",
        "queue": False,
    }
