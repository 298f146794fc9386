"""Builds the board's page: the top bar over the Train, Evaluate, Chat, Export and History tabs.

Each tab module builds its components and returns them in a small dataclass; events are wired after the whole
layout exists. The automation API endpoints are declared here too. Every handler but the API's is wrapped so that an
unexpected error reaches the page as text (:mod:`app.handler_errors`).
"""

from __future__ import annotations

import functools
from typing import Any

import gradio as gr

from app import api, page_follow, page_forms, page_memory, progress_view, topbar
from app.context import Board
from app.handler_errors import guard_handlers
from app.i18n import L
from app.lang_gate import gate_ticks
from app.tab_timers import TabTimers, pause_hidden_tabs
from app.tabs import chat, evaluate, export, profile, runs, train
from app.workspace import REPO_ROOT

CSS_PATH = REPO_ROOT / "assets" / "style.css"
FAVICON = REPO_ROOT / "assets" / "logo.svg"


def build_ui(board: Board) -> gr.Blocks:
    """The whole page (not launched)."""
    with gr.Blocks(title="LF Board", fill_width=True) as demo:
        top = topbar.build(board)
        with gr.Tabs(elem_id="lf-tabs") as tabs:
            with gr.Tab(L("tab_train"), id="train", elem_id="lf-tab-train") as tab_train:
                train_tab = train.build(board)
            with gr.Tab(L("tab_evaluate"), id="evaluate", elem_id="lf-tab-evaluate") as tab_evaluate:
                eval_tab = evaluate.build(board)
            with gr.Tab(L("tab_chat"), id="chat", elem_id="lf-tab-chat") as tab_chat:
                chat_tab = chat.build(board)
            with gr.Tab(L("tab_export"), id="export", elem_id="lf-tab-export") as tab_export:
                export_tab = export.build(board)
            with gr.Tab(L("tab_history"), id="history", elem_id="lf-tab-history") as tab_history:
                runs_tab = runs.build(board)
                profile_panel = profile.build(board)
        topbar.wire(top, board, demo)
        # gradio redraws the tab buttons only when their label changes: send the labels again after a switch
        tab_items = [tab_train, tab_evaluate, tab_chat, tab_export, tab_history]
        top.lang.change(
            lambda: [gr.Tab(label=item.label) for item in tab_items],
            None,
            tab_items,
            api_visibility="private",
            show_progress="hidden",
        )
        train.wire(train_tab, top, board, demo)
        evaluate.wire(eval_tab, top, board, demo, opened=tab_evaluate)
        chat.wire(chat_tab, top, board, demo)
        export.wire(export_tab, top, board, demo)
        watchers = {
            "train": ("train", train_tab.watched),
            "eval": ("evaluate", eval_tab.watched),
            "predict": ("evaluate", eval_tab.watched),
            "export": ("export", export_tab.watched),
        }
        runs.wire(runs_tab, board, demo, tabs, watchers, top.lang, top.follow, opened=tab_history)
        # a page that watches no run in a tab (another browser than the one that started it) watches the live one
        watched = [train_tab.watched, eval_tab.watched, export_tab.watched]
        topbar.follow_started_runs(top, board, watched)
        demo.load(functools.partial(adopt_live_runs, board, [("train",), ("eval", "predict"), ("export",)]), watched,
                  watched, api_visibility="private", show_progress="hidden")
        profile.wire(profile_panel, board, demo, top.lang)
        page = page_memory.build()  # what a browser tab keeps across a reload
        page_memory.wire(page, board, demo, top.lang, chat_tab, runs_tab)
        page_forms.wire(page, board, page_forms.tab_forms(eval_tab, export_tab))
        page_follow.wire(page, board, top.follow, top.checkpoint)  # what the checkpoint picker follows, too
        rl_timers = [train_tab.rl_live.timer] if train_tab.rl_live is not None else []
        pause_hidden_tabs([  # polling only where a page shows a run (the top bar's timer always runs)
            TabTimers(tab_train, [train_tab.timer, *rl_timers], gate=train_tab.watched),
            TabTimers(tab_evaluate, [eval_tab.timer], gate=eval_tab.watched),
            TabTimers(tab_chat),
            TabTimers(tab_export, [export_tab.timer], gate=export_tab.watched),
            TabTimers(tab_history, [runs_tab.timer]),
        ], demo)
        api.register(board)
        gate_ticks(demo, top.lang)  # no status line in English while a page's language is on its way
    guard_handlers(demo, api.API_NAMES)
    quiet_progress(demo)
    return demo


def quiet_progress(demo: gr.Blocks) -> int:
    """Give every event that shows no progress (``show_progress="hidden"``) no component to show it on; the number
    changed.

    gradio's page keeps a loading status for every component an event has output to (and, once an event is done,
    for every component it read), for as long as the page is open, and sends all of them to their components again
    on each status message of every event (several per event: pending, queued, started, done), looking each
    component up in the page's tree: a cost that grows with the number of components ever output to or read, times
    the events. The Train form's page load alone outputs to 173 fields, after which each of the page's few dozen
    load-time events and every timer tick paid for all of them (the page took about 8 s to become usable, the
    browser busy throughout). A hidden event's status draws nothing, so it need not be kept: with
    ``show_progress_on=[]`` the page records none for its outputs. Events that show their progress keep it on their
    outputs. (What an event read is kept all the same: an event that reads the whole Train form, its preview or
    Start, still leaves 175 behind; app.tabs.train's page load avoids firing the preview.)"""
    changed = 0
    for block_fn in demo.fns.values():
        if block_fn.show_progress == "hidden" and block_fn.show_progress_on is None:
            block_fn.show_progress_on = []
            changed += 1
    return changed


def adopt_live_run(board: Board, kinds: tuple[str, ...], watched: str | None) -> Any:
    """The run a tab watches as the page loads: its own, else the newest live run of ``kinds`` (else unchanged)."""
    if watched:
        return gr.skip()
    return progress_view.live_run(board, kinds) or gr.skip()


def adopt_live_runs(board: Board, kinds: list[tuple[str, ...]], *watched: str | None) -> tuple[Any, ...]:
    """:func:`adopt_live_run` for each tab that follows a run (Train, Evaluate, Export), in one page-load event."""
    return tuple(adopt_live_run(board, k, run) for k, run in zip(kinds, watched, strict=True))


def launch_options(board: Board, host: str = "127.0.0.1", open_hosts: bool = False) -> dict:
    """Keyword arguments for ``Blocks.launch`` shared by the CLI and tests: translations, style, icon, and the
    middleware (``host`` and ``open_hosts``: see :class:`app.security.HostGuardMiddleware`)."""
    from starlette.middleware import Middleware

    from app.i18n import build_i18n
    from app.page_script import page_js
    from app.security import BodyLimitMiddleware, ClientAddressMiddleware, ContentPolicyMiddleware, HostGuardMiddleware

    return {
        "i18n": build_i18n(),
        "js": page_js(),  # copying out of the page drops the marks app.inert_text inserts
        "css_paths": [CSS_PATH] if CSS_PATH.is_file() else None,
        "favicon_path": str(FAVICON) if FAVICON.is_file() else None,
        "theme": gr.themes.Soft(primary_hue="indigo", secondary_hue="sky"),
        "footer_links": ["api", "settings"],
        "max_file_size": f"{board.max_upload_mb}mb",
        "app_kwargs": {"middleware": [
            Middleware(HostGuardMiddleware, bind_host=host, open_hosts=open_hosts),  # its own page only (app.security)
            Middleware(BodyLimitMiddleware),  # no body gradio would read whole, logged in or not, past 32 MB
            Middleware(ClientAddressMiddleware),  # the login backoff sees the client
            Middleware(ContentPolicyMiddleware),  # what the page shows loads nothing from elsewhere (app.markup)
        ]},
    }
