"""Stacked q, k, v projections: PEFT's outputs and gradients from one multiply, the layers' own forwards where the
stacked path cannot apply, and training losses equal with and without checkpointing."""

from __future__ import annotations

import copy

import pytest
import torch
from peft import LoraConfig, get_peft_model
from tinymodels import tiny_model_and_tokenizer

from engine.models.lora_fused import LoraLinearFunction, use_fused_lora
from engine.models.mlp_fused import use_fused_mlp
from engine.models.qkv_fused import QkvLoraFunction, use_fused_qkv
from engine.models.stacked import stack_in_place, stacked

TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]


def _lora(targets=TARGETS, dropout: float = 0.0, rank_pattern=None):
    model, _ = tiny_model_and_tokenizer()
    config = LoraConfig(r=4, lora_alpha=8, target_modules=targets, lora_dropout=dropout,
                        rank_pattern=rank_pattern or {})
    peft_model = get_peft_model(model, config)
    torch.manual_seed(2)
    for name, param in peft_model.named_parameters():
        if "lora_B" in name:
            param.data.normal_(0, 0.3)  # a trained-looking adapter (PEFT starts B at zero)
    return peft_model


def _ids():
    torch.manual_seed(3)
    return torch.randint(0, 300, (2, 10))


def _count(monkeypatch, cls) -> list:
    calls = []
    original = cls.apply
    monkeypatch.setattr(cls, "apply", lambda *a: calls.append(1) or original(*a))
    return calls


def _fuse(model):
    use_fused_lora(model)
    use_fused_mlp(model)
    return use_fused_qkv(model)


def test_matches_peft_in_outputs_and_gradients(monkeypatch):
    plain = _lora()
    fused = copy.deepcopy(plain)
    layers = fused.get_base_model().config.num_hidden_layers
    assert _fuse(fused) == layers and use_fused_qkv(fused) == 0
    for layer in fused.get_base_model().model.layers:
        attn = layer.self_attn
        assert stacked(*(p.get_base_layer().weight for p in (attn.q_proj, attn.k_proj, attn.v_proj))) is not None
    qkv, linear = _count(monkeypatch, QkvLoraFunction), _count(monkeypatch, LoraLinearFunction)
    plain.train(), fused.train()
    ids = _ids()
    out_plain, out_fused = plain(input_ids=ids).logits, fused(input_ids=ids).logits
    assert len(qkv) == layers and len(linear) == layers  # q/k/v stacked; o_proj alone (the MLP has its own node)
    torch.testing.assert_close(out_fused, out_plain, rtol=1e-5, atol=1e-5)
    out_plain.square().mean().backward()
    out_fused.square().mean().backward()
    grads = {n: p.grad for n, p in plain.named_parameters() if p.requires_grad}
    assert len(grads) == 28
    for name, param in fused.named_parameters():
        if param.requires_grad:
            torch.testing.assert_close(param.grad, grads[name], rtol=1e-4, atol=1e-6, msg=name)
    assert all("_lf_qkv_stash" not in layer.self_attn.__dict__ for layer in fused.get_base_model().model.layers)


def test_function_gradients_are_exact_in_float64():
    torch.manual_seed(0)

    def t(*shape, grad=True):
        return torch.randn(*shape, dtype=torch.float64, requires_grad=grad)

    wq, wk, wv = t(6, 5, grad=False), t(3, 5, grad=False), t(3, 5, grad=False)
    assert stack_in_place(wq, wk, wv)
    x = t(2, 3, 5)
    args = (x, wq, t(2, 5), t(6, 2), wk, t(2, 5), t(3, 2), wv, t(2, 5), t(3, 2))
    assert torch.autograd.gradcheck(lambda *a: QkvLoraFunction.apply(*a, (1.5, 0.5, 2.0)), args)
    # an output left unused gets no gradient and breaks nothing
    q, k, v = QkvLoraFunction.apply(*args, (1.5, 0.5, 2.0))
    (q.sum() + v.sum()).backward()
    assert x.grad is not None


def test_own_forwards_where_the_stacked_path_cannot_apply(monkeypatch):
    qkv = _count(monkeypatch, QkvLoraFunction)
    model = _lora(dropout=0.1)
    _fuse(model)
    model.train()
    model(input_ids=_ids())
    assert qkv == []  # dropout must act: PEFT's path
    model.eval()
    with torch.no_grad():
        model(input_ids=_ids())
    assert qkv == []  # no gradients: nothing to save
    assert use_fused_qkv(_lora(targets=["q_proj", "v_proj"])) == 0  # k without LoRA
    assert use_fused_qkv(_lora(rank_pattern={"k_proj": 2})) == 0  # unequal ranks
    moved = _lora()
    _fuse(moved)
    moved.get_base_model().model.layers[0].self_attn.k_proj.get_base_layer().to(torch.float64).to(torch.float32)
    moved.train()
    moved(input_ids=_ids())
    assert len(qkv) == moved.get_base_model().config.num_hidden_layers - 1  # layer 0's weights moved apart


@pytest.mark.parametrize("checkpointing", [False, True])
def test_training_loss_matches_with_and_without_checkpointing(checkpointing, monkeypatch):
    plain = _lora()
    fused = copy.deepcopy(plain)
    _fuse(fused)
    qkv = _count(monkeypatch, QkvLoraFunction)
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
    assert qkv  # the stacked path ran
    assert losses[0] == pytest.approx(losses[1], rel=1e-4)
