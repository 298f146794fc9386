"""The output head and cross-entropy over the trained positions, a chunk of positions at a time.

The plain path computes ``tokens x vocabulary`` logits, keeps them and their log-softmax for the backward pass and
builds two more tensors of that size in it: on the reference workload (README "Speed": 8 x 256 tokens, vocabulary
8,192) four 60 MB tensors at the moment memory peaks. When the head's weight does not train (LoRA, freeze, or
any method that leaves ``lm_head`` alone) its backward needs only the hidden states' gradient, ``(softmax - onehot)
@ W``, which is computed here chunk by chunk during the forward pass and kept (``tokens x hidden``, 64x smaller at
that vocabulary); the logits of a chunk are freed before the next one. The loss is the same sum of token
cross-entropies (log-sum-exp minus the target's logit, in float32 like the plain path), and so are its gradients.

With a template that adds tokens, LoRA trains those tokens' rows of the head (PEFT's trainable-token layer, given a
row-sparse forward by ``engine.models.token_rows``). The head is then the frozen matrix with a few rows replaced,
and the same chunks also give those rows' gradient, ``(softmax - onehot)[:, new ids].T @ hidden`` (a few rows x
hidden), so that head takes this path too.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from engine.train import token_weights

CHUNK = 1024  # positions per chunk: 32 MB of float32 logits at a 8,192-token vocabulary


def _softmax_in_place(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(softmax of each row, written over ``logits``; each row's log-sum-exp). The log-sum-exp is
    ``torch.logsumexp``'s own formula (row max, sum of exponentials of the shifted row, log, plus the max; an
    infinite max shifts by 0), so the loss is bit for bit the same; but no row-sized temporary is allocated (its
    ``logits - max`` copy cost a fresh tokens x vocabulary block and a pass over it per chunk)."""
    peak = logits.amax(dim=-1, keepdim=True)
    peak.masked_fill_(peak.abs() == float("inf"), 0)
    sums = logits.sub_(peak).exp_().sum(dim=-1, keepdim=True)
    lse = sums.log().add_(peak).squeeze(1)
    return logits.div_(sums), lse


class HeadCrossEntropySum(torch.autograd.Function):
    """``cross_entropy(hidden @ W.T, targets, reduction="sum")`` for a frozen ``weight``, where ``W`` is ``weight``
    with the rows ``index`` replaced by ``rows`` when those are given (trained token rows); with ``weighting`` (an
    :class:`engine.train.token_weights.Weighting`) each token's term is scaled by its weight, gradient included."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, rows=None, index=None, weighting=None):
        # The products run in the mixed-precision dtype where autocast is on (as the head's own matmul would), else
        # in the wider of the two inputs'; the dtypes are made explicit, since in-place products are not autocast.
        device = hidden.device.type
        if torch.is_autocast_enabled(device):
            compute = torch.get_autocast_dtype(device)
            with torch.autocast(device_type=device, enabled=False):
                return HeadCrossEntropySum._forward(ctx, hidden, weight, targets, rows, index, weighting, compute)
        compute = torch.promote_types(hidden.dtype, weight.dtype)
        return HeadCrossEntropySum._forward(ctx, hidden, weight, targets, rows, index, weighting, compute)

    @staticmethod
    def _forward(ctx, hidden, weight, targets, rows, index, weighting, compute):
        weight = weight.to(compute)
        wide = torch.promote_types(hidden.dtype, torch.float32)  # float32 at least, as the plain path's .float()
        total = hidden.new_zeros((), dtype=wide)
        grad_hidden = torch.empty_like(hidden)
        grad_rows = None
        ctx.rows_dtype = None if rows is None else rows.dtype
        if rows is not None:
            rows = rows.to(weight.dtype)
            shift = rows - weight.index_select(0, index)  # W = weight + scatter(index, shift)
            grad_rows = torch.zeros_like(rows, dtype=wide)
        for start in range(0, hidden.shape[0], CHUNK):
            part = hidden[start:start + CHUNK].to(compute)
            logits = part.mm(weight.t())
            if rows is not None:
                logits.index_copy_(1, index, part.mm(rows.t()))
            logits = logits.to(wide)
            target = targets[start:start + CHUNK]
            picked_logit = logits.gather(1, target[:, None]).squeeze(1)
            top = None
            if weighting is not None and weighting.kind == "eaft":  # its weight reads the logits themselves
                top = torch.topk(logits, k=min(token_weights.EAFT_TOP_K, logits.shape[1]), dim=1).values
            probs, lse = _softmax_in_place(logits)
            losses = lse - picked_logit
            scale = None
            if weighting is not None:
                scale = token_weights.weights(weighting, top if top is not None else logits, losses)
                losses = losses * scale
            total += losses.sum()
            probs[torch.arange(len(target), device=probs.device), target] -= 1
            if scale is not None:
                probs.mul_(scale[:, None])
            scores = probs.to(weight.dtype)
            grad = scores.mm(weight)
            if rows is not None:
                picked = scores.index_select(1, index)
                grad.addmm_(picked, shift)
                grad_rows += picked.t().mm(part).to(wide)
            grad_hidden[start:start + CHUNK] = grad
            del logits, probs, scores
        ctx.save_for_backward(grad_hidden, grad_rows)
        return total

    @staticmethod
    def backward(ctx, grad_output):
        grad_hidden, grad_rows = ctx.saved_tensors
        scale = grad_output.to(grad_hidden.dtype)
        rows_grad = None
        if grad_rows is not None and ctx.needs_input_grad[3]:
            rows_grad = (grad_rows * grad_output.to(grad_rows.dtype)).to(ctx.rows_dtype)
        return grad_hidden * scale, None, None, rows_grad, None, None


def _frozen_head(head: Any) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None] | None:
    """(frozen weight, trained rows, their ids) of a head the chunked path can take, else None."""
    if head._forward_hooks or head._forward_pre_hooks:
        return None
    if type(head) is nn.Linear:
        if head.bias is not None or head.weight.requires_grad:
            return None
        return head.weight, None, None
    from engine.models.token_rows import head_rows

    parts = head_rows(head)
    if parts is None or parts[0].requires_grad:
        return None
    return parts


def chunked_head_loss(head: Any, hidden: torch.Tensor, targets: torch.Tensor,
                      weighting: Any = None) -> torch.Tensor | None:
    """The summed loss through :class:`HeadCrossEntropySum`, or None when the plain path must run (the head is not
    a bias-free ``nn.Linear`` with a frozen weight, or such a weight with PEFT's trained token rows; no gradients
    are wanted; or a target is out of range)."""
    if not torch.is_grad_enabled() or not hidden.requires_grad:
        return None
    parts = _frozen_head(head)
    if parts is None:
        return None
    weight, rows, index = parts
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= weight.shape[0]):
        return None  # let cross_entropy raise its own error
    return HeadCrossEntropySum.apply(hidden, weight, targets, rows, index, weighting)
