"""The Train tab's scale-out box: strategy (single, DDP, FSDP2, DeepSpeed ZeRO-2/3, Ray), processes, and the
pre-Start check (estimated memory per device, refusals with their fix). Wired into the Train tab with a few lines.
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass
from typing import Any

import gradio as gr

from app.context import Board
from app.i18n import L, t
from app.jobs import REPO_ROOT

STRATEGY_CHOICES = [
    ("single", "single"), ("DDP (torchrun)", "ddp"), ("FSDP2 (torchrun)", "fsdp2"),
    ("DeepSpeed ZeRO-2 (torchrun)", "deepspeed_zero2"), ("DeepSpeed ZeRO-3 (torchrun)", "deepspeed_zero3"),
    ("Ray Train", "ray"),
]


@dataclass
class StrategyBox:
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
    with gr.Accordion(L("strategy_title"), open=False):
        with gr.Row():
            strategy = gr.Dropdown(STRATEGY_CHOICES, value="single", label=L("strategy_label"),
                                   info=L("strategy_info"), scale=2, elem_id="lf-strategy")
            nproc = gr.Slider(1, max_processes(), value=1, step=1, label=L("strategy_nproc"),
                              info=L("strategy_nproc_info"), scale=2, elem_id="lf-nproc")
            check_btn = gr.Button(L("strategy_check_btn"), scale=1, size="sm")
        report = gr.Markdown(elem_id="lf-strategy-report")
    return StrategyBox(strategy=strategy, nproc=nproc, check_btn=check_btn, report=report)


def _plan(mapping: dict[str, Any], strategy: str, nproc: int) -> tuple[Any, Any, list[str]]:
    """(typed config or None, plan or None, config problems)."""
    from app import forms
    from engine.train.parallel.plan import check, launch_keys

    strategy = strategy or "single"
    nproc = int(nproc or 1)
    from engine import devices

    keyed = {**mapping, **launch_keys(strategy, nproc, repo_root=str(REPO_ROOT), device=devices.get_accelerator().type)}
    checked = forms.validate(keyed, "train")
    if checked.config is None:
        return None, None, checked.problems
    return checked.config, check(checked.config, strategy, nproc), []


def check_text(mapping: dict[str, Any], strategy: str, nproc: int, lang: str) -> str:
    """Markdown: the estimate and every refusal with its fix."""
    from engine.train.parallel.plan import format_gb

    _cfg, plan, problems = _plan(mapping, strategy, nproc)
    if plan is None:
        return t(lang, "train_problems") + "\n" + "\n".join(f"- {html.escape(p)}" for p in problems)
    lines = []
    if plan.per_device_gb is not None:
        lines.append(t(lang, "strategy_estimate", gb=format_gb(plan.per_device_gb), device=plan.device,
                       available=format_gb(plan.available_gb), nproc=plan.nproc))
        parts = ", ".join(f"{k} {v:.3f}" for k, v in plan.breakdown.items())
        lines.append(f"<small>{html.escape(parts)} GiB</small>")
    lines.extend(f"- {html.escape(n)}" for n in plan.notes)
    if plan.problems:
        lines.append(t(lang, "strategy_refused"))
        lines.extend(f"- {html.escape(p)}" for p in plan.problems)
    else:
        lines.append(t(lang, "strategy_ok"))
    return "\n\n".join(lines)


def prepare(mapping: dict[str, Any], strategy: str, nproc: int, lang: str
            ) -> tuple[dict[str, Any], dict[str, Any] | None, str | None]:
    """(mapping with the strategy's keys, launch record for run.json, refusal text or None). A single-process run
    needs nothing from here, and the board then imports nothing of torch's."""
    strategy, nproc = strategy or "single", int(nproc or 1)
    if strategy == "single" and nproc == 1:
        return mapping, None, None
    from engine import devices
    from engine.train.parallel.plan import launch_keys

    _cfg, plan, problems = _plan(mapping, strategy, nproc)
    if plan is None:
        return mapping, None, None  # the ordinary validation reports the config problems
    if plan.problems:
        return mapping, None, t(lang, "strategy_refused") + "\n" + "\n".join(f"- {p}" for p in plan.problems)
    keyed = {**mapping, **launch_keys(strategy, nproc, repo_root=str(REPO_ROOT), device=devices.get_accelerator().type)}
    return keyed, {"strategy": strategy, "nproc": nproc}, None


def wire(box: StrategyBox, form: list[Any], mapping_of: Any, lang: Any) -> None:
    """The Check button: the estimate for the current form."""

    def on_check(*values):
        *values, strategy, nproc, lang_value = values
        return check_text(mapping_of(list(values)), strategy, nproc, lang_value)

    box.check_btn.click(on_check, [*form, box.strategy, box.nproc, lang], box.report, api_visibility="private")
    box.strategy.change(lambda s: gr.update(value=1) if s == "single" else gr.update(), box.strategy, box.nproc,
                        api_visibility="private")
