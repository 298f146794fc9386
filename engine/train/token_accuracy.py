"""``compute_accuracy``: the evaluation's next-token accuracy, as LLaMA-Factory's ``ComputeAccuracy`` computes it.

For each evaluated row, the share of its trained positions (label not -100) where the model's most likely next
token (the argmax of the logits one position earlier) is the label; ``eval_accuracy`` is the mean of those shares
over the rows (numpy's mean, as there). Rows put back to back in one padding-free batch are told apart by the
batch's ``cu_seq_lens_q`` offsets, so each counts as the row it is, as in LLaMA-Factory's padded batches. A row
with no trained position has no share: LLaMA-Factory's mean then becomes NaN; here the row is left out and the
log says how many were.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import torch

logger = logging.getLogger(__name__)

IGNORE = -100


def row_accuracies(logits: torch.Tensor, labels: torch.Tensor, starts: torch.Tensor | None = None
                   ) -> tuple[list[float], int]:
    """Each row's accuracy and how many rows had no trained position.

    ``logits``: (batch, length, vocab) or argmax ids (batch, length); ``labels``: (batch, length); ``starts``: the
    offsets of rows laid back to back in a batch of one (``cu_seq_lens_q``: 0, then each row's end).
    """
    preds = logits.argmax(-1) if logits.dim() == 3 else logits
    pred, label = preds[:, :-1], labels[:, 1:].to(preds.device)
    trained = label != IGNORE
    hits = (pred == label) & trained
    if starts is not None and preds.shape[0] == 1:
        ends = starts.to(preds.device).long()[1:]
        rows = torch.bucketize(torch.arange(1, preds.shape[1], device=preds.device), ends, right=True)
        count = len(ends)
        totals = torch.zeros(count, dtype=torch.float64, device=preds.device).index_add_(
            0, rows.clamp(max=count - 1), trained[0].double())
        right = torch.zeros(count, dtype=torch.float64, device=preds.device).index_add_(
            0, rows.clamp(max=count - 1), hits[0].double())
    else:
        totals, right = trained.sum(1).double(), hits.sum(1).double()
    scored = totals > 0
    return (right[scored] / totals[scored]).tolist(), int((~scored).sum())


class AccuracyMixin:
    """A Trainer mixin: with ``compute_accuracy`` on, evaluation adds ``eval_accuracy`` beside the loss."""

    compute_accuracy: bool = False
    _accuracies: list[float] | None = None
    _unscored_rows: int = 0

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if not self.compute_accuracy or self._accuracies is None or "labels" not in inputs:
            return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)
        starts = inputs.get("cu_seq_lens_q")
        labels = inputs["labels"]
        loss, logits, _ = super().prediction_step(model, inputs, False, ignore_keys=ignore_keys)
        if isinstance(logits, (list, tuple)):  # as LLaMA-Factory's eval_logit_processor: the (batch, length, vocab) one
            logits = next(t for t in logits if torch.is_tensor(t) and t.dim() == 3)
        shares, unscored = row_accuracies(logits, labels, starts)
        self._accuracies.extend(shares)
        self._unscored_rows += unscored
        return (loss, None, None)  # nothing more for the loop to gather: the accuracies are kept here

    def evaluation_loop(self, dataloader, description, prediction_loss_only=None, ignore_keys=None,
                        metric_key_prefix="eval"):
        if not self.compute_accuracy:
            return super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys,
                                           metric_key_prefix)
        self._accuracies, self._unscored_rows = [], 0
        try:
            output = super().evaluation_loop(dataloader, description, prediction_loss_only, ignore_keys,
                                             metric_key_prefix)
            shares, unscored = _gathered(self._accuracies, self._unscored_rows)
        finally:
            self._accuracies = None
        if unscored:
            logger.warning("%d evaluated rows have no trained token, so no accuracy; eval_accuracy is the mean over "
                           "the other %d (LLaMA-Factory's would be NaN).", unscored, len(shares))
        if shares:
            output.metrics[f"{metric_key_prefix}_accuracy"] = float(np.mean(shares))
        return output


def _gathered(shares: list[float], unscored: int) -> tuple[list[float], int]:
    """Every process's row accuracies, in rank order (a single process: its own)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return shares, unscored
    parts: list[Any] = [None] * torch.distributed.get_world_size()
    torch.distributed.all_gather_object(parts, (shares, unscored))
    return [s for part, _ in parts for s in part], sum(count for _, count in parts)


def accuracy_wanted(cfg: Any, has_eval: bool) -> bool:
    """Whether this run's evaluation computes eval_accuracy (saying why not where the config asks for it)."""
    if not cfg.finetuning.compute_accuracy:
        return False
    if not has_eval:
        logger.warning("compute_accuracy scores the evaluation set, and this run has none: set eval_dataset or "
                       "val_size (and do_eval or eval_strategy).")
        return False
    return True
