"""The fused LoRA linear forward: same outputs and gradients as PEFT's, PEFT's own path where it cannot apply, and
an unchanged standard adapter on disk."""

from __future__ import annotations

import copy

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from tinymodels import tiny_model_and_tokenizer

from engine.config.schema import FinetuningArgs, ModelArgs
from engine.models import adapters
from engine.models.lora_fused import LoraLinearFunction, use_fused_lora

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(dropout: float = 0.0, **extra):
    model, _ = tiny_model_and_tokenizer()
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=TARGETS, lora_dropout=dropout,
                                                  **extra))
    torch.manual_seed(2)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.3)  # a trained-looking adapter (PEFT starts B at zero)
    return peft_model


def _ids():
    torch.manual_seed(3)
    return torch.randint(0, 300, (2, 10))


def _calls(monkeypatch) -> list:
    calls = []
    original = LoraLinearFunction.apply
    monkeypatch.setattr(LoraLinearFunction, "apply", lambda *a: calls.append(1) or original(*a))
    return calls


def test_fused_forward_matches_peft_in_outputs_and_gradients(monkeypatch):
    plain = _lora()
    fused = copy.deepcopy(plain)
    assert use_fused_lora(fused) == 14 and use_fused_lora(fused) == 0
    calls = _calls(monkeypatch)
    plain.train(), fused.train()
    ids = _ids()
    out_plain, out_fused = plain(input_ids=ids).logits, fused(input_ids=ids).logits
    assert len(calls) == 14
    torch.testing.assert_close(out_fused, out_plain, rtol=1e-5, atol=1e-5)
    out_plain.square().mean().backward()
    out_fused.square().mean().backward()
    grads = {n: p.grad for n, p in plain.named_parameters() if p.requires_grad}
    assert len(grads) == 28
    for name, param in fused.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_function_gradients_with_bias_and_trainable_base_are_exact():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 6, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(7, 6, dtype=torch.float64, requires_grad=True)
    bias = torch.randn(7, dtype=torch.float64, requires_grad=True)
    a = torch.randn(2, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(7, 2, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda *t: LoraLinearFunction.apply(*t, 1.5), (x, weight, bias, a, b))


def test_dropout_while_training_and_disabled_adapters_keep_pefts_path(monkeypatch):
    model = _lora(dropout=0.1)
    use_fused_lora(model)
    calls = _calls(monkeypatch)
    model.train()
    model(input_ids=_ids())
    assert calls == []  # dropout must act: PEFT's path
    model.eval()
    model(input_ids=_ids())
    assert len(calls) == 14  # dropout is a no-op in eval
    calls.clear()
    with model.disable_adapter():
        model(input_ids=_ids())
    assert calls == []


def test_dora_layers_are_left_alone():
    model = _lora(use_dora=True)
    reference = copy.deepcopy(model)
    use_fused_lora(model)
    ids = _ids()
    with torch.no_grad():
        torch.testing.assert_close(model(input_ids=ids).logits, reference(input_ids=ids).logits)


def test_saved_adapter_is_standard_and_merges_to_the_same_logits(tmp_path):
    model = _lora()
    use_fused_lora(model)
    model.eval()
    ids = _ids()
    with torch.no_grad():
        expected = model(input_ids=ids).logits
    model.save_pretrained(tmp_path / "adapter")
    fresh, _ = tiny_model_and_tokenizer()
    loaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, expected, rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(loaded.merge_and_unload()(input_ids=ids).logits, expected, rtol=1e-5, atol=1e-5)


def test_setup_lora_fuses_the_layers():
    model, _ = tiny_model_and_tokenizer()
    model = adapters.setup_lora(model, ModelArgs(), FinetuningArgs(lora_target="all"), is_trainable=True)
    assert sum(getattr(m, "_lf_fused_lora", False) for m in model.modules()) == 14
