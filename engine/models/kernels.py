"""Fused kernels patched into loaded models: the Biren SUPA RMSNorm.

``torch_supa_ext`` provides ``torch.ops.sudnn.rms_norm_func(hidden, weight, bias, eps, False, False)``, which
computes ``x * rsqrt(mean(x^2) + eps) * weight`` (+ bias, zeros here) in one kernel. Only the forward is
fused; the backward is the analytic RMSNorm gradient. It is applied to RMSNorm classes that follow exactly
that convention (Gemma's ``1 + weight`` and gated or residual variants keep their eager forward), and only
when the input lives on the fused kernel's device: a module on any other device runs its original forward.
"""

from __future__ import annotations

import logging
import types
from collections.abc import Callable

import torch
from torch import nn

logger = logging.getLogger(__name__)

FUSED_RMSNORM_CLASSES = frozenset({
    "LlamaRMSNorm",
    "MistralRMSNorm",
    "MixtralRMSNorm",
    "Phi3RMSNorm",
    "InternLM2RMSNorm",
    "GlmRMSNorm",
    "Glm4RMSNorm",
    "DeepseekV2RMSNorm",
    "DeepseekV3RMSNorm",
    "Qwen2RMSNorm",
    "Qwen2MoeRMSNorm",
    "Qwen2VLRMSNorm",
    "Qwen2_5_VLRMSNorm",
    "Qwen3RMSNorm",
    "Qwen3MoeRMSNorm",
    "Qwen3VLTextRMSNorm",
    "Qwen3VLMoeTextRMSNorm",
})
"""RMSNorm classes computing ``weight * (x * rsqrt(mean(x^2) + eps))`` (no ``1 + weight``, no gate)."""

_PATCHED_FLAG = "_lf_fused_rms_norm"


def sudnn_rms_norm_op() -> Callable | None:
    """The fused SUPA RMSNorm operator, or None when ``torch_supa_ext`` has not registered it."""
    try:
        return torch.ops.sudnn.rms_norm_func
    except (AttributeError, RuntimeError):
        return None


def _compute_dtype(tensor: torch.Tensor) -> torch.dtype:
    """float32 for half types (and float32), float64 kept as is."""
    return torch.promote_types(tensor.dtype, torch.float32)


def rms_norm_reference(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """The eager RMSNorm ``x * rsqrt(mean(x^2) + eps) * weight``, computed in float32 (or float64) then cast back."""
    dtype = _compute_dtype(hidden)
    x = hidden.to(dtype)
    normed = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return (normed * weight.to(dtype)).to(hidden.dtype)


class FusedRMSNormFunction(torch.autograd.Function):
    """Fused forward through ``torch.ops.sudnn.rms_norm_func``; analytic RMSNorm backward in float32 (or float64)."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
        op = sudnn_rms_norm_op()
        if op is None:
            raise RuntimeError("torch.ops.sudnn.rms_norm_func is not registered; import torch_supa_ext first.")
        bias = torch.zeros_like(weight)
        out = op(hidden, weight, bias, float(eps), False, False)
        ctx.save_for_backward(hidden, weight)
        ctx.eps = float(eps)
        return out

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        hidden, weight = ctx.saved_tensors
        dtype = _compute_dtype(hidden)
        x = hidden.to(dtype)
        grad = grad_output.to(dtype)
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        x_hat = x * rstd
        grad_x_hat = grad * weight.to(dtype)
        # d/dx of x * rstd(x): rstd * (g - x_hat * mean(g * x_hat)) for g = dL/dx_hat.
        grad_hidden = rstd * (grad_x_hat - x_hat * (grad_x_hat * x_hat).mean(-1, keepdim=True))
        grad_weight = (grad * x_hat).reshape(-1, x.shape[-1]).sum(0)
        return grad_hidden.to(hidden.dtype), grad_weight.to(weight.dtype), None


def fused_rms_norm(hidden: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm through the fused SUPA operator (differentiable)."""
    return FusedRMSNormFunction.apply(hidden, weight, eps)


def _module_eps(module: nn.Module) -> float:
    for name in ("variance_epsilon", "eps", "epsilon"):
        value = getattr(module, name, None)
        if isinstance(value, (int, float)):
            return float(value)
    return 1e-6


def apply_fused_rms_norm(model: nn.Module, device_type: str = "supa") -> int:
    """Route every eligible RMSNorm of ``model`` through the fused operator for inputs on ``device_type``.

    Args:
        model: The loaded model (patched in place, per module instance; the classes are untouched).
        device_type: Device type whose inputs take the fused path; inputs elsewhere use the original forward.

    Returns:
        How many modules were patched (0 when the operator is not registered).
    """
    if sudnn_rms_norm_op() is None:
        logger.warning("The fused SUPA RMSNorm is unavailable (torch_supa_ext not loaded); using the eager one.")
        return 0
    patched = 0
    for module in model.modules():
        if type(module).__name__ not in FUSED_RMSNORM_CLASSES or getattr(module, _PATCHED_FLAG, False):
            continue
        if not isinstance(getattr(module, "weight", None), torch.Tensor) or getattr(module, "bias", None) is not None:
            continue
        original = module.forward

        def forward(self, hidden_states, *args, _original=original, **kwargs):
            if hidden_states.device.type != device_type or args or kwargs:
                return _original(hidden_states, *args, **kwargs)
            return fused_rms_norm(hidden_states, self.weight, _module_eps(self))

        module.forward = types.MethodType(forward, module)
        setattr(module, _PATCHED_FLAG, True)
        patched += 1
    if patched:
        logger.info("Fused SUPA RMSNorm applied to %d modules.", patched)
    return patched
