"""Attention's LoRA q, k and v projections of one input as one matrix multiply (and one for the input's gradient).

Llama-style attention calls ``q_proj(x)``, ``k_proj(x)`` and ``v_proj(x)`` one after the other on the same ``x``.
With the three frozen weights stacked in one storage (:mod:`engine.models.stacked`), :class:`QkvLoraFunction`
computes all three outputs with one multiply by the stacked matrix (the low-rank parts with one more), and its
backward the input's gradient with one multiply; ``q_proj`` returns q and hands k and v to the next two calls,
which return them when they get the very same input tensor (anything else: their own forward). v is returned as a
tensor of its own, so the attention keeping v for its backward does not keep q and k's memory alive.

Values and gradients are PEFT's (same formulas as :mod:`engine.models.lora_fused`). The three layers must each
take the fused path (:func:`engine.models.lora_fused._fusable`), with equal ranks and no biases; otherwise, and
without gradients (evaluation, generation), every layer keeps its own forward.
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch
from torch import nn

from engine.models.lora_fused import _fusable
from engine.models.mlp_fused import _plain_lora_linear
from engine.models.stacked import stack_in_place, stacked

logger = logging.getLogger(__name__)

# attention classes whose forward calls q_proj, k_proj and v_proj on the same hidden states, in that order
QKV_ATTENTIONS = frozenset({"LlamaAttention", "MistralAttention", "Qwen2Attention", "Qwen3Attention",
                            "Qwen3MoeAttention", "Qwen2MoeAttention", "Olmo2Attention"})
_FLAG = "_lf_fused_qkv"
_STASH = "_lf_qkv_stash"


class QkvLoraFunction(torch.autograd.Function):
    """``(q, k, v)`` of three LoRA linears on one input, from the stacked frozen weight ``wq | wk | wv``."""

    @staticmethod
    def forward(ctx, x, wq, aq, bq, wk, ak, bk, wv, av, bv, scales):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        whole = stacked(wq, wk, wv)
        rank = aq.shape[0]
        out = flat.mm(whole.t())
        low = flat.mm(torch.cat([aq, ak, av]).t())
        sizes = (wq.shape[0], wk.shape[0], wv.shape[0])
        outs = out.split(sizes, dim=1)
        lows = low.split(rank, dim=1)
        for part, lo, lora_b, scale in zip(outs, lows, (bq, bk, bv), scales):
            part.addmm_(lo, lora_b.t(), alpha=scale)
        ctx.save_for_backward(flat, low, wq, aq, bq, wk, ak, bk, wv, av, bv)
        ctx.scales, ctx.shape, ctx.sizes = scales, shape, sizes
        q, k, v = outs
        v = v.contiguous()  # its own memory: the attention keeps v, and q and k are freed after the rotary step
        return tuple(t.view(*shape[:-1], t.shape[-1]) for t in (q, k, v))

    @staticmethod
    def backward(ctx, grad_q, grad_k, grad_v):
        flat, low, wq, aq, bq, wk, ak, bk, wv, av, bv = ctx.saved_tensors
        need = ctx.needs_input_grad
        sizes = ctx.sizes
        grads = flat.new_empty((flat.shape[0], sum(sizes)))
        parts = grads.split(sizes, dim=1)
        for part, grad in zip(parts, (grad_q, grad_k, grad_v)):
            if grad is None:  # an output that was not used
                part.zero_()
            else:
                part.copy_(grad.reshape(-1, grad.shape[-1]))
        whole = stacked(wq, wk, wv)
        grad_x = grads.mm(whole) if (need[0] and whole is not None) else None
        if need[0] and whole is None:  # moved apart between forward and backward
            grad_x = sum(part.mm(w) for part, w in zip(parts, (wq, wk, wv)))
        lows = low.split(aq.shape[0], dim=1)
        out: list[Any] = [None] * 11
        for i, (part, lo, lora_a, lora_b, scale) in enumerate(zip(parts, lows, (aq, ak, av), (bq, bk, bv),
                                                                   ctx.scales)):
            g_b = part.mm(lora_b)
            if grad_x is not None:
                grad_x.addmm_(g_b, lora_a, alpha=scale)
            if need[2 + 3 * i]:
                out[2 + 3 * i] = g_b.t().mm(flat).mul_(scale)
            if need[3 + 3 * i]:
                out[3 + 3 * i] = part.t().mm(lo).mul_(scale)
        out[0] = None if grad_x is None else grad_x.view(ctx.shape)
        return tuple(out)


def _parts(attention: Any, x: torch.Tensor) -> tuple | None:
    """The tensors of the fused call, or None when this call must take the layers' own forwards."""
    if not torch.is_grad_enabled():
        return None
    tensors: list[torch.Tensor] = []
    scales: list[float] = []
    for layer in (attention.q_proj, attention.k_proj, attention.v_proj):
        active = layer.active_adapters
        if layer.disable_adapters or layer.merged or len(active) != 1 or not _fusable(layer, x, active[0]):
            return None
        base = layer.get_base_layer()
        if base.bias is not None or base.weight.requires_grad:
            return None
        adapter = active[0]
        tensors += [base.weight, layer.lora_A[adapter].weight, layer.lora_B[adapter].weight]
        scales.append(float(layer.scaling[adapter]))
    if len({tensors[1].shape[0], tensors[4].shape[0], tensors[7].shape[0]}) != 1:
        return None  # unequal ranks
    if stacked(tensors[0], tensors[3], tensors[6]) is None:
        return None
    return (*tensors, tuple(scales))


def _patch(attention: Any) -> None:
    q_proj, k_proj, v_proj = attention.q_proj, attention.k_proj, attention.v_proj
    q_original, k_original, v_original = q_proj.forward, k_proj.forward, v_proj.forward

    def q_forward(self, x, *args, **kwargs):
        attention.__dict__.pop(_STASH, None)
        parts = None if args or kwargs else _parts(attention, x)
        if parts is None:
            return q_original(x, *args, **kwargs)
        q, k, v = QkvLoraFunction.apply(x, *parts)
        attention.__dict__[_STASH] = [x, k, v]
        return q

    def handed(position: int, original):
        def forward(self, x, *args, **kwargs):
            stash = attention.__dict__.get(_STASH)
            if stash is None or args or kwargs or stash[0] is not x or stash[position] is None:
                return original(x, *args, **kwargs)
            out, stash[position] = stash[position], None
            if stash[1] is None and stash[2] is None:
                attention.__dict__.pop(_STASH, None)
            return out
        return forward

    q_proj.forward = types.MethodType(q_forward, q_proj)
    k_proj.forward = types.MethodType(handed(1, k_original), k_proj)
    v_proj.forward = types.MethodType(handed(2, v_original), v_proj)


def use_fused_qkv(model: nn.Module) -> int:
    """Give every attention of ``model`` whose q, k and v are plain LoRA linears with equal ranks the stacked
    projection (weights moved into one storage); returns how many were patched."""
    patched = 0
    for module in model.modules():
        if type(module).__name__ not in QKV_ATTENTIONS or getattr(module, _FLAG, False):
            continue
        layers = [getattr(module, name, None) for name in ("q_proj", "k_proj", "v_proj")]
        if not all(_plain_lora_linear(layer) for layer in layers):
            continue
        if any(len(layer.lora_A) != 1 for layer in layers):
            continue
        if len({next(iter(layer.lora_A.values())).weight.shape[0] for layer in layers}) != 1:
            continue
        if any(layer.get_base_layer().bias is not None for layer in layers):
            continue
        if not stack_in_place(*(layer.get_base_layer().weight for layer in layers)):
            continue
        _patch(module)
        setattr(module, _FLAG, True)
        patched += 1
    if patched:
        logger.debug("Stacked q, k, v projections for %d attention layers.", patched)
    return patched
