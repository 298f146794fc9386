"""Trained token rows without rebuilding the whole embedding and output matrices.

When a template adds special tokens, LoRA training trains only those tokens' rows of the input embedding and the
output head, through PEFT's trainable-token layers (``trainable_token_indices``). PEFT's forward writes the trained
rows into a full copy of the matrix on every call (``W.index_copy``) and then uses that copy: for the output head
autograd then computes the gradient of the whole ``vocab x hidden`` matrix (a matmul as large as the head itself)
only to keep the few trained rows of it, and both layers copy the full matrix forward and back.

:func:`use_sparse_token_rows` gives each such layer a forward that touches only the new rows, with the same result:

- embedding: look up the frozen matrix, then put the trained rows in at the positions holding a new token;
- output head: ``hidden @ W.T`` with the frozen matrix, then the new tokens' columns replaced by
  ``hidden @ delta.T``.

The modules, parameters and state dict stay PEFT's own, so the saved adapter is a standard PEFT adapter (plain
``PeftModel.from_pretrained`` loads it and gives the same logits). Layers that are merged, disabled, serve several
active adapters at once, or wrap anything but a plain ``nn.Embedding`` / bias-free ``nn.Linear`` keep PEFT's forward.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

logger = logging.getLogger(__name__)

_FLAG = "_lf_sparse_token_rows"


def _rows(layer: Any, adapter: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(delta rows, their token ids as a tensor on the delta's device), cached per adapter."""
    delta = layer.trainable_tokens_delta[adapter]
    cache = layer.__dict__.setdefault("_lf_index_cache", {})
    key = (adapter, delta.device)
    if key not in cache:
        cache[key] = torch.tensor(layer.token_indices[adapter], dtype=torch.long, device=delta.device)
    return delta, cache[key]


def _slots(layer: Any, adapter: str, index: torch.Tensor, rows: int) -> torch.Tensor:
    """A ``rows``-long table: the delta row of each token id, -1 for ids that are not trained."""
    cache = layer.__dict__.setdefault("_lf_slot_cache", {})
    key = (adapter, index.device, rows)
    if key not in cache:
        table = torch.full((rows,), -1, dtype=torch.long, device=index.device)
        table[index] = torch.arange(index.numel(), device=index.device)
        cache[key] = table
    return cache[key]


def sparse_embedding(layer: Any, x: torch.Tensor, adapter: str) -> torch.Tensor:
    """``F.embedding(x, W with the trained rows)`` without building that matrix."""
    base = layer.get_base_layer()
    out = F.embedding(x, base.weight, padding_idx=base.padding_idx, max_norm=base.max_norm,
                      norm_type=base.norm_type, scale_grad_by_freq=base.scale_grad_by_freq, sparse=base.sparse)
    delta, index = _rows(layer, adapter)
    slot = _slots(layer, adapter, index, base.weight.shape[0])[x]
    hit = slot >= 0
    new = delta.to(out.dtype)[slot.clamp(min=0)]
    out = torch.where(hit.unsqueeze(-1), new, out)
    scale = layer._get_embed_scale() if hasattr(layer, "_get_embed_scale") else None
    if scale is not None:
        out = out * scale.to(out.dtype)
    return out


def sparse_linear(layer: Any, x: torch.Tensor, adapter: str) -> torch.Tensor:
    """``F.linear(x, W with the trained rows)`` without building that matrix (nor its gradient)."""
    base = layer.get_base_layer()
    logits = F.linear(x, base.weight)
    delta, index = _rows(layer, adapter)
    new = F.linear(x, delta.to(x.dtype))
    return logits.index_copy(-1, index, new.to(logits.dtype))


def sole_adapter(layer: Any) -> str | None:
    """The one active adapter whose rows the row-sparse forward serves, or None where PEFT's forward must run
    (disabled, merged, several adapters active)."""
    active = layer.active_adapters
    if layer.disable_adapters or layer.merged or len(active) != 1 or active[0] not in layer.trainable_tokens_delta:
        return None
    return active[0]


def head_rows(head: Any) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(frozen weight, trained rows, their token ids) of an output head with the row-sparse forward, or None
    (not such a layer, or PEFT's own forward would run). The chunked head loss uses it.

    ``head`` is the layer or PEFT's wrapper around it (what ``get_output_embeddings`` returns), whose forward is
    the layer's when no per-sample adapter names are passed."""
    if hasattr(head, "token_adapter"):
        if head._forward_hooks or head._forward_pre_hooks:
            return None
        head = head.token_adapter
    if head._forward_hooks or head._forward_pre_hooks or not getattr(head, _FLAG, False) or type(head.get_base_layer()) is not nn.Linear:
        return None
    adapter = sole_adapter(head)
    if adapter is None:
        return None
    delta, index = _rows(head, adapter)
    return head.get_base_layer().weight, delta, index


def _eligible(layer: Any) -> bool:
    base = layer.get_base_layer()
    if type(base) is nn.Embedding:
        return True
    return type(base) is nn.Linear and base.bias is None


def expose_head_bias(model: nn.Module) -> int:
    """Give every PEFT trainable-token wrapper of a linear layer that layer's ``bias``; returns how many.

    The wrapper forwards only ``weight`` (the matrix with the trained rows) to the layer it wraps. TRL's DPO, KTO,
    GRPO and RLOO trainers score tokens through a fused output head that reads the head's ``weight`` and ``bias``,
    so a run whose template added tokens (the output head then trains their rows) stopped at its first step with
    "'TrainableTokensWrapper' object has no attribute 'bias'". The bias is set on the instance outside PyTorch's
    registry, so the state dict and the saved adapter do not change."""
    try:
        from peft.utils.other import TrainableTokensWrapper
    except ImportError:  # an older PEFT without trainable tokens
        return 0
    done = 0
    for module in model.modules():
        if isinstance(module, TrainableTokensWrapper) and "bias" not in module.__dict__:
            base = module.token_adapter.get_base_layer()
            if isinstance(base, nn.Linear):
                object.__setattr__(module, "bias", base.bias)
                done += 1
    return done


def use_sparse_token_rows(model: nn.Module) -> int:
    """Give every PEFT trainable-token layer of ``model`` the row-sparse forward; returns how many were patched."""
    try:
        from peft.tuners.trainable_tokens.layer import TrainableTokensLayer
    except ImportError:  # an older PEFT without trainable tokens
        return 0
    patched = 0
    for module in model.modules():
        if not isinstance(module, TrainableTokensLayer) or getattr(module, _FLAG, False) or not _eligible(module):
            continue
        original = module.forward
        embedding = type(module.get_base_layer()) is nn.Embedding

        def forward(self, x, *args, _original=original, _embedding=embedding, **kwargs):
            adapter = None if args or kwargs else sole_adapter(self)
            if adapter is None:
                return _original(x, *args, **kwargs)
            return sparse_embedding(self, x, adapter) if _embedding else sparse_linear(self, x, adapter)

        module.forward = types.MethodType(forward, module)
        setattr(module, _FLAG, True)
        patched += 1
    if patched:
        logger.debug("Row-sparse forward for %d trainable-token layers.", patched)
    return patched
