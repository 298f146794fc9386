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


# --- the RMSNorm as one autograd node in training (every device) ---


def test_node_classes_have_exactly_llamas_forward():
    """The node's forward copies LlamaRMSNorm.forward; every class it is applied to must compute the same."""
    import importlib
    import inspect
    import re

    reference = inspect.getsource(LlamaRMSNorm.forward)
    found = 0
    for name in sorted(kernels.NODE_RMSNORM_CLASSES):
        family = re.sub(r"(?<!^)(?=[A-Z])", "_", name[: -len("RMSNorm")]).lower()
        candidates = {family, family.replace("_text", ""), family.replace("_v_l", "_vl"),
                      family.replace("_v_l_text", "_vl").replace("_v_l_moe_text", "_vl_moe"),
                      family.replace("_moe_text", "_moe"), name[: -len("RMSNorm")].lower().replace("text", "")}
        for module_name in candidates:
            try:
                module = importlib.import_module(f"transformers.models.{module_name}.modeling_{module_name}")
            except ImportError:
                continue
            if hasattr(module, name):
                assert inspect.getsource(getattr(module, name).forward) == reference, name
                found += 1
                break
    assert found >= 18, f"only {found} of {len(kernels.NODE_RMSNORM_CLASSES)} classes were found in transformers"


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weight_trains", [False, True])
def test_node_forward_is_bit_for_bit_and_gradients_match_eager(dtype, weight_trains):
    eager, node = _norm(LlamaRMSNorm, 64).to(dtype), _norm(LlamaRMSNorm, 64).to(dtype)
    for module in (eager, node):
        module.weight.requires_grad_(weight_trains)
    assert kernels.use_rms_norm_node(node) == 1
    torch.manual_seed(0)
    x = (torch.randn(2, 7, 64) * 3).to(dtype)
    grad_out = torch.randn(2, 7, 64).to(dtype)
    inputs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    out_eager, out_node = eager(inputs[0]), node(inputs[1])
    assert type(out_node.grad_fn).__name__ == "RmsNormNodeBackward"
    assert torch.equal(out_node, out_eager)
    out_eager.backward(grad_out)
    out_node.backward(grad_out)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(inputs[1].grad, inputs[0].grad, **tolerance)
    if weight_trains:
        torch.testing.assert_close(node.weight.grad, eager.weight.grad, **tolerance)
    else:
        assert node.weight.grad is None


def _kept_for_backward(fn):
    """(result of fn(), data pointers of the tensors autograd keeps for the backward pass while it runs)."""
    kept = []

    def pack(tensor):
        kept.append(tensor.data_ptr())
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        return fn(), kept


@pytest.mark.parametrize("case", ["float32", "zero weight", "bfloat16"])
def test_node_keeps_its_output_in_float32_and_its_input_otherwise(case):
    """In float32 the node keeps the output (which the next projections keep anyway) instead of the input, and
    recovers the normalized input from it; a weight with a zero, or a bf16 input, keeps the input as before."""
    dtype = torch.bfloat16 if case == "bfloat16" else torch.float32
    eager, node = _norm(LlamaRMSNorm, 64).to(dtype), _norm(LlamaRMSNorm, 64).to(dtype)
    with torch.no_grad():
        for module in (eager, node):
            module.weight.copy_(torch.linspace(-2, 2, 64))  # negative weights recover too
            if case == "zero weight":
                module.weight[5] = 0.0
    kernels.use_rms_norm_node(node)
    torch.manual_seed(1)
    x = (torch.randn(3, 5, 64) * 2).to(dtype)
    inputs = [x.clone().requires_grad_(), x.clone().requires_grad_()]
    out_node, kept = _kept_for_backward(lambda: node(inputs[1]))
    keeps_output = case == "float32"
    assert (out_node.data_ptr() in kept) is keeps_output
    assert (inputs[1].data_ptr() in kept) is not keeps_output
    out_eager = eager(inputs[0])
    assert torch.equal(out_node, out_eager)
    grad_out = torch.randn(3, 5, 64).to(dtype)
    out_eager.backward(grad_out)
    out_node.backward(grad_out)
    tolerance = {"rtol": 1e-5, "atol": 1e-5} if dtype == torch.float32 else {"rtol": 2e-2, "atol": 2e-2}
    torch.testing.assert_close(inputs[1].grad, inputs[0].grad, **tolerance)
    torch.testing.assert_close(node.weight.grad, eager.weight.grad, **tolerance)


def test_node_checks_a_trained_weight_again_after_it_changed():
    node = _norm(LlamaRMSNorm, 8)
    kernels.use_rms_norm_node(node)
    x = torch.randn(2, 8, requires_grad=True)
    out, kept = _kept_for_backward(lambda: node(x))
    assert out.data_ptr() in kept
    with torch.no_grad():
        node.weight[0] = 0.0  # an optimizer step that zeroes an element (in place: the version moves)
    out, kept = _kept_for_backward(lambda: node(x))
    assert out.data_ptr() not in kept and x.data_ptr() in kept


def test_node_backward_is_the_analytic_gradient():
    x = torch.randn(3, 4, 8, dtype=torch.float64, requires_grad=True)
    w = torch.randn(8, dtype=torch.float64, requires_grad=True)
    # the forward computes in float32 as LlamaRMSNorm does; gradcheck needs float64 throughout, so check the
    # shared backward against autograd on the float64 formula instead
    rstd = torch.rsqrt(x.detach().pow(2).mean(-1, keepdim=True) + 1e-6)
    grad_out = torch.randn(3, 4, 8, dtype=torch.float64)
    grads = kernels._rms_norm_grads(grad_out, x.detach(), rstd, w.detach(), True)
    expected = torch.autograd.grad(w * (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)), (x, w), grad_out)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want)


def test_node_keeps_the_eager_forward_where_it_does_not_apply(monkeypatch):
    model = nn.ModuleDict({"llama": _norm(LlamaRMSNorm), "gemma": _norm(Gemma3RMSNorm), "other": _norm(Qwen2RMSNorm)})
    other_forward = types.MethodType(lambda self, h: h * 2, model["other"])
    model["other"].forward = other_forward  # replaced by someone else (Liger, the SUPA kernel)
    gemma_forward = model["gemma"].forward
    assert kernels.use_rms_norm_node(model) == 1
    assert kernels.use_rms_norm_node(model) == 0  # patching twice is a no-op
    assert model["gemma"].forward == gemma_forward and model["other"].forward == other_forward
    norm = model["llama"]
    x = torch.randn(3, 16, requires_grad=True)
    with torch.no_grad():
        assert norm(x).grad_fn is None
    norm.weight.requires_grad_(False)
    assert norm(x.detach()).grad_fn is None  # nothing trains through it: the eager forward
    norm.weight.requires_grad_(True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert type(norm(x).grad_fn).__name__ != "RmsNormNodeBackward"
    norm.weight.ds_numel = 16  # a DeepSpeed ZeRO-3 parameter: gathered and released around the eager forward
    assert type(norm(x).grad_fn).__name__ != "RmsNormNodeBackward"
    del norm.weight.ds_numel
    assert type(norm(x).grad_fn).__name__ == "RmsNormNodeBackward"


def test_a_training_step_of_a_model_is_unchanged():
    from tinymodels import tiny_model_and_tokenizer

    eager, _ = tiny_model_and_tokenizer()
    node, _ = tiny_model_and_tokenizer()
    node.load_state_dict(eager.state_dict())
    assert kernels.use_rms_norm_node(node) == 2 * node.config.num_hidden_layers + 1
    torch.manual_seed(3)
    ids = torch.randint(0, 300, (2, 10))
    losses = [model(input_ids=ids, labels=ids).loss for model in (eager, node)]
    assert torch.equal(losses[0], losses[1])
    for loss in losses:
        loss.backward()
    for (name, a), (_, b) in zip(eager.named_parameters(), node.named_parameters()):
        torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=1e-6, msg=name)
