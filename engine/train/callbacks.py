"""Trainer callbacks: live events for the board, and a graceful stop on SIGTERM."""

from __future__ import annotations

import logging
import math
import time
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from engine import devices
from engine.evaluate.metrics import perplexity
from engine.lifecycle import JobContext
from engine.ranks import any_rank

logger = logging.getLogger(__name__)


def _clean(value: Any) -> Any:
    if isinstance(value, float) and (math.isnan(value) or math.isinf(value)):
        return None
    if hasattr(value, "item"):
        return _clean(value.item())
    return value


class EventsCallback(TrainerCallback):
    """Appends start/log/eval/checkpoint events to the run's events.jsonl.

    tokens/s counts real (non-pad) tokens, from the trainer's ``num_input_tokens_seen`` (non_padding mode),
    measured from the first logged step on so that start-up cost does not distort it.
    """

    def __init__(self, ctx: JobContext, extra_start: dict[str, Any] | None = None):
        self.ctx = ctx
        self.extra_start = extra_start or {}
        self.t0 = time.time()
        self.first_step_time: float | None = None
        self.first_step_tokens = 0
        self.first_step = 0

    def on_train_begin(self, args, state, control, **kwargs):
        self.t0 = time.time()
        self.ctx.events.write({
            "event": "start", "total_steps": state.max_steps, "epochs": args.num_train_epochs,
            "device": str(devices.current_device()), "world_size": args.world_size, **self.extra_start,
        })

    def on_prediction_step(self, args, state, control, eval_dataloader=None, **kwargs):
        """Evaluation progress (``progress`` events, about one a second) when there is no training to show it."""
        if not state.is_world_process_zero or state.max_steps > 0:
            return
        self._eval_batches = getattr(self, "_eval_batches", 0) + 1
        try:
            total = len(eval_dataloader) if eval_dataloader is not None else 0
        except TypeError:
            total = 0
        now = time.time()
        if total and (self._eval_batches >= total or now - getattr(self, "_eval_reported", 0.0) >= 1.0):
            self._eval_reported = now
            self.ctx.events.write({"event": "progress", "stage": "eval", "done": self._eval_batches, "total": total,
                                   "fraction": round(min(1.0, self._eval_batches / total), 3)})

    def on_evaluate(self, args, state, control, **kwargs):
        self._eval_batches = 0

    def on_step_end(self, args, state, control, **kwargs):
        if self.first_step_time is None and state.global_step >= 1:
            from engine.train import phases

            phases.mark("first step")
            self.first_step_time = time.time()
            self.first_step_tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
            self.first_step = state.global_step

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero:
            return
        logs = dict(logs or {})
        now = time.time()
        elapsed = now - self.t0
        step, total = state.global_step, state.max_steps
        if any(k.startswith("eval_") for k in logs):
            if total <= 0:  # an eval-only run: no training steps, epochs or tokens to speak of
                logs = without_training_fields(logs)
                event = {"event": "eval"}
            else:
                event = {"event": "eval", "step": step, "total_steps": total, "epoch": _clean(state.epoch)}
            for key, value in logs.items():
                event[key] = _clean(value)
            if isinstance(event.get("eval_loss"), float):
                event["perplexity"] = _clean(perplexity(event["eval_loss"]))  # the results' value (inf: None)
            self.ctx.events.write(event)
            shown = {k: v for k, v in event.items() if k.startswith("eval_") and isinstance(v, (int, float))
                     and not k.endswith(("_runtime", "_per_second"))}
            logger.info("evaluation%s  %s", f" at step {step}/{total}" if total > 0 else "",
                        "  ".join(f"{k.removeprefix('eval_')} {v:.4g}" for k, v in shown.items()))
            return
        if "train_loss" in logs:  # the closing summary: it goes into the end event's metrics
            self.ctx.metrics.update({k: _clean(v) for k, v in logs.items() if isinstance(v, (int, float))})
            return
        if "loss" not in logs:
            return
        tokens = int(getattr(state, "num_input_tokens_seen", 0) or 0)
        tps = None
        if self.first_step_time is not None and now > self.first_step_time and step > self.first_step:
            tps = (tokens - self.first_step_tokens) / (now - self.first_step_time)
        eta = elapsed / step * (total - step) if step and total else None
        event = {
            "event": "log", "step": step, "total_steps": total,
            "loss": _clean(logs.get("loss")),
            "lr": _clean(logs.get("learning_rate")), "grad_norm": _clean(logs.get("grad_norm")),
            "epoch": _clean(state.epoch), "tokens_per_s": round(tps, 1) if tps else None,
            "tokens_seen": tokens, "elapsed": round(elapsed, 2), "eta": round(eta, 1) if eta is not None else None,
            "memory_gb": round(devices.peak_memory() / 2**30, 3),
        }
        for key, value in logs.items():
            if key not in ("loss", "learning_rate", "grad_norm", "epoch") and isinstance(value, (int, float)):
                event.setdefault(key, _clean(value))
        self.ctx.events.write(event)
        loss = float("nan") if event["loss"] is None else event["loss"]  # 0.0 is a loss (GRPO often has it), not NaN
        logger.info(
            "step %d/%d  loss %.4f  lr %.3g  %s tokens/s  eta %ss", step, total, loss,
            event["lr"] or 0.0, event["tokens_per_s"] or "-", event["eta"] if event["eta"] is not None else "-",
        )

    def on_save(self, args, state, control, **kwargs):
        from engine.fileperms import match_umask

        folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        if state.is_world_process_zero and self.ctx.config_yaml is not None and folder.is_dir():
            from engine.runs import write_provenance

            write_provenance(folder, self.ctx.config_yaml)  # also beside a checkpoint a killed run leaves
        match_umask(str(folder))
        self.ctx.events.write({
            "event": "checkpoint", "step": state.global_step,
            "path": f"{args.output_dir}/checkpoint-{state.global_step}",
        })


class AbortCallback(TrainerCallback):
    """When SIGTERM arrived, save a checkpoint at the end of the current step and stop training."""

    def __init__(self, ctx: JobContext):
        self.ctx = ctx

    def on_train_begin(self, args, state, control, **kwargs):
        self.ctx.in_loop = True

    def on_step_end(self, args, state, control, **kwargs):
        if any_rank(self.ctx.abort_requested):  # every rank stops at the same step (checkpoints are collective)
            self.ctx.abort_requested = True
            control.should_save = True
            control.should_training_stop = True
        return control

    def on_train_end(self, args, state, control, **kwargs):
        self.ctx.in_loop = False


TRAINING_ONLY = ("epoch", "num_input_tokens_seen", "step", "total_steps")


def without_training_fields(metrics: dict) -> dict:
    """Metrics of an eval-only run without the training counters the Trainer adds (always 0 there) and its
    model-preparation timing."""
    return {k: v for k, v in metrics.items() if k not in TRAINING_ONLY and not k.endswith("_model_preparation_time")}
