"""Training steps whose rows have no token to train on: every label masked, as in rows whose replies ``cutoff_len``
cut away (kept, as LLaMA-Factory keeps them, with a warning when the data is loaded).

LLaMA-Factory divides the loss sum of such a step by its zero trained tokens, so it logs NaN and trains on a NaN
gradient. The label-position loss here is 0 with a zero gradient instead; the paths that run the model's own loss
(label smoothing, several GPUs, DeepSpeed) still give NaN, as LLaMA-Factory does. Either way a warning names the
step and the cause, so that neither a 0 nor a NaN in the log goes unexplained.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

logger = logging.getLogger("engine.train.sft")

REPORTED = 5  # steps named one by one; later ones are summed up in one line


def nothing_to_train(labels: torch.Tensor, num_items_in_batch: Any) -> bool:
    """Whether the optimizer step of this micro-batch has no trained token: ``num_items_in_batch`` (the step's
    count, all its micro-batches) is 0, or, when it is not given, this batch's shifted labels are all masked."""
    if num_items_in_batch is not None:
        return not int(num_items_in_batch)
    return not bool((labels[:, 1:] != -100).any())


def warn_empty_step(trainer: Any, outcome: str) -> None:
    """Warn, once per optimizer step (the first :data:`REPORTED` of them), that the step has nothing to train on;
    ``outcome`` says what its loss is."""
    seen = trainer.__dict__.setdefault("_empty_steps", set())
    step = trainer.state.global_step + 1
    if step in seen:
        return
    seen.add(step)
    if len(seen) <= REPORTED:
        logger.warning(
            "Step %d: none of its rows has a token to train on (every label is masked: rows whose replies cutoff_len "
            "cut away, as the warning \"have no trained token left\" counted when the data was loaded). %s Raise "
            "cutoff_len, or remove such rows, so that every step trains.", step, outcome)
    elif len(seen) == REPORTED + 1:
        logger.warning("More steps have no token to train on (step %d and later); they are not named one by one.",
                       step)


ZERO = ("Its loss is logged as 0 and its gradient is 0 (LLaMA-Factory divides by 0 tokens there and logs NaN); the "
        "optimizer still steps on its momentum.")
NAN = ("Its loss is NaN (a sum over 0 tokens divided by 0), as in LLaMA-Factory, and so is its gradient: with this "
       "setup (label smoothing, several GPUs or DeepSpeed) the model's own loss runs.")
