"""The fused SUPA RMSNorm, checked on the CPU against a Python stand-in for ``torch.ops.sudnn.rms_norm_func``."""

from __future__ import annotations

import logging
import types

import pytest
import torch
from torch import nn
from transformers.models.gemma3.modeling_gemma3 import Gemma3RMSNorm
from transformers.models.llama.modeling_llama import LlamaRMSNorm
from transformers.models.qwen2.modeling_qwen2 import Qwen2RMSNorm

from engine.models import kernels


@pytest.fixture
def fake_sudnn(monkeypatch):
    """Registers a Python ``rms_norm_func`` with the fused operator's signature; returns its call log."""
    calls = []

    def rms_norm_func(hidden, weight, bias, eps, flag_a, flag_b):
        assert (flag_a, flag_b) == (False, False)
        calls.append(hidden.device.type)
        dtype = torch.promote_types(hidden.dtype, torch.float32)
        x = hidden.to(dtype)
        out = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight.to(dtype) + bias.to(dtype)
        return out.to(hidden.dtype)

    monkeypatch.setattr(torch.ops, "sudnn", types.SimpleNamespace(rms_norm_func=rms_norm_func), raising=False)
    return calls


def _norm(cls, size=16):
    module = cls(size, eps=1e-5)
    with torch.no_grad():
        module.weight.copy_(torch.linspace(0.5, 1.5, size))
    return module


def test_forward_matches_eager_and_uses_the_fused_op(fake_sudnn):
    model = nn.ModuleDict({"llama": _norm(LlamaRMSNorm), "qwen": _norm(Qwen2RMSNorm), "gemma": _norm(Gemma3RMSNorm)})
    x = torch.randn(2, 5, 16)
    expected = {name: module(x) for name, module in model.items()}
    gemma_forward = model["gemma"].forward
    assert kernels.apply_fused_rms_norm(model, device_type="cpu") == 2
    for name, module in model.items():
        torch.testing.assert_close(module(x), expected[name])
    assert fake_sudnn == ["cpu", "cpu"]  # Gemma's 1 + weight convention kept its eager forward
    assert model["gemma"].forward == gemma_forward
    assert kernels.apply_fused_rms_norm(model, device_type="cpu") == 0  # patching twice is a no-op


def test_modules_on_other_devices_keep_the_original_forward(fake_sudnn):
    module = _norm(LlamaRMSNorm)
    x = torch.randn(3, 16)
    expected = module(x)
    assert kernels.apply_fused_rms_norm(module, device_type="supa") == 1
    torch.testing.assert_close(module(x), expected)
    assert fake_sudnn == []


def test_backward_is_the_analytic_rmsnorm_gradient(fake_sudnn):
    x = torch.randn(3, 4, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: kernels.fused_rms_norm(a, b, 1e-6), (x, w))
    grad_out = torch.randn(3, 4, 8, dtype=torch.float64)
    fused_grads = torch.autograd.grad(kernels.fused_rms_norm(x, w, 1e-6), (x, w), grad_out)
    eager_grads = torch.autograd.grad(kernels.rms_norm_reference(x, w, 1e-6), (x, w), grad_out)
    for fused, eager in zip(fused_grads, eager_grads):
        torch.testing.assert_close(fused, eager)


def test_training_through_a_patched_module(fake_sudnn):
    patched, eager = _norm(LlamaRMSNorm, 8), _norm(LlamaRMSNorm, 8)
    kernels.apply_fused_rms_norm(patched, device_type="cpu")
    x = torch.randn(4, 8)
    patched(x).pow(2).sum().backward()
    eager(x).pow(2).sum().backward()
    torch.testing.assert_close(patched.weight.grad, eager.weight.grad)


def test_missing_operator_leaves_the_model_alone(caplog):
    module = _norm(LlamaRMSNorm)
    forward = module.forward
    with caplog.at_level(logging.WARNING, logger="engine.models.kernels"):
        assert kernels.apply_fused_rms_norm(module) == 0
    assert "torch_supa_ext" in caplog.text
    assert module.forward == forward
    assert "GemmaRMSNorm" not in kernels.FUSED_RMSNORM_CLASSES and "Gemma3RMSNorm" not in kernels.FUSED_RMSNORM_CLASSES
