"""One autograd node per LoRA linear layer instead of PEFT's chain of modules.

PEFT computes a LoRA linear layer as ``base(x) + lora_B(lora_A(dropout(x))) * scaling``: three modules, a full-size
multiply and a full-size add in the forward, and in the backward again a full-size multiply (the scaled output
gradient) and a full-size add (the two input gradients). On a CPU, where these passes over ``tokens x width``
tensors cost memory bandwidth and every module call costs Python time, that is a tenth of a step.

:func:`use_fused_lora` gives each plain LoRA linear layer a forward through :class:`LoraLinearFunction`, which
computes the same values with the adds fused into the matrix multiplies (``addmm``):

    forward:   y = x W^T (+ b);   z = x A^T;   y += s z B^T
    backward:  gB = g B;   dx = g W + s gB A;   dA = s gB^T x;   dB = s g^T z   (dW, db only if they train)

Parameters, modules and state dict stay PEFT's own, so checkpoints and saved adapters are unchanged. Anything
else keeps PEFT's forward: DoRA and other variants, dropout while training, a bias on ``lora_B``, several active
adapters, merged or disabled adapters, autocast, mixed dtypes, quantized or sharded base layers, and modules with
hooks on ``lora_A`` / ``lora_B`` (the per-module profiler).
"""

from __future__ import annotations

import logging
import types
from typing import Any

import torch
from torch import nn

logger = logging.getLogger(__name__)

_FLAG = "_lf_fused_lora"


class LoraLinearFunction(torch.autograd.Function):
    """``x W^T + b + s (x A^T) B^T`` with its gradients, the adds fused into the matrix multiplies."""

    @staticmethod
    def forward(ctx, x, weight, bias, lora_a, lora_b, scale):
        shape = x.shape
        flat = x.reshape(-1, shape[-1])
        out = torch.addmm(bias, flat, weight.t()) if bias is not None else flat.mm(weight.t())
        low = flat.mm(lora_a.t())
        out.addmm_(low, lora_b.t(), alpha=scale)
        ctx.save_for_backward(flat, weight, lora_a, lora_b, low)
        ctx.scale = scale
        ctx.shape = shape
        return out.view(*shape[:-1], out.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        flat, weight, lora_a, lora_b, low = ctx.saved_tensors
        scale = ctx.scale
        g = grad.reshape(-1, grad.shape[-1])
        need_x, need_w, need_b, need_a, need_lb, _ = ctx.needs_input_grad
        g_b = g.mm(lora_b) if (need_x or need_a) else None
        grad_x = grad_w = grad_bias = grad_a = grad_lb = None
        if need_x:
            grad_x = g.mm(weight)
            grad_x.addmm_(g_b, lora_a, alpha=scale)
            grad_x = grad_x.view(ctx.shape)
        if need_a:
            grad_a = g_b.t().mm(flat).mul_(scale)
        if need_lb:
            grad_lb = g.t().mm(low).mul_(scale)
        if need_w:
            grad_w = g.t().mm(flat)
        if need_b:
            grad_bias = g.sum(0)
        return grad_x, grad_w, grad_bias, grad_a, grad_lb, None


def _plain_tensor(tensor: Any) -> bool:
    return type(tensor) in (torch.Tensor, nn.Parameter) and not hasattr(tensor, "ds_numel")


def _fusable(layer: Any, x: torch.Tensor, adapter: str) -> bool:
    """Whether this call can take the fused path (checked per call: modes and adapters change)."""
    if adapter not in layer.lora_A or adapter in getattr(layer, "lora_variant", {}):
        return False
    lora_a, lora_b = layer.lora_A[adapter], layer.lora_B[adapter]
    dropout = layer.lora_dropout[adapter]
    if not isinstance(dropout, nn.Identity) and (dropout.training and getattr(dropout, "p", 1.0) > 0):
        return False
    if lora_b.bias is not None or lora_a.bias is not None:
        return False
    if lora_a._forward_hooks or lora_a._forward_pre_hooks or lora_b._forward_hooks or lora_b._forward_pre_hooks:
        return False
    base = layer.get_base_layer()
    if base._forward_hooks or base._forward_pre_hooks:
        return False
    tensors = [base.weight, lora_a.weight, lora_b.weight] + ([base.bias] if base.bias is not None else [])
    if not all(_plain_tensor(t) and t.dtype == x.dtype and t.device == x.device for t in tensors):
        return False
    return not torch.is_autocast_enabled(x.device.type)


def use_fused_lora(model: nn.Module) -> int:
    """Give every plain PEFT LoRA ``Linear`` of ``model`` the fused forward; returns how many were patched."""
    try:
        from peft.tuners.lora.layer import Linear as LoraLinear
    except ImportError:
        return 0
    patched = 0
    for module in model.modules():
        if type(module) is not LoraLinear or getattr(module, _FLAG, False):
            continue
        if type(module.get_base_layer()) is not nn.Linear or getattr(module, "fan_in_fan_out", False):
            continue
        original = module.forward

        def forward(self, x, *args, _original=original, **kwargs):
            active = self.active_adapters
            if (args or kwargs or self.disable_adapters or self.merged or len(active) != 1
                    or not _fusable(self, x, active[0])):
                return _original(x, *args, **kwargs)
            base = self.get_base_layer()
            adapter = active[0]
            return LoraLinearFunction.apply(x, base.weight, base.bias, self.lora_A[adapter].weight,
                                            self.lora_B[adapter].weight, float(self.scaling[adapter]))

        module.forward = types.MethodType(forward, module)
        setattr(module, _FLAG, True)
        patched += 1
    if patched:
        logger.debug("Fused LoRA forward for %d linear layers.", patched)
    return patched
