"""Per-module profiler: forward and backward time of chosen modules for a few steps after a warm-up.

``profile_modules`` (LLaMA-Factory's key) names the modules with comma-separated ``fnmatch`` patterns, e.g.
``*.layers.0.self_attn,*.mlp``; a PEFT wrapper's ``base_model.model.`` prefix is optional. Each module's
forward and backward are timed with the accelerator's own events and a synchronize at the end of the step
(CUDA, NPU, SUPA, XPU through :func:`engine.devices.make_event`; wall clock on the CPU). After
``profiler_warmup_steps`` steps, ``profiler_active_steps`` steps are timed; then the hooks are removed and the
table goes to ``profile.json`` and ``profile.md`` in the run folder and a ``profile`` event into events.jsonl.
"""

from __future__ import annotations

import fnmatch
import json
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from engine import devices
from engine.train.profile_files import PROFILE_JSON, PROFILE_TABLE, read_profile  # noqa: F401  (re-exported)
from engine.wording import counted

logger = logging.getLogger(__name__)

_PEFT_PREFIX = "base_model.model."


def split_patterns(value: str | None) -> list[str]:
    return [p.strip() for p in (value or "").split(",") if p.strip()]


def matching_modules(model: Any, patterns: list[str]) -> list[tuple[str, Any]]:
    """(name, module) of every module whose name (with or without PEFT's prefix) matches a pattern."""
    found = []
    for name, module in model.named_modules():
        if not name:
            continue
        short = name.removeprefix(_PEFT_PREFIX)
        if any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(short, p) for p in patterns):
            found.append((short, module))
    return found


def format_table(rows: list[dict[str, Any]], steps: int, device: str, step_ms: float) -> str:
    """A Markdown table of the profile, slowest module first."""
    lines = [f"Per-module time over {counted(steps, 'step')} on {device}; mean step {step_ms:.2f} ms.", "",
             "| module | calls/step | forward ms | backward ms | total ms | share of step |",
             "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for r in rows:
        lines.append(f"| {r['module']} | {r['calls']:g} | {r['forward_ms']:.3f} | {r['backward_ms']:.3f} | "
                     f"{r['total_ms']:.3f} | {100 * r['share']:.1f}% |")
    return "\n".join(lines) + "\n"


class ModuleProfilerCallback(TrainerCallback):
    """Times the matched modules' forward and backward per step; reports mean ms per step and share of the step."""

    def __init__(self, patterns: str | list[str], warmup_steps: int = 1, active_steps: int = 3,
                 event_writer: Any = None, folder: str | Path | None = None, top: int = 10):
        self.patterns = split_patterns(patterns) if isinstance(patterns, str) else list(patterns)
        self.warmup_steps, self.active_steps = warmup_steps, active_steps
        self.event_writer, self.folder, self.top = event_writer, folder, top
        self._handles: list[Any] = []
        self._pending: list[tuple[str, str, Any, Any]] = []
        self._open: dict[tuple[str, str], list[Any]] = defaultdict(list)
        self.totals: dict[str, dict[str, float]] = defaultdict(lambda: {"forward": 0.0, "backward": 0.0,
                                                                        "calls": 0})
        self.recording = False
        self.steps_timed = 0
        self.step_ms = 0.0
        self._step_start: float | None = None
        self.report: dict[str, Any] | None = None

    # -- hooks ---------------------------------------------------------------------------------------------
    def _start(self, name: str, phase: str) -> None:
        if self.recording:
            event = devices.make_event(enable_timing=True)
            event.record()
            self._open[(name, phase)].append(event)

    def _stop(self, name: str, phase: str) -> None:
        stack = self._open.get((name, phase))
        if self.recording and stack:
            end = devices.make_event(enable_timing=True)
            end.record()
            self._pending.append((name, phase, stack.pop(), end))

    def _attach(self, model: Any) -> list[str]:
        names = []
        for name, module in matching_modules(model, self.patterns):
            self._handles += [
                module.register_forward_pre_hook(lambda m, a, n=name: self._start(n, "forward")),
                module.register_forward_hook(lambda m, a, o, n=name: self._stop(n, "forward")),
                module.register_full_backward_pre_hook(lambda m, g, n=name: self._start(n, "backward")),
                module.register_full_backward_hook(lambda m, gi, go, n=name: self._stop(n, "backward")),
            ]
            names.append(name)
        return names

    def _detach(self) -> None:
        for handle in self._handles:
            handle.remove()
        self._handles.clear()

    # -- trainer events ------------------------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if model is None:
            return
        names = self._attach(model)
        if not names:
            logger.warning("profile_modules %s matched no module; nothing is profiled. Module names look like "
                           "`model.layers.0.self_attn`.", ",".join(self.patterns))
            return
        logger.info("Profiling %s (%s%s) for %s after %s.", counted(len(names), "module"), ", ".join(names[:4]),
                    ", ..." if len(names) > 4 else "", counted(self.active_steps, "step"),
                    counted(self.warmup_steps, "warm-up step"))

    def on_step_begin(self, args, state, control, **kwargs):
        active = self._handles and self.warmup_steps <= state.global_step < self.warmup_steps + self.active_steps
        if active and not self.recording:
            devices.synchronize()
            self._step_start = time.perf_counter()
        self.recording = bool(active)

    def on_step_end(self, args, state, control, **kwargs):
        if not self.recording:
            return
        devices.synchronize()
        if self._step_start is not None:
            self.step_ms += (time.perf_counter() - self._step_start) * 1000.0
        self._step_start = None
        for name, phase, start, end in self._pending:
            self.totals[name][phase] += start.elapsed_time(end)
            if phase == "forward":
                self.totals[name]["calls"] += 1
        self._pending.clear()
        self._open.clear()
        self.recording = False
        self.steps_timed += 1
        if self.steps_timed >= self.active_steps:
            self.finish()

    def on_train_end(self, args, state, control, **kwargs):
        if self.report is None and self.steps_timed:
            self.finish()
        self._detach()

    # -- report --------------------------------------------------------------------------------------------
    def finish(self) -> dict[str, Any]:
        """Remove the hooks and write the table, the JSON and the event; returns the report."""
        self._detach()
        steps = max(self.steps_timed, 1)
        step_ms = self.step_ms / steps
        rows = []
        for name, t in self.totals.items():
            fwd, bwd = t["forward"] / steps, t["backward"] / steps
            rows.append({"module": name, "calls": t["calls"] / steps, "forward_ms": round(fwd, 4),
                         "backward_ms": round(bwd, 4), "total_ms": round(fwd + bwd, 4),
                         "share": round((fwd + bwd) / step_ms, 4) if step_ms > 0 else 0.0})
        rows.sort(key=lambda r: r["total_ms"], reverse=True)
        device = devices.get_accelerator().label
        clock = "wall clock" if not devices.get_accelerator().is_accelerator else "device events"
        self.report = {"steps": self.steps_timed, "warmup_steps": self.warmup_steps, "device": device,
                       "clock": clock, "step_ms": round(step_ms, 3), "patterns": self.patterns, "modules": rows}
        if self.folder is not None:
            folder = Path(self.folder)
            folder.mkdir(parents=True, exist_ok=True)
            from engine.runs import write_text_atomic

            # each replaced whole: a link planted under either name (or the temp name) is never written through
            write_text_atomic(folder / PROFILE_JSON, json.dumps(self.report, indent=2))
            write_text_atomic(folder / PROFILE_TABLE, format_table(rows, self.steps_timed, device, step_ms))
        if self.event_writer is not None:
            self.event_writer.write({"event": "profile", **{k: v for k, v in self.report.items() if k != "modules"},
                                     "modules": rows[:self.top]})
        top = ", ".join(f"{r['module']} {r['total_ms']:.2f} ms ({100 * r['share']:.0f}%)" for r in rows[:3])
        logger.info("Module profile over %s: %s", counted(self.steps_timed, "step"), top or "no calls recorded")
        return self.report
