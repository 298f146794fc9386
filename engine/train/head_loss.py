"""The output head and cross-entropy over the trained positions, a chunk of positions at a time.

The plain path computes ``tokens x vocabulary`` logits, keeps them and their log-softmax for the backward pass and
builds two more tensors of that size in it: on the reference workload (README "Speed": 8 x 256 tokens, vocabulary
8,192) four 60 MB tensors at the moment memory peaks. When the head's weight does not train (LoRA, freeze, or
any method that leaves ``lm_head`` alone) its backward needs only the hidden states' gradient, ``(softmax - onehot)
@ W``, which is computed here chunk by chunk during the forward pass and kept (``tokens x hidden``, 64x smaller at
that vocabulary); the logits of a chunk are freed before the next one. The loss is the same sum of token
cross-entropies (log-sum-exp minus the target's logit, in float32 like the plain path), and so are its gradients.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

CHUNK = 1024  # positions per chunk: 32 MB of float32 logits at a 8,192-token vocabulary


class HeadCrossEntropySum(torch.autograd.Function):
    """``cross_entropy(hidden @ weight.T, targets, reduction="sum")`` for a frozen ``weight``."""

    @staticmethod
    def forward(ctx, hidden, weight, targets):
        wide = torch.promote_types(hidden.dtype, torch.float32)  # float32 at least, as the plain path's .float()
        total = hidden.new_zeros((), dtype=wide)
        grad_hidden = torch.empty_like(hidden)
        for start in range(0, hidden.shape[0], CHUNK):
            part = hidden[start:start + CHUNK]
            logits = part.mm(weight.t()).to(wide)
            target = targets[start:start + CHUNK]
            lse = torch.logsumexp(logits, dim=-1)
            total += (lse - logits.gather(1, target[:, None]).squeeze(1)).sum()
            probs = logits.sub_(lse[:, None]).exp_()  # softmax, in place of the logits
            probs[torch.arange(len(target), device=probs.device), target] -= 1
            grad_hidden[start:start + CHUNK] = probs.to(weight.dtype).mm(weight)
            del logits, probs
        ctx.save_for_backward(grad_hidden)
        return total

    @staticmethod
    def backward(ctx, grad_output):
        (grad_hidden,) = ctx.saved_tensors
        return grad_hidden * grad_output.to(grad_hidden.dtype), None, None


def chunked_head_loss(head: Any, hidden: torch.Tensor, targets: torch.Tensor) -> torch.Tensor | None:
    """The summed loss through :class:`HeadCrossEntropySum`, or None when the plain path must run (the head is not
    a bias-free ``nn.Linear`` with a frozen weight, no gradients are wanted, or a target is out of range)."""
    if type(head) is not nn.Linear or head.bias is not None or head.weight.requires_grad:
        return None
    if head._forward_hooks or head._forward_pre_hooks or not torch.is_grad_enabled() or not hidden.requires_grad:
        return None
    if targets.numel() and (int(targets.min()) < 0 or int(targets.max()) >= head.weight.shape[0]):
        return None  # let cross_entropy raise its own error
    return HeadCrossEntropySum.apply(hidden, head.weight, targets)
