"""ORPO and SimPO (``stage: dpo`` with ``pref_loss: orpo`` or ``simpo``) as LLaMA-Factory 0.9.5 trains them.

Both train without a reference model, on the same pairs as DPO: our template-tokenized ``prompt_ids``,
``chosen_ids`` and ``rejected_ids``, cut to ``cutoff_len`` as LLaMA-Factory cuts them. (TRL keeps ORPO and SimPO in
``trl.experimental`` and tokenizes decoded text itself, with its own BOS/EOS additions and truncation: other tokens
than LLaMA-Factory's.) One batch holds every chosen sequence, then every rejected one, each the prompt and one
answer, only the answer labelled (LLaMA-Factory's pairwise collator). Each sequence's log-probability is the mean
over its answer's tokens, and per pair, with ``beta`` = ``pref_beta``:

- ORPO: ``-chosen + beta * -logsigmoid(log_odds)``, where ``log_odds = (chosen - rejected) - (log1p(-exp(chosen)) -
  log1p(-exp(rejected)))``;
- SimPO: ``-logsigmoid(beta * (chosen - rejected - simpo_gamma / beta))``;

plus ``pref_ftx * -chosen`` when ``pref_ftx`` is set, averaged over the pairs. The logged metrics are
LLaMA-Factory's: ``rewards/chosen`` (``beta * chosen``), ``rewards/rejected``, ``rewards/accuracies``,
``rewards/margins``, ``logps/chosen``, ``logps/rejected``, ``logits/chosen``, ``logits/rejected``, and for ORPO
``sft_loss`` and ``odds_ratio_loss``. A pair whose answers ``cutoff_len`` left without a token (kept, as there)
adds 0 to the loss where LLaMA-Factory's mean over no token gives NaN.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import torch
import torch.nn.functional as F
from transformers import Trainer

from engine.data.tokenize import IGNORE
from engine.train.parallel.fsdp import ShardingMixin

PAIR_METRICS = ("rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins", "logps/chosen",
                "logps/rejected", "logits/chosen", "logits/rejected")
ORPO_METRICS = ("sft_loss", "odds_ratio_loss")
"""The logged pair metrics (LLaMA-Factory's names); ORPO adds the last two."""


class PairCollator:
    """Pairs as one padded batch: every chosen sequence (prompt + chosen), then every rejected one; labels only on
    the answers; padded on the right to a multiple of 8 (LLaMA-Factory's ``PairwiseDataCollatorWithPadding``)."""

    def __init__(self, pad_token_id: int, multiple: int = 8) -> None:
        self.pad, self.multiple = pad_token_id, multiple

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        rows = [(list(f["prompt_ids"]), list(f[key])) for key in ("chosen_ids", "rejected_ids") for f in features]
        width = max(len(prompt) + len(answer) for prompt, answer in rows)
        width = -(-width // self.multiple) * self.multiple
        ids = torch.full((len(rows), width), self.pad, dtype=torch.long)
        labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        for row, (prompt, answer) in enumerate(rows):
            size = len(prompt) + len(answer)
            ids[row, :size] = torch.tensor(prompt + answer, dtype=torch.long)
            labels[row, len(prompt):size] = torch.tensor(answer, dtype=torch.long)
            mask[row, :size] = 1
        return {"input_ids": ids, "attention_mask": mask, "labels": labels}


def answer_logps(logits: torch.Tensor, labels: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per sequence: the summed log-probability of its labelled tokens and how many there are (LLaMA-Factory's
    ``get_batch_logps``)."""
    labels = labels[:, 1:].clone()
    logits = logits[:, :-1, :]
    scored = labels != IGNORE
    labels[~scored] = 0
    per_token = torch.gather(logits.log_softmax(-1), dim=2, index=labels.unsqueeze(2)).squeeze(2)
    return (per_token * scored).sum(-1), scored.sum(-1)


def pair_losses(chosen: torch.Tensor, rejected: torch.Tensor, loss: str, beta: float, gamma: float,
                ftx: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(per-pair loss, per-pair SFT term) from the answers' mean log-probabilities (see the module docstring)."""
    sft = -chosen
    if loss == "orpo":
        log_odds = (chosen - rejected) - (torch.log1p(-torch.exp(chosen)) - torch.log1p(-torch.exp(rejected)))
        losses = sft + beta * -F.logsigmoid(log_odds)
    else:
        losses = -F.logsigmoid(beta * ((chosen - rejected) - gamma / beta))
    if ftx > 1e-6:
        losses = losses + ftx * sft
    return losses, sft


class OddsRatioTrainer(ShardingMixin, Trainer):
    """transformers' Trainer with LLaMA-Factory's ORPO or SimPO loss on :class:`PairCollator` batches."""

    def __init__(self, *args: Any, loss: str, beta: float, gamma: float, ftx: float, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.pref_loss, self.beta, self.gamma, self.ftx = loss, beta, gamma, ftx
        self._pair_metrics: dict[str, dict[str, list[float]]] = {"train": defaultdict(list), "eval": defaultdict(list)}

    def compute_loss(self, model: Any, inputs: dict[str, torch.Tensor], return_outputs: bool = False,
                     num_items_in_batch: Any = None) -> Any:
        labels = inputs["labels"]
        outputs = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"], use_cache=False)
        logits = outputs.logits.to(torch.float32)
        sums, lengths = answer_logps(logits, labels)
        means = sums / lengths.clamp(min=1)
        pairs = labels.size(0) // 2
        chosen, rejected = means[:pairs], means[pairs:]
        trained = (lengths[:pairs] > 0) & (lengths[pairs:] > 0)
        # an untrained pair (no answer token left) gets values that keep every term finite, then adds 0
        safe_chosen = torch.where(trained, chosen, torch.full_like(chosen, -1.0))
        safe_rejected = torch.where(trained, rejected, torch.full_like(rejected, -1.0))
        losses, sft = pair_losses(safe_chosen, safe_rejected, self.pref_loss, self.beta, self.gamma, self.ftx)
        losses = torch.where(trained, losses, torch.zeros_like(losses))
        self._record(chosen.detach(), rejected.detach(), logits.detach(), pairs, losses.detach(), sft.detach())
        loss = losses.mean()
        return (loss, outputs) if return_outputs else loss

    def _record(self, chosen: torch.Tensor, rejected: torch.Tensor, logits: torch.Tensor, pairs: int,
                losses: torch.Tensor, sft: torch.Tensor) -> None:
        metrics = self._pair_metrics["train" if self.model.training else "eval"]
        rewards_chosen, rewards_rejected = self.beta * chosen, self.beta * rejected
        values = dict(zip(PAIR_METRICS, (
            rewards_chosen.mean(), rewards_rejected.mean(), (rewards_chosen > rewards_rejected).float().mean(),
            (rewards_chosen - rewards_rejected).mean(), chosen.mean(), rejected.mean(), logits[:pairs].mean(),
            logits[pairs:].mean()), strict=True))
        if self.pref_loss == "orpo":
            values.update(zip(ORPO_METRICS, (sft.mean(), ((losses - sft) / self.beta).mean()), strict=True))
        for key, value in values.items():
            metrics[key].append(float(value))

    def prediction_step(self, model: Any, inputs: dict[str, Any], prediction_loss_only: bool,
                        ignore_keys: list[str] | None = None) -> tuple[torch.Tensor, None, None]:
        inputs = self._prepare_inputs(inputs)
        with torch.no_grad():
            loss = self.compute_loss(model, inputs)
        return loss.detach(), None, None

    def _metric_names(self) -> list[str]:
        return list(PAIR_METRICS) + (list(ORPO_METRICS) if self.pref_loss == "orpo" else [])

    def log(self, logs: dict[str, float], *args: Any, **kwargs: Any) -> None:
        """The step's (or evaluation's) pair metrics beside the loss, ``eval_``-prefixed for evaluation: averaged
        over the batches since the last log, of every rank (as LLaMA-Factory reduces them; every rank logs at the
        same steps, so each joins the one sum)."""
        mode, prefix = ("train", "") if "loss" in logs else ("eval", "eval_")
        stored = self._pair_metrics[mode]
        names = self._metric_names()
        totals = torch.tensor([[sum(stored.get(name, [])), len(stored.get(name, []))] for name in names],
                              dtype=torch.float32)
        if self.accelerator.num_processes > 1:
            totals = self.accelerator.reduce(totals.to(self.accelerator.device), "sum").cpu()
        for name, (total, count) in zip(names, totals.tolist()):
            if count:
                logs[f"{prefix}{name}"] = total / count
        stored.clear()
        super().log(logs, *args, **kwargs)
