"""The chat tab's status line: what a worker serves, why a page cannot send, and the note a reply leaves (a failure, an
empty reply, or the ready line again)."""

from __future__ import annotations

from typing import Any

from app import chat_workers
from app.context import Board
from app.i18n import t
from app.jobs import JobError


def served(board: Board, run_id: str) -> tuple[str, str]:
    """(model, adapter or '') a chat worker serves, read from its config."""
    from app.history import read_config
    from engine.runs import RunFolder

    config = read_config(RunFolder(board.jobs.runs_dir / run_id))
    model, adapter = str(config.get("model_name_or_path") or "?"), config.get("adapter_name_or_path")
    if isinstance(adapter, list):
        adapter = ", ".join(map(str, adapter))
    return model, str(adapter or "")


def served_model(board: Board, run_id: str) -> str:
    """The model (and adapter) a chat worker serves, for a message."""
    model, adapter = served(board, run_id)
    return f"{model} + {adapter}" if adapter else model


def failure_text(board: Board, status: dict[str, Any], lang: str) -> str:
    """Why a worker ended as it loaded: its error (in ``lang`` where run.json has it as data: a full disk, an exit
    code; app.run_errors), else its status in ``lang``."""
    try:
        mon = board.jobs.monitor(status["id"])
        error = mon.error_lines(mon.local_error(lang))
    except JobError:
        error = status.get("error")
    return error or t(lang, "status_" + str(status.get("status")))


def gone_text(board: Board, servers: dict[str, str] | None, live: dict[str, dict[str, Any]], lang: str) -> str:
    """Why a page cannot send: no model loaded yet, or still loading, or the worker it loaded is gone (an Unload, or
    a Load of another model, in this page or another), naming what is loaded now."""
    mine = (servers or {}).get("main")
    if not mine or "main" in live:
        return t(lang, "chat_not_ready")
    now = [info for info in chat_workers.live_chat_runs(board) if not chat_workers.unloading(info)]
    if now:
        return t(lang, "chat_worker_gone_other", model=served_model(board, now[0]["id"]))
    return t(lang, "chat_worker_gone")


def empty_reply_note(replies: dict[str, dict[str, Any]], lang: str) -> str | None:
    """The note on a reply that ended with no text and no tool call (the model ended its turn at once), else None."""
    empty = any(not str(r.get("content") or "").strip() and not r.get("tool_calls") for r in replies.values())
    return t(lang, "chat_empty_reply") if empty else None


def reply_error_text(board: Board, live: dict[str, dict[str, Any]], errors: list[tuple[str, str]], lang: str) -> str:
    """The note on a failed reply: the worker's own words, or, when its worker was being ended (an Unload, or a Load
    of another model, in this page or another), that it was unloaded mid-reply."""
    side, error = errors[0]
    try:
        info = board.jobs.folder(live[side]["id"]).info()
    except JobError:
        info = {}
    if info and chat_workers.unloading(info):
        return t(lang, "chat_unloaded_mid_reply")
    return t(lang, "chat_error", error=error)


def ports_text(lang: str, live: dict[str, dict[str, Any]]) -> str:
    """The servers' ports for a status line: the one port, or each side's named in ``lang`` (the fine-tuned model's and
    the base model's when they are compared), never the sides' code names ("main", "base")."""
    ports = {side: state.get("port") for side, state in live.items()}
    if len(ports) == 1:
        return str(next(iter(ports.values())))
    return ", ".join(f"{t(lang, 'chat_finetuned' if side == 'main' else 'chat_base')}: {port}"
                     for side, port in ports.items())


def served_line(board: Board, live: dict[str, dict[str, Any]], lang: str, adopted: bool) -> str:
    """The status line of running chat servers: the model and adapter the main one serves (read from its config,
    not from the top bar, which a reopened page shows as it starts) and the ports; ``adopted``: the page found
    them running (not loaded from it)."""
    ports = ports_text(lang, live)
    main = live.get("main") or next(iter(live.values()))
    if not all(s.get("ready") and s.get("port") for s in live.values()):
        # still loading (a page reopened during its Load, or another page's): no "ready" and no port 0; a Load running
        # in this page overwrites the line with its progress a second later
        return t(lang, "chat_still_loading", model=served_model(board, main["id"]))
    model, adapter = served(board, main["id"])
    if adopted:
        if adapter:
            return t(lang, "chat_reattached", model=model, adapter=adapter, ports=ports)
        return t(lang, "chat_reattached_no_adapter", model=model, ports=ports)
    if adapter:
        return t(lang, "chat_ready", model=model, adapter=adapter, ports=ports)
    return t(lang, "chat_ready_no_adapter", model=model, ports=ports)
