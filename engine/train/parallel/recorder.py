"""A Trainer callback that records the parallel strategy in effect once the model is prepared."""

from __future__ import annotations

import logging
from typing import Any

from transformers import TrainerCallback

from engine.train.parallel.info import describe, summary

logger = logging.getLogger(__name__)


class ParallelRecorder(TrainerCallback):
    """On train begin (after ``Accelerator.prepare``), writes ``run.json``'s ``parallel`` and adds it to the start
    event. Put it before the events callback and share ``extra_start`` with it."""

    def __init__(self, ctx: Any, extra_start: dict[str, Any], launcher: str | None = None):
        self.ctx = ctx
        self.extra_start = extra_start
        self.launcher = launcher
        self.trainer: Any = None
        self.info: dict[str, Any] | None = None

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        trainer = self.trainer
        target = trainer.model if trainer is not None else model
        wrapped = getattr(trainer, "model_wrapped", None) if trainer is not None else None
        if target is None:
            return
        info = describe(target, wrapped)
        if self.launcher:
            info["launcher"] = self.launcher
        self.info = info
        self.extra_start["parallel"] = info
        logger.info("Parallelism in effect: %s", summary(info))
        if state.is_world_process_zero and self.ctx.is_main_process:
            try:
                self.ctx.folder.update(parallel=info)
            except OSError as err:  # the run goes on; the next write retries the folder
                logger.warning("Could not record the parallel strategy in run.json: %s", err)
