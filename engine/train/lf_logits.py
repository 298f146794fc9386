"""``logits/chosen`` and ``logits/rejected`` of dpo and kto as LLaMA-Factory 0.9.5 defines them.

LLaMA-Factory takes them from the policy's full logits of the padded batch (every position, prompt and padding
included, batches padded to a multiple of 8): dpo logs each batch's mean over the chosen (rejected) rows' positions
and vocabulary, averaged over the batches since the last log; kto sums each row's logits over its positions and
vocabulary and divides the sum over the batches since the last log by the rows counted. TRL's trainers log a mean
over the answer tokens instead, from a fused head that never builds the logits. Here the mean over the vocabulary at
each position is computed from the policy's last hidden states (kept by a forward hook on its backbone) as the
head would give it: ``h . mean(W) + mean(b)`` times the model's logit scale, which is exact for a linear head; a
model that softcaps its logits (Gemma 2) gets its logits built a few positions at a time, without gradient.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

PAD_MULTIPLE = 8
"""LLaMA-Factory's preference collators pad each batch to a multiple of 8 positions (the logits metrics count them)."""

_CHUNK = 256


class _Capture:
    """The last hidden states of the first backbone call on the batch's own ``input_ids`` (the policy's)."""

    def __init__(self, input_ids: torch.Tensor) -> None:
        self.input_ids, self.hidden = input_ids, None

    def hook(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        if self.hidden is not None:
            return
        ids = kwargs.get("input_ids", args[0] if args else None)
        if isinstance(ids, torch.Tensor) and ids.shape == self.input_ids.shape and torch.equal(
                ids.to(self.input_ids.device), self.input_ids):
            hidden = getattr(output, "last_hidden_state", None)
            if hidden is None and isinstance(output, tuple):
                hidden = output[0]
            self.hidden = None if hidden is None else hidden.detach()


def _backbone(model: Any) -> Any:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return getattr(base, "base_model", None) or base


@contextlib.contextmanager
def policy_hidden(model: Any, input_ids: torch.Tensor) -> Iterator[_Capture]:
    """Within the block, the policy's forward on ``input_ids`` leaves its last hidden states in ``.hidden``."""
    capture = _Capture(input_ids)
    handle = _backbone(model).register_forward_hook(capture.hook, with_kwargs=True)
    try:
        yield capture
    finally:
        handle.remove()


def _scale(config: Any) -> float:
    """The factor a model multiplies its logits by (Cohere's logit_scale, Granite's 1/logits_scaling), else 1."""
    if getattr(config, "logit_scale", None) is not None:
        return float(config.logit_scale)
    if getattr(config, "logits_scaling", None):
        return 1.0 / float(config.logits_scaling)
    return 1.0


def vocab_means(model: Any, hidden: torch.Tensor) -> torch.Tensor:
    """Per position, the mean over the vocabulary of the logits the model's head gives ``hidden`` (float32)."""
    from trl.trainer.utils import maybe_gather_lm_head_ctx

    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings()
    config = base.config.get_text_config()
    scale, cap = _scale(config), getattr(config, "final_logit_softcapping", None)
    weight, bias = head.weight, head.bias
    with torch.no_grad(), maybe_gather_lm_head_ctx(*(p for p in (weight, bias) if p is not None)):
        if hasattr(weight, "full_tensor"):  # FSDP2's sharded head
            weight = weight.full_tensor()
            bias = bias.full_tensor() if bias is not None else None
        hidden = hidden.to(weight.device, torch.float32)
        if not cap:
            means = hidden @ weight.float().mean(0)
            if bias is not None:
                means = means + bias.float().mean()
            return means * scale
        flat = hidden.reshape(-1, hidden.size(-1))
        parts = []
        for start in range(0, flat.size(0), _CHUNK):
            logits = flat[start:start + _CHUNK] @ weight.float().T
            if bias is not None:
                logits = logits + bias.float()
            logits = torch.tanh(logits * scale / cap) * cap
            parts.append(logits.mean(-1))
        return torch.cat(parts).reshape(hidden.shape[:-1])


def vocab_size(model: Any) -> int:
    """The width of the logits (the head's rows: the padded vocabulary)."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return int(base.get_output_embeddings().weight.shape[0])


class PairLogitsMixin:
    """Put over TRL's DPOTrainer: each batch's ``logits/chosen`` and ``logits/rejected`` as LLaMA-Factory's (the mean
    over the padded rows' positions and vocabulary; rows padded to a multiple of :data:`PAD_MULTIPLE` by the
    collator), averaged over the ranks, in place of TRL's per-token mean."""

    def _compute_loss(self, model, inputs, return_outputs):
        policy = self.accelerator.unwrap_model(model)
        with policy_hidden(policy, inputs["input_ids"]) as seen:
            result = super()._compute_loss(model, inputs, return_outputs)
        if seen.hidden is not None:
            means = vocab_means(policy, seen.hidden)
            pairs = means.size(0) // 2
            values = torch.stack([means[:pairs].mean(), means[pairs:].mean()]).reshape(1, 2)
            values = self.accelerator.gather(values).mean(0).tolist()
            metrics = self._metrics["train" if self.model.training else "eval"]
            for key, value in zip(("logits/chosen", "logits/rejected"), values):
                if metrics.get(key):
                    metrics[key][-1] = value
        return result
