"""LLaMA-Factory's token-weighted SFT losses: DFT and EAFT.

Both keep the cross-entropy of each trained token and scale it by a weight computed without gradient:

- DFT (``use_dft_loss``): the probability the model gives the target token, ``exp(-cross_entropy)``;
- EAFT (``use_eaft_loss``): the entropy of the model's top 20 predictions at that position (a softmax over those
  20 logits), divided by 3, to the power ``eaft_alpha``.

ASFT (``use_asft_loss``) is the DFT loss (a mean over the micro-batch's trained tokens) plus ``asft_alpha`` times
the mean KL divergence of the model's predictions from a reference model's at those tokens (:func:`asft_loss`,
LLaMA-Factory's ``asft_loss_func``); the trainer computes the reference logits.

The sum is divided as the plain loss is (by the trained tokens of the accumulated batch, or their mean), so these
are LLaMA-Factory 0.9.5's ``dft_loss_func`` and ``eaft_loss_func``. :func:`weights` serves the chunked head loss
(``engine.train.head_loss``) and the plain path; :func:`lm_loss_func` is the same loss over a model's full logits,
for the paths where transformers' Trainer computes the loss (``compute_loss_func``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

EAFT_TOP_K = 20


@dataclass(frozen=True)
class Weighting:
    """Which weighting (``dft`` or ``eaft``) and EAFT's power."""

    kind: str
    alpha: float = 1.0


def from_config(cfg: Any) -> Weighting | None:
    """The weighting a config asks for (None: the plain cross-entropy; ASFT: :func:`asft_loss`)."""
    methods = cfg.methods
    if getattr(methods, "use_asft_loss", False):
        return Weighting("asft", float(methods.asft_alpha))
    if getattr(methods, "use_dft_loss", False):
        return Weighting("dft")
    if getattr(methods, "use_eaft_loss", False):
        return Weighting("eaft", float(methods.eaft_alpha))
    return None


@torch.no_grad()
def weights(weighting: Weighting, logits: torch.Tensor, losses: torch.Tensor) -> torch.Tensor:
    """Each position's weight, from its (float) ``logits`` and its cross-entropy ``losses`` (ASFT: 1, its
    evaluation loss being the plain one)."""
    if weighting.kind == "asft":
        return torch.ones_like(losses)
    if weighting.kind == "dft":
        return torch.exp(-losses)
    top = torch.topk(logits, k=min(EAFT_TOP_K, logits.shape[-1]), dim=-1).values
    log_probs = top - torch.logsumexp(top, dim=-1, keepdim=True)
    entropy = -(log_probs.exp() * log_probs).sum(dim=-1)
    return torch.pow(entropy / 3.0, weighting.alpha)


def token_losses(logits: torch.Tensor, targets: torch.Tensor, weighting: Weighting) -> torch.Tensor:
    """Each target's cross-entropy under (float) ``logits``, scaled by its weight (the gradient flows through the
    cross-entropy only)."""
    losses = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    return losses * weights(weighting, logits, losses)


def lm_loss_func(weighting: Weighting):
    """A ``compute_loss_func`` for transformers' Trainer: the weighted loss over a causal LM's ``logits``."""

    def loss_func(outputs: Any, labels: torch.Tensor, num_items_in_batch: Any = None) -> torch.Tensor:
        logits = outputs.get("logits")
        if logits is None:
            return outputs.get("loss", torch.tensor(0.0))
        logits = logits.float()
        targets = torch.nn.functional.pad(labels, (0, 1), value=-100)[..., 1:].reshape(-1).to(logits.device)
        logits = logits.view(-1, logits.shape[-1])
        keep = targets != -100
        if not keep.any():
            return logits.sum() * 0.0
        total = token_losses(logits[keep], targets[keep], weighting).sum()
        if num_items_in_batch is None:
            return total / keep.sum()
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(total.device)
        return total / num_items_in_batch

    return loss_func


def asft_loss(logits: torch.Tensor, labels: torch.Tensor, ref_logits: torch.Tensor, alpha: float) -> torch.Tensor:
    """LLaMA-Factory's ASFT loss of a causal LM's ``logits`` against ``ref_logits`` (same shape) at ``labels``."""
    vocab = logits.shape[-1]
    policy = logits.float()[..., :-1, :].reshape(-1, vocab)
    reference = ref_logits.float()[..., :-1, :].reshape(-1, vocab)
    targets = labels[..., 1:].reshape(-1).to(policy.device)
    keep = targets != -100
    if not keep.any():
        return policy.sum() * 0.0
    dft = token_losses(policy[keep], targets[keep], Weighting("dft")).mean()
    kl = torch.nn.functional.kl_div(torch.log_softmax(policy, dim=-1), torch.softmax(reference, dim=-1),
                                    reduction="none").sum(dim=-1)
    return dft + alpha * (kl * keep.float()).sum() / keep.sum()
