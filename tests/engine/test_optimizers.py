"""Muon for the blocks' 2-D matrices, AdamW for the rest, driven by one scheduler."""

import torch
from transformers import LlamaConfig, LlamaForCausalLM, TrainingArguments, get_cosine_schedule_with_warmup

from engine.config import ConfigError, build_config
from engine.train.optimizers import build_muon_optimizer


def test_parameters_are_split_and_both_optimizers_learn(tmp_path):
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, num_key_value_heads=4, tie_word_embeddings=False))
    args = TrainingArguments(output_dir=str(tmp_path), learning_rate=0.02, weight_decay=0.01, report_to=[])
    opt = build_muon_optimizer(model, args)
    muon, adamw = opt.inner
    muon_ids = {id(p) for g in muon.param_groups for p in g["params"]}
    assert id(model.model.layers[0].self_attn.q_proj.weight) in muon_ids
    assert id(model.model.embed_tokens.weight) not in muon_ids and id(model.lm_head.weight) not in muon_ids
    assert id(model.model.norm.weight) not in muon_ids
    total = sum(1 for p in model.parameters())
    assert sum(len(g["params"]) for g in opt.param_groups) == total
    scheduler = get_cosine_schedule_with_warmup(opt, 0, 10)
    ids = torch.randint(0, 64, (4, 16))
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    losses = []
    for _ in range(5):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        scheduler.step()
        opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    assert all(g["lr"] < 0.02 for opt_ in opt.inner for g in opt_.param_groups)  # the scheduler reached both
    assert not torch.equal(before["model.embed_tokens.weight"], model.model.embed_tokens.weight)
    assert not torch.equal(before["model.layers.0.mlp.up_proj.weight"], model.model.layers[0].mlp.up_proj.weight)
    state = opt.state_dict()
    opt.load_state_dict(state)


def test_muon_outside_pt_and_sft_is_refused():
    try:
        build_config({"use_muon": True, "stage": "dpo"})
    except ConfigError as err:
        assert "works with stages pt and sft" in str(err)
    else:
        raise AssertionError("use_muon with dpo was accepted")
