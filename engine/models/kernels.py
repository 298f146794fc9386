"""Kernels patched into loaded models: the Biren SUPA RMSNorm, and the RMSNorm as one autograd node in training.

``torch_supa_ext`` provides ``torch.ops.sudnn.rms_norm_func(hidden, weight, bias, eps, False, False)``, which
computes ``x * rsqrt(mean(x^2) + eps) * weight`` (+ bias, zeros here) in one kernel. Only the forward is
fused; the backward is the analytic RMSNorm gradient. It is applied to RMSNorm classes that follow exactly
that convention (Gemma's ``1 + weight`` and gated or residual variants keep their eager forward), and only
when the input lives on the fused kernel's device: a module on any other device runs its original forward.

Everywhere else, a training step runs the RMSNorms of the classes whose forward is exactly Llama's
(:data:`NODE_RMSNORM_CLASSES`) as one autograd node (:class:`RmsNormNode`): the forward is the same sequence of
operations (bit for bit the same output); the backward is the analytic gradient from the input and the per-row
``rsqrt`` kept by the forward, instead of autograd's walk through the eight nodes of the eager formula (a power, a
mean, an add, a reciprocal root, two products, two casts). On the reference workload (README "Speed") that took a
norm's forward and backward from 2.5-2.8 ms to 1.5-1.8 ms, 17 norms a step. Calls without gradients, under
autocast, with sharded (DeepSpeed, DTensor) weights or with a forward someone else replaced (Liger, SUPA) keep the
eager forward.
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


def _rms_norm_grads(grad_output: torch.Tensor, hidden: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor,
                    need_weight: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(input gradient, weight gradient or None) of ``weight * (x * rstd)``, computed in ``rstd``'s dtype."""
    return _rms_norm_grads_of(grad_output, hidden.to(rstd.dtype) * rstd, rstd, weight, need_weight, hidden.dtype)


def _rms_norm_grads_of(grad_output: torch.Tensor, x_hat: torch.Tensor, rstd: torch.Tensor, weight: torch.Tensor,
                       need_weight: bool, input_dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor | None]:
    """:func:`_rms_norm_grads` from the normalized input ``x_hat = x * rstd`` (a fresh tensor: it is reused)."""
    dtype = rstd.dtype
    grad = grad_output.to(dtype)
    grad_weight = (grad * x_hat).reshape(-1, x_hat.shape[-1]).sum(0).to(weight.dtype) if need_weight else None
    grad_x_hat = grad * weight.to(dtype)
    # d/dx of x * rstd(x): rstd * (g - x_hat * mean(g * x_hat)) for g = dL/dx_hat.
    mean = torch.linalg.vecdot(grad_x_hat, x_hat).unsqueeze(-1).div_(x_hat.shape[-1])
    grad_hidden = grad_x_hat.sub_(x_hat.mul_(mean)).mul_(rstd)
    return grad_hidden.to(input_dtype), grad_weight


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
        x = hidden.to(_compute_dtype(hidden))
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + ctx.eps)
        grad_hidden, grad_weight = _rms_norm_grads(grad_output, hidden, rstd, weight, ctx.needs_input_grad[1])
        return grad_hidden, grad_weight, None


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


NODE_RMSNORM_CLASSES = frozenset({
    "LlamaRMSNorm", "MistralRMSNorm", "MixtralRMSNorm", "Phi3RMSNorm", "GraniteRMSNorm", "GraniteMoeRMSNorm",
    "GlmRMSNorm", "Glm4RMSNorm", "Glm4vRMSNorm", "DeepseekV2RMSNorm", "DeepseekV3RMSNorm",
    "Qwen2RMSNorm", "Qwen2MoeRMSNorm", "Qwen2VLRMSNorm", "Qwen2_5_VLRMSNorm", "Qwen2_5OmniRMSNorm",
    "Qwen3RMSNorm", "Qwen3MoeRMSNorm", "Qwen3VLTextRMSNorm", "Qwen3VLMoeTextRMSNorm", "Qwen3OmniMoeTextRMSNorm",
})
"""transformers' RMSNorm classes whose forward is exactly ``LlamaRMSNorm.forward`` (a test compares the source)."""

_NODE_FLAG = "_lf_rms_norm_node"


MIN_KEPT_WEIGHT = 1e-6
"""The smallest ``|weight|`` for which :class:`RmsNormNode` keeps its output instead of its input (below it, dividing
the output by the weight would not give back the normalized input to float32 precision)."""


class RmsNormNode(torch.autograd.Function):
    """``LlamaRMSNorm.forward`` (the same operations, so the same output) with the analytic backward.

    It keeps the per-row ``rsqrt`` and one activation-sized tensor for the backward. In float32 with a weight that
    has no (near-)zero element (``from_output``) that tensor is the output: the normalized input comes back as
    ``output / weight`` (to a float32 rounding), and the output is what the next layer's projections keep as their
    input anyway (the LoRA nodes, the fused MLP), so the norm adds nothing of its own; the input, the residual
    stream, is then kept by nobody. That is two activation-sized tensors per decoder layer fewer (measured on the
    README's reference workload: peak RSS 1.19-1.22 -> 1.12-1.14 GiB, the same loss and speed). Otherwise (bf16 or
    fp16 inputs, whose output is rounded after the normalization) it keeps the input, as before."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, eps: float, from_output: bool) -> torch.Tensor:
        input_dtype = hidden.dtype
        x = hidden.to(torch.float32)
        rstd = torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)
        out = weight * (x * rstd).to(input_dtype)
        ctx.from_output = from_output and input_dtype == torch.float32
        ctx.input_dtype = input_dtype
        ctx.save_for_backward(out if ctx.from_output else hidden, rstd, weight)
        return out

    @staticmethod
    def backward(ctx, grad_output: torch.Tensor):
        kept, rstd, weight = ctx.saved_tensors
        need_weight = ctx.needs_input_grad[1]
        if ctx.from_output:
            x_hat = kept.to(rstd.dtype) / weight.to(rstd.dtype)
            grad_hidden, grad_weight = _rms_norm_grads_of(grad_output, x_hat, rstd, weight, need_weight,
                                                          ctx.input_dtype)
        else:
            grad_hidden, grad_weight = _rms_norm_grads(grad_output, kept, rstd, weight, need_weight)
        return (grad_hidden if ctx.needs_input_grad[0] else None), grad_weight, None, None


def _output_recovers_input(module: nn.Module, weight: torch.Tensor) -> bool:
    """Whether ``weight`` (float32, every ``|element| >= MIN_KEPT_WEIGHT``) lets the node keep its output; checked
    again only when the weight changed (its version: a frozen norm is checked once)."""
    if weight.dtype != torch.float32:
        return False
    cached = module.__dict__.get("_lf_output_recovers")
    if cached is None or cached[0] != weight._version or cached[1] != weight.data_ptr():
        with torch.no_grad():
            ok = bool((weight.abs() >= MIN_KEPT_WEIGHT).all())
        cached = (weight._version, weight.data_ptr(), ok)
        module.__dict__["_lf_output_recovers"] = cached
    return cached[2]


def use_rms_norm_node(model: nn.Module) -> int:
    """Give every RMSNorm of ``model`` in :data:`NODE_RMSNORM_CLASSES` whose forward nobody replaced the one-node
    training forward (per module instance); returns how many were patched."""
    from engine.models.lora_fused import _plain_tensor

    patched = 0
    for module in model.modules():
        if type(module).__name__ not in NODE_RMSNORM_CLASSES or "forward" in module.__dict__:
            continue
        if not isinstance(getattr(module, "weight", None), torch.Tensor) or getattr(module, "bias", None) is not None:
            continue
        if not isinstance(getattr(module, "variance_epsilon", None), (int, float)):
            continue
        original = module.forward

        def forward(self, hidden_states, *args, _original=original, **kwargs):
            weight = self.weight
            if (args or kwargs or not torch.is_grad_enabled() or not (hidden_states.requires_grad
                                                                        or weight.requires_grad)
                    or not _plain_tensor(weight) or weight.shape[-1] != hidden_states.shape[-1]
                    or torch.is_autocast_enabled(hidden_states.device.type)):
                return _original(hidden_states, *args, **kwargs)
            return RmsNormNode.apply(hidden_states, weight, float(self.variance_epsilon),
                                     _output_recovers_input(self, weight))

        module.forward = types.MethodType(forward, module)
        setattr(module, _NODE_FLAG, True)
        patched += 1
    if patched:
        logger.debug("RMSNorm as one autograd node for %d modules.", patched)
    return patched
