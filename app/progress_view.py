"""How a run's progress is shown: the status card, the charts' data, the log and the error lines.

Shared by the Train, Evaluate and Export tabs; every string is translated on the server for the page's language.
"""

from __future__ import annotations

import html
import math
import re
from typing import Any

import pandas as pd

from app.context import Board
from app.engine_text import error_text
from app.history import format_seconds, read_config
from app.i18n import LANGUAGES, t
from app.jobs import JobError
from app.visible_text import reveal
from engine.runs import RunFolder

STATUS_CLASSES = {
    "queued": "lf-queued",
    "running": "lf-running",
    "completed": "lf-completed",
    "failed": "lf-failed",
    "aborted": "lf-aborted",
}


STAGES = ("load", "merge", "save", "tokenizer", "verify", "done", "eval", "predict")
"""Stages of ``progress`` events (export, evaluation, prediction) with a ``stage_<name>`` locale key."""


def _num(value: Any, digits: int = 4) -> str:
    if not isinstance(value, (int, float)):
        return "–"
    if value != 0 and (abs(value) < 1e-3 or abs(value) >= 1e5):
        return f"{value:.2e}"
    return f"{value:.{digits}g}"


def status_card(board: Board, run_id: str, lang: str) -> str:
    """HTML: run id, status badge, progress bar and the figures of the latest step."""
    mon = board.jobs.monitor(run_id)
    prog = mon.progress()
    status = prog["status"]
    badge = (
        f'<span class="lf-badge {STATUS_CLASSES.get(status, "")}">{html.escape(t(lang, "status_" + status))}</span>'
    )
    head = f'<div class="lf-status-head">{badge} <code>{html.escape(run_id)}</code></div>'
    position = board.jobs.queue_position(run_id)
    lines = []
    if status == "queued":
        lines.append(t(lang, "progress_queued", position=position or "?"))
    fraction = prog["fraction"]
    bar = ""
    if fraction is not None:
        pct = round(fraction * 100, 1)
        bar = (
            f'<div class="lf-progress"><div class="lf-progress-fill" style="width:{pct}%"></div>'
            f"<span>{pct}%</span></div>"
        )
    facts = []
    if prog["step"] is not None and (prog["step"] or prog["total"]):  # eval-only runs have no training steps
        facts.append(t(lang, "progress_step", step=prog["step"], total=prog["total"] or "?"))
    if prog["epoch"] is not None:
        facts.append(t(lang, "progress_epoch", epoch=_num(prog["epoch"], 3)))
    if prog["loss"] is not None:
        facts.append(t(lang, "progress_loss", loss=_num(prog["loss"])))
    if prog["eval_loss"] is not None:
        facts.append(t(lang, "progress_eval_loss", loss=_num(prog["eval_loss"])))
    for name, value in prog.get("eval_scores") or []:
        facts.append(t(lang, "progress_eval_score", name=name, value=_num(value)))
    if prog.get("eval_accuracy") is not None:
        facts.append(t(lang, "progress_eval_accuracy", accuracy=_num(prog["eval_accuracy"])))
    if prog["lr"] is not None:
        facts.append(t(lang, "progress_lr", lr=_num(prog["lr"], 3)))
    if prog["tokens_per_s"]:
        facts.append(t(lang, "progress_tps", tps=f"{prog['tokens_per_s']:.0f}"))
    if prog["memory_gb"]:
        facts.append(t(lang, "progress_memory", gb=_num(prog["memory_gb"], 3)))
    if prog["stage"]:
        # a completed run's last progress event may name the stage it was in ("predicting · 32/32"): it is done
        stage = "done" if status == "completed" else str(prog["stage"])
        if stage in STAGES:
            stage = t(lang, "stage_" + stage)
        facts.append(t(lang, "progress_stage", stage=stage))
        done, total = (mon.last_progress or {}).get("done"), (mon.last_progress or {}).get("total")
        if isinstance(done, int) and isinstance(total, int) and total:
            facts.append(t(lang, "progress_done", done=done, total=total))
    if prog["elapsed"] is not None:
        facts.append(t(lang, "progress_elapsed", time=format_seconds(prog["elapsed"])))
    if prog["eta"] is not None and status == "running":
        facts.append(t(lang, "progress_eta", time=format_seconds(prog["eta"])))
    if prog["checkpoints"]:
        facts.append(t(lang, "progress_checkpoints_one" if prog["checkpoints"] == 1 else "progress_checkpoints", n=prog["checkpoints"]))
    if mon.info.get("parallel"):  # the strategy the engine found in effect (run.json)
        facts.append(t(lang, "progress_parallel", text=parallel_text(mon.info["parallel"], lang)))
    if status == "running" and prog["step"] is None and fraction is None:
        lines.append(t(lang, "progress_starting"))
    if status == "aborted":  # cancelled in the queue, stopped before its first checkpoint, or stopped with one kept
        if not mon.info.get("started_at"):
            lines.append(t(lang, "progress_cancelled"))
        elif mon.info.get("kind") != "train":  # an evaluation or export keeps no checkpoint
            lines.append(t(lang, "progress_stopped"))
        elif prog["checkpoints"]:
            lines.append(t(lang, "progress_aborted"))
        else:
            lines.append(t(lang, "progress_aborted_no_checkpoint"))
    body = "".join(f"<div>{html.escape(line)}</div>" for line in lines)
    facts_html = f'<div class="lf-facts">{" · ".join(html.escape(f) for f in facts)}</div>' if facts else ""
    return f'<div class="lf-status">{head}{bar}{facts_html}{body}</div>'


PARALLEL_WORDS = ("single", "replicated")
"""Strategies named in words (the others by their own names: DDP, FSDP2, DeepSpeed ZeRO-3)."""


def parallel_text(info: dict[str, Any], lang: str) -> str:
    """run.json's ``parallel`` in the page's language: ``FSDP2 · 2 processes · sharded · gloo`` (the engine logs the
    same facts in English, ``engine.train.parallel.info.summary``)."""
    strategy = str(info.get("strategy", ""))
    if strategy in PARALLEL_WORDS:
        label = t(lang, "parallel_" + strategy)
    else:
        label = {"ddp": "DDP", "fsdp2": "FSDP2", "fsdp1": "FSDP1"}.get(strategy) or strategy.replace(
            "deepspeed_zero", "DeepSpeed ZeRO-")
    size = info.get("world_size", 1)
    parts = [label, t(lang, "parallel_processes_one" if size == 1 else "parallel_processes", n=size),
             t(lang, "parallel_sharded" if info.get("sharded") else "parallel_not_sharded")]
    if info.get("backend"):
        parts.append(str(info["backend"]))
    if info.get("launcher"):
        parts.append(t(lang, "parallel_via", launcher=info["launcher"]))
    return " · ".join(parts)


def live_run(board: Board, kinds: tuple[str, ...]) -> str:
    """The newest queued or running run of ``kinds`` ("" when none): what a tab that watches no run shows, so that a
    second browser (or one whose storage was cleared) does not say "No run yet" beside a running run."""
    for info in board.jobs.list():
        if info.get("kind") in kinds and info.get("status") in ("queued", "running"):
            return str(info["id"])
    return ""


def empty_card(lang: str) -> str:
    return f'<div class="lf-status lf-empty">{html.escape(t(lang, "progress_none"))}</div>'


def first_card(default_lang: str) -> str:
    """The card a page opens with: the empty card in the board's language when one is set (``--lang``), else a
    card without words (``auto``: the browser's language is not known yet; the page's language composes it as it
    arrives, so a Chinese page never shows an English line first)."""
    if default_lang in LANGUAGES:
        return empty_card(default_lang)
    return '<div class="lf-status lf-empty">&nbsp;</div>'


def missing_card(run_id: str, lang: str) -> str:
    """The card of a watched run whose folder is gone: that, and that the next run shows here."""
    text = html.escape(t(lang, "run_missing", run=run_id) + " " + t(lang, "progress_next"))
    text = re.sub(r"`([^`]+)`", r"<code>\1</code>", text)
    return f'<div class="lf-status lf-empty">{text}</div>'


def typed_frame(rows: list[dict[str, Any]], dtypes: dict[str, str]) -> pd.DataFrame:
    """A frame with fixed column types, so that an empty chart already has a numeric (not a category) axis."""
    return pd.DataFrame(rows, columns=list(dtypes)).astype(dtypes)


def loss_frame(board: Board, run_id: str | None, lang: str) -> pd.DataFrame | None:
    """step / loss / series rows for the loss chart (training loss and eval loss); None before the first point.

    gradio fixes a chart's colours on the first data it draws, so both series are present from the start where
    the run evaluates (a series with no point yet gets one empty row) and a chart is cleared (None) before it shows
    another run or language. A run that never evaluates (and has no eval loss) gets no eval series: its legend
    named one that would never come.
    """
    if not run_id:
        return None
    curves = board.jobs.monitor(run_id).curves()
    if not curves["loss"] and not curves["eval_loss"]:
        return None
    rows: list[dict[str, Any]] = []
    first = min(s for s, _ in curves["loss"] + curves["eval_loss"])
    shown = [(t(lang, "series_train"), curves["loss"])]
    if curves["eval_loss"] or evaluates(read_config(RunFolder(board.jobs.runs_dir / run_id))):
        shown.append((t(lang, "series_eval"), curves["eval_loss"]))
    for series, points in shown:
        rows += [{"step": s, "loss": v, "series": series} for s, v in points] or [
            {"step": first, "loss": math.nan, "series": series}
        ]
    return typed_frame(rows, {"step": "int64", "loss": "float64", "series": "str"})


def evaluates(cfg: dict[str, Any]) -> bool:
    """Whether a training run's config evaluates (during training or once at its end): evaluation data
    (``eval_dataset`` or ``val_size``) and ``do_eval`` or an ``eval_strategy`` other than ``no``."""
    wants = cfg.get("do_eval") is True or cfg.get("eval_strategy") not in (None, "no")
    return bool(wants and (cfg.get("eval_dataset") or cfg.get("val_size")))


def lr_frame(board: Board, run_id: str | None) -> pd.DataFrame | None:
    """step / lr rows for the learning-rate chart; None before the first point."""
    rows = [{"step": s, "lr": v} for s, v in board.jobs.monitor(run_id).curves()["lr"]] if run_id else []
    return typed_frame(rows, {"step": "int64", "lr": "float64"}) if rows else None


def watch(board: Board, run_id: str | None, seen: Any, lang: str) -> dict[str, Any] | None:
    """What changed in a watched run since ``seen`` (None when nothing did).

    Returns a dict with ``card``, ``log``, ``error``, ``final``, ``seen`` (the new marker to keep), ``changed``
    and ``reset`` (the charts must be cleared first: another run or language than last time).
    """
    if not run_id:
        marker = ["", 0, lang]
        if seen == marker:
            return None
        return {"card": empty_card(lang), "log": "", "error": "", "final": True, "seen": marker, "exists": False}
    try:
        mon = board.jobs.monitor(run_id)
    except JobError:
        marker = [run_id, -1, lang]
        if seen == marker:
            return None
        # deleted (in History, or by hand): said in the card, not in the box headed "Why the run failed"
        return {
            "card": missing_card(run_id, lang),
            "log": "",
            "error": "",
            "final": True,
            "seen": marker,
            "exists": False,
        }
    # the status is part of the marker: the engine writes its last event before run.json says "completed", so a
    # tick may see the final version while the run is still "running"; the next one must still see a change
    marker = [run_id, mon.version, lang, mon.status]
    live = mon.status in ("queued", "running")
    if seen == marker and not live:
        return None
    reset = not seen or seen[0] != run_id or seen[2] != lang
    if reset:
        marker = [run_id, -1, lang, mon.status]  # draw the charts on the next tick, after they were cleared
    return {
        "card": status_card(board, run_id, lang),
        "log": reveal(mon.log_text(), names=False),
        "error": error_text(lang, mon.error_code, reveal(mon.error_lines(local := mon.local_error(lang)), names=False),
                            local=local is not None),
        "final": not live,
        "seen": marker,
        "exists": True,
        "changed": seen != marker,
        "reset": reset,
    }
