"""The fused SwiGLU MLP: PEFT's outputs and gradients, half the MLP activations kept, the module's own forward where
it cannot apply."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, get_peft_model
from tinymodels import tiny_model_and_tokenizer

from engine.models.lora_fused import use_fused_lora
from engine.models.mlp_fused import SwiGluLoraFunction, use_fused_mlp

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(targets=TARGETS, dropout: float = 0.0):
    model, _ = tiny_model_and_tokenizer()
    peft_model = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=dropout))
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
    original = SwiGluLoraFunction.apply
    monkeypatch.setattr(SwiGluLoraFunction, "apply", lambda *a: calls.append(1) or original(*a))
    return calls


def test_matches_peft_in_outputs_and_gradients(monkeypatch):
    plain = _lora()
    fused = copy.deepcopy(plain)
    use_fused_lora(fused)
    assert use_fused_mlp(fused) == 2 and use_fused_mlp(fused) == 0
    calls = _calls(monkeypatch)
    plain.train(), fused.train()
    ids = _ids()
    out_plain, out_fused = plain(input_ids=ids).logits, fused(input_ids=ids).logits
    assert len(calls) == 2
    torch.testing.assert_close(out_fused, out_plain, rtol=1e-5, atol=1e-5)
    out_plain.square().mean().backward()
    out_fused.square().mean().backward()
    grads = {n: p.grad for n, p in plain.named_parameters() if p.requires_grad}
    assert len(grads) == 28
    for name, param in fused.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, grads[name], rtol=1e-4, atol=1e-6, msg=name)


def test_function_gradients_are_exact_in_float64():
    torch.manual_seed(0)

    def t(*shape):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=True)

    x = t(2, 3, 6)
    args = (x, t(5, 6).detach(), t(2, 6), t(5, 2), t(5, 6).detach(), t(2, 6), t(5, 2), t(6, 5).detach(), t(2, 5),
            t(6, 2))
    assert torch.autograd.gradcheck(lambda *a: SwiGluLoraFunction.apply(*a, (1.5, 0.5, 2.0)), args)


def test_keeps_half_the_mlp_activations():
    """Saved for backward per MLP call: gate and up outputs (2 x tokens x intermediate), not also SiLU's output and
    the product."""
    def saved_bytes(model) -> int:
        seen: dict[int, int] = {}

        def pack(tensor):
            storage = tensor.untyped_storage()
            seen.setdefault(storage.data_ptr(), storage.nbytes())
            return tensor

        with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
            model(input_ids=_ids())
        return sum(seen.values())

    plain = _lora()
    fused = copy.deepcopy(plain)
    use_fused_mlp(fused)
    plain.train(), fused.train()
    config = plain.get_base_model().config
    per_mlp = 2 * 10 * config.intermediate_size * 4  # one tokens x intermediate float32 tensor
    freed = saved_bytes(plain) - saved_bytes(fused)
    assert freed >= 2 * config.num_hidden_layers * per_mlp * 0.95, (freed, per_mlp)


def test_own_forward_without_grad_with_dropout_or_without_lora_on_all_three(monkeypatch):
    model = _lora(dropout=0.1)
    use_fused_mlp(model)
    calls = _calls(monkeypatch)
    model.train()
    model(input_ids=_ids())
    assert calls == []  # dropout must act: PEFT's path
    model.eval()
    with torch.no_grad():
        model(input_ids=_ids())
    assert calls == []  # no gradients: nothing to save
    model(input_ids=_ids())
    assert len(calls) == 2  # eval with gradients (dropout a no-op): fused
    assert use_fused_mlp(_lora(targets=["q_proj", "gate_proj", "up_proj"])) == 0


@pytest.mark.parametrize("checkpointing", [False, True])
def test_training_loss_matches_with_and_without_checkpointing(checkpointing):
    plain = _lora()
    fused = copy.deepcopy(plain)
    use_fused_mlp(fused)
    for model in (plain, fused):
        model.train()
        if checkpointing:
            model.get_base_model().gradient_checkpointing_enable({"use_reentrant": False})
    ids = _ids()
    losses = []
    for model in (plain, fused):
        optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
        for _ in range(3):
            loss = model(input_ids=ids, labels=ids).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
        losses.append(loss.item())
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
