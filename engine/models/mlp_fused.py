"""A LoRA-adapted SwiGLU MLP as one autograd node that keeps half the activations.

Llama-style blocks compute ``down(silu(gate(x)) * up(x))``. Run as separate modules, autograd keeps four
``tokens x intermediate`` tensors per layer for the backward pass: the gate output (for SiLU), SiLU's output and the
up output (for the product), and the product (the input of ``down``). On the reference workload (README "Speed")
those are the largest activations of a step. :class:`SwiGluLoraFunction` keeps only the gate and up outputs and
recomputes SiLU and the product in the backward pass (two cheap elementwise passes), which frees two of the four.

The values and gradients are those of PEFT's modules (same formulas; the adds are fused into the matrix multiplies
as in :mod:`engine.models.lora_fused`). Parameters, modules and state dict stay PEFT's own. Anything else keeps the
module's own forward: other MLP classes or activations, biases, a base weight that trains, any of the three layers
that :func:`engine.models.lora_fused._fusable` would not fuse (dropout while training, DoRA, several adapters,
hooks, autocast, quantized or sharded weights), and calls without gradients (evaluation, generation).
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from engine.models.lora_fused import _fusable

logger = logging.getLogger(__name__)

# MLP classes whose forward is exactly down_proj(act_fn(gate_proj(x)) * up_proj(x))
SWIGLU_MLPS = frozenset({"LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP", "Olmo2MLP", "Qwen3MoeMLP", "Qwen2MoeMLP"})
_FLAG = "_lf_fused_mlp"


def _lora_out(flat, weight, lora_a, lora_b, scale):
    low = flat.mm(lora_a.t())
    out = flat.mm(weight.t())
    out.addmm_(low, lora_b.t(), alpha=scale)
    return out, low


def _lora_back(grad, flat, weight, lora_a, lora_b, low, scale, need_a, need_b, need_x=True):
    """(input gradient, A gradient, B gradient) of one LoRA linear for the output gradient ``grad``."""
    g_b = grad.mm(lora_b)
    grad_x = None
    if need_x:
        grad_x = grad.mm(weight)
        grad_x.addmm_(g_b, lora_a, alpha=scale)
    grad_a = g_b.t().mm(flat).mul_(scale) if need_a else None
    grad_lb = grad.t().mm(low).mul_(scale) if need_b else None
    return grad_x, grad_a, grad_lb


class SwiGluLoraFunction(torch.autograd.Function):
    """``down(silu(gate(x)) * up(x))`` with LoRA on all three; saves the gate and up outputs only."""

    @staticmethod
    def forward(ctx, x, wg, ag, bg, wu, au, bu, wd, ad, bd, scales):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        sg, su, sd = scales
        gate, low_g = _lora_out(flat, wg, ag, bg, sg)
        up, low_u = _lora_out(flat, wu, au, bu, su)
        hidden = F.silu(gate).mul_(up)
        out, low_d = _lora_out(hidden, wd, ad, bd, sd)
        ctx.save_for_backward(flat, gate, up, low_g, low_u, low_d, wg, ag, bg, wu, au, bu, wd, ad, bd)
        ctx.scales = scales
        ctx.shape = shape
        return out.view(*shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        flat, gate, up, low_g, low_u, low_d, wg, ag, bg, wu, au, bu, wd, ad, bd = ctx.saved_tensors
        sg, su, sd = ctx.scales
        need = ctx.needs_input_grad
        g = grad.reshape(-1, grad.shape[-1])
        act = F.silu(gate)  # recomputed
        hidden = act * up
        grad_h, grad_ad, grad_bd = _lora_back(g, hidden, wd, ad, bd, low_d, sd, need[8], need[9])
        del hidden
        grad_up = grad_h * act
        del act
        grad_gate = torch.ops.aten.silu_backward(grad_h.mul_(up), gate)
        del grad_h
        grad_x, grad_ag, grad_bg = _lora_back(grad_gate, flat, wg, ag, bg, low_g, sg, need[2], need[3], need[0])
        grad_x_u, grad_au, grad_bu = _lora_back(grad_up, flat, wu, au, bu, low_u, su, need[5], need[6], need[0])
        if grad_x is not None:
            grad_x = grad_x.add_(grad_x_u).view(ctx.shape)
        return (grad_x, None, grad_ag, grad_bg, None, grad_au, grad_bu, None, grad_ad, grad_bd,
                None)


def _plain_lora_linear(layer: Any) -> bool:
    try:
        from peft.tuners.lora.layer import Linear as LoraLinear
    except ImportError:
        return False
    return (type(layer) is LoraLinear and type(layer.get_base_layer()) is nn.Linear
            and not getattr(layer, "fan_in_fan_out", False))


def _parts(mlp: Any, x: torch.Tensor) -> tuple | None:
    """The tensors of the fused call, or None when this call must take the module's own forward."""
    if not torch.is_grad_enabled():  # evaluation and generation: nothing is saved anyway
        return None
    tensors: list[torch.Tensor] = []
    scales: list[float] = []
    for layer in (mlp.gate_proj, mlp.up_proj, mlp.down_proj):
        active = layer.active_adapters
        if layer.disable_adapters or layer.merged or len(active) != 1 or not _fusable(layer, x, active[0]):
            return None
        base = layer.get_base_layer()
        if base.bias is not None or base.weight.requires_grad:
            return None
        adapter = active[0]
        tensors += [base.weight, layer.lora_A[adapter].weight, layer.lora_B[adapter].weight]
        scales.append(float(layer.scaling[adapter]))
    if mlp._forward_hooks or mlp.act_fn._forward_hooks or mlp.act_fn._forward_pre_hooks:
        return None
    return (*tensors, tuple(scales))


def use_fused_mlp(model: nn.Module) -> int:
    """Give every LoRA-adapted SwiGLU MLP of ``model`` the fused forward; returns how many were patched."""
    patched = 0
    for module in model.modules():
        if type(module).__name__ not in SWIGLU_MLPS or getattr(module, _FLAG, False):
            continue
        if not all(_plain_lora_linear(getattr(module, name, None)) for name in ("gate_proj", "up_proj", "down_proj")):
            continue
        if type(getattr(module, "act_fn", None)).__name__ not in ("SiLUActivation", "SiLU"):
            continue
        original = module.forward

        def forward(self, x, *args, _original=original, **kwargs):
            parts = None if args or kwargs else _parts(self, x)
            if parts is None:
                return _original(x, *args, **kwargs)
            return SwiGluLoraFunction.apply(x, *parts)

        module.forward = types.MethodType(forward, module)
        setattr(module, _FLAG, True)
        patched += 1
    if patched:
        logger.debug("Fused SwiGLU MLP forward for %d layers.", patched)
    return patched
