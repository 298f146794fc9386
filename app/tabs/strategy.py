"""The Train tab's scale-out box: strategy (single, DDP, FSDP2, DeepSpeed ZeRO-2/3, Ray), processes, and the
pre-Start check (estimated memory per device, refusals with their fix). Wired into the Train tab with a few lines.
"""

from __future__ import annotations

import html
import json
import os
import subprocess
import tempfile
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import gradio as gr

from app.context import Board
from app.engine_text import code_of, problems_text
from app.i18n import L, t
from app.markup import SafeMarkdown
from app.worker_process import log_tail, run_worker
from engine.errors import Problem

STRATEGY_CHOICES = [
    (L("strategy_single"), "single"), ("DDP (torchrun)", "ddp"), ("FSDP2 (torchrun)", "fsdp2"),
    ("DeepSpeed ZeRO-2 (torchrun)", "deepspeed_zero2"), ("DeepSpeed ZeRO-3 (torchrun)", "deepspeed_zero3"),
    ("Ray Train", "ray"),
]


@dataclass
class StrategyBox:
    accordion: gr.Accordion
    strategy: gr.Dropdown
    nproc: gr.Slider
    check_btn: gr.Button
    report: gr.Markdown

    def inputs(self) -> list[Any]:
        return [self.strategy, self.nproc]


def max_processes() -> int:
    """The slider's top (building the page must not import torch; the check refuses more than the devices)."""
    return max(os.cpu_count() or 1, 8)


def build(board: Board) -> StrategyBox:
    with gr.Accordion(L("strategy_title"), open=False) as accordion:
        with gr.Row():
            strategy = gr.Dropdown(STRATEGY_CHOICES, value="single", label=L("strategy_label"),
                                   info=L("strategy_info"), scale=2, elem_id="lf-strategy")
            nproc = gr.Slider(1, max_processes(), value=1, step=1, label=L("strategy_nproc"),
                              info=L("strategy_nproc_info"), scale=2, elem_id="lf-nproc")
            check_btn = gr.Button(L("strategy_check_btn"), scale=1, size="sm")
        report = SafeMarkdown(elem_id="lf-strategy-report")
    return StrategyBox(accordion=accordion, strategy=strategy, nproc=nproc, check_btn=check_btn, report=report)


CHECK_TIMEOUT = 300
PARTS = ("weights", "gradients", "optimizer", "activations")  # the estimate's parts (engine.train.parallel.plan)


class CheckFailed(RuntimeError):
    """The strategy check itself could not run (the worker failed or took too long); the message says why."""


_FACT_ENTRIES = 16
_facts: OrderedDict[str, dict[str, Any]] = OrderedDict()
_facts_lock = threading.Lock()
_reading: dict[str, threading.Event] = {}  # facts key -> set when the worker reading them has answered


def forget_checks() -> None:
    """Drop every remembered device and model fact (tests, or after changing the machine's devices)."""
    with _facts_lock:
        _facts.clear()
        _reading.clear()


def _stamp(path: Path) -> list[Any]:
    try:
        stat = path.stat()
    except OSError:
        return [str(path), None]
    return [str(path), stat.st_mtime_ns, stat.st_size]


def _facts_key(model: str) -> str:
    """A model name, with the stamps (modification time, size) of its folder and ``config.json`` when it is a local
    folder, so that a changed config is read again."""
    stamps: list[Any] = []
    try:
        folder = Path(model).expanduser()
        if folder.is_dir():
            stamps = [_stamp(folder), _stamp(folder / "config.json")]
    except (OSError, ValueError):
        stamps = []
    return json.dumps([model, stamps])


def _facts_for(model: str) -> dict[str, Any]:
    """This machine's devices and ``model``'s shape, from ``app.strategy_worker`` in a subprocess (it imports torch and
    transformers, which the board process never loads), remembered per model for the board's life (the devices a
    process sees do not change; a local model's changed config is read again). An answer without the model's shape
    is not remembered: the model may be downloaded later. CheckFailed when the worker could not answer."""
    key = _facts_key(model)
    with _facts_lock:
        if key in _facts:
            _facts.move_to_end(key)
            return _facts[key]
        running = _reading.get(key)
        if running is None:
            done = _reading[key] = threading.Event()
    if running is not None:  # read ahead when the box was opened: wait for that answer rather than ask twice
        running.wait(CHECK_TIMEOUT)
        with _facts_lock:
            if key in _facts:
                return _facts[key]
        done = threading.Event()  # that read failed: ask again
    return _read(model, key, done)


def _read(model: str, key: str, done: threading.Event) -> dict[str, Any]:
    """Ask the worker, remember an answer with the model's shape, and release whoever waits on ``done``."""
    try:
        result = _ask_worker(model)
        if "shape" in result:
            with _facts_lock:
                _facts[key] = result
                while len(_facts) > _FACT_ENTRIES:
                    _facts.popitem(last=False)
        return result
    finally:
        with _facts_lock:
            if _reading.get(key) is done:
                del _reading[key]
        done.set()


def read_ahead(mapping: dict[str, Any]) -> threading.Thread | None:
    """Start reading the facts for the form's model in the background (the box was opened: a Check is likely soon),
    unless they are known or being read, or the form names no valid config. Failures are left for the Check to
    report."""
    from app import forms

    checked = forms.validate(mapping, "train")
    if checked.config is None:
        return None
    model = str(checked.config.model.model_name_or_path)
    key = _facts_key(model)
    with _facts_lock:
        if key in _facts or key in _reading:
            return None
        done = _reading[key] = threading.Event()

    def read() -> None:
        try:
            _read(model, key, done)
        except CheckFailed:
            pass

    thread = threading.Thread(target=read, name="lfboard-scaleout-facts", daemon=True)
    thread.start()
    return thread


def _ask_worker(model: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="lfboard-strategy-") as scratch:
        request, out, log = (Path(scratch) / name for name in ("in.json", "out.json", "worker.log"))
        request.write_text(json.dumps({"model": model}), encoding="utf-8")
        try:
            code = run_worker("app.strategy_worker", [str(request), str(out)], log, CHECK_TIMEOUT)
        except subprocess.TimeoutExpired:
            raise CheckFailed(f"The strategy check took longer than {CHECK_TIMEOUT} s; try again.") from None
        result = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else None
        if result is None or "error" in result:
            reason = (result or {}).get("error") or log_tail(log, 6) or f"exit code {code}"
            raise CheckFailed(f"The strategy check could not run: {reason}")
    return result


def _plan(mapping: dict[str, Any], strategy: str, nproc: int) -> tuple[Any, dict[str, Any], list[str]]:
    """(``engine.train.parallel.plan.Plan`` or None, the strategy's config keys, config problems). The form is validated and checked here;
    the devices and the model's shape come from :func:`_facts_for` (a subprocess the first time for a model, then
    remembered). CheckFailed when those could not be read."""
    from app import forms
    from app.jobs import REPO_ROOT
    from engine.train.parallel.plan import DeviceFacts, ModelShape, check, launch_keys

    strategy, nproc = strategy or "single", int(nproc or 1)
    checked = forms.validate(mapping, "train")
    if checked.config is None:
        return None, {}, list(checked.problems)
    facts = _facts_for(str(checked.config.model.model_name_or_path))
    devices = DeviceFacts(**facts["devices"])
    keys = launch_keys(strategy, nproc, repo_root=str(REPO_ROOT), device=devices.type)
    checked = forms.validate({**mapping, **keys}, "train")
    if checked.config is None:
        return None, {}, list(checked.problems)
    shape = ModelShape(**facts["shape"]) if "shape" in facts else None
    plan = check(checked.config, strategy, nproc, shape=shape, shape_error=facts.get("shape_error"), facts=devices)
    return plan, keys, []


def check_text(mapping: dict[str, Any], strategy: str, nproc: int, lang: str) -> str:
    """Markdown: the estimate and every refusal with its fix."""
    from engine.train.parallel.plan import format_gb

    try:
        plan, _keys, problems = _plan(mapping, strategy, nproc)
    except CheckFailed as err:
        return html.escape(str(err))
    if plan is None:
        return problems_text(lang, t(lang, "train_problems"), [Problem(html.escape(p), code_of(p)) for p in problems])
    lines = []
    if plan.per_device_gb is not None:
        lines.append(t(lang, "strategy_estimate", gb=format_gb(plan.per_device_gb), device=plan.device,
                       available=format_gb(plan.available_gb), nproc=plan.nproc))
        parts = ", ".join(f"{t(lang, 'strategy_part_' + k) if k in PARTS else k} {v:.3f}"
                          for k, v in plan.breakdown.items())
        lines.append(f"_{html.escape(parts)} GiB_")  # shown as text (app.markup): no HTML here
    lines.extend(f"- {html.escape(n)}" for n in plan.notes)
    if plan.problems:
        lines.append(problems_text(lang, t(lang, "strategy_refused"), [html.escape(p) for p in plan.problems], "strategy"))
    else:
        lines.append(t(lang, "strategy_ok"))
    return "\n\n".join(lines)


def prepare(mapping: dict[str, Any], strategy: str, nproc: int, lang: str
            ) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(mapping with the strategy's keys, launch record for run.json, refusal text or None). A single-process run
    needs nothing from here; the others are checked here, from the device and model facts :func:`_facts_for` reads
    in a subprocess (so the board never imports torch)."""
    strategy, nproc = strategy or "single", int(nproc or 1)
    if strategy == "single" and nproc == 1:
        return mapping, None, None
    try:
        plan, keys, _problems = _plan(mapping, strategy, nproc)
    except CheckFailed as err:
        return mapping, None, str(err)
    if plan is None:
        return mapping, None, None  # the ordinary validation reports the config problems
    if plan.problems:
        return mapping, None, problems_text(lang, t(lang, "strategy_refused"), plan.problems, "strategy")
    return {**mapping, **keys}, {"strategy": strategy, "nproc": nproc}, None


def wire(box: StrategyBox, form: list[Any], mapping_of: Any, lang: Any) -> None:
    """The Check button: the estimate for the current form."""

    def on_check(*values):
        *values, strategy, nproc, lang_value = values
        return check_text(mapping_of(list(values)), strategy, nproc, lang_value)

    box.check_btn.click(on_check, [*form, box.strategy, box.nproc, lang], box.report, api_visibility="private")

    def on_open(*values):
        read_ahead(mapping_of(list(values)))

    box.accordion.expand(on_open, form, None, api_visibility="private", queue=False)
    box.strategy.change(lambda s: gr.update(value=1) if s == "single" else gr.update(), box.strategy, box.nproc,
                        api_visibility="private")
