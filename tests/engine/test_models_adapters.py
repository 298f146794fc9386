"""Composite-model handling in engine.models.adapters, on a small fake module tree shaped like Gemma 4."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from engine.config import FinetuningArgs
from engine.models import adapters
from engine.models.registry import FAMILIES

GEMMA4 = FAMILIES["Gemma 4"]


class Block(nn.Module):
    def __init__(self, width: int = 8):
        super().__init__()
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(width, width)
        self.mlp = nn.Module()
        self.mlp.up_proj = nn.Linear(width, width)


class FakeGemma4(nn.Module):
    """model.{embed_vision, embed_audio?, vision_tower, language_model} + lm_head."""

    def __init__(self, with_audio: bool = True):
        super().__init__()
        self.model = nn.Module()
        self.model.embed_vision = nn.Sequential(nn.Linear(4, 8))
        if with_audio:
            self.model.embed_audio = nn.Linear(4, 8)
        self.model.vision_tower = nn.Module()
        self.model.vision_tower.layers = nn.ModuleList([Block()])
        self.model.language_model = nn.Module()
        self.model.language_model.embed_tokens = nn.Embedding(10, 8)
        self.model.language_model.layers = nn.ModuleList([Block(), Block()])
        self.model.language_model.per_layer_projection_norm = nn.Linear(8, 8)
        self.lm_head = nn.Linear(8, 10)

    def get_input_embeddings(self):
        return self.model.language_model.embed_tokens

    def get_output_embeddings(self):
        return self.lm_head


LANGUAGE_LINEARS = [f"model.language_model.layers.{i}.{m}" for i in (0, 1) for m in ("mlp.up_proj", "self_attn.q_proj")]


def test_missing_projector_is_skipped_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="engine.models.adapters"):
        assert adapters.present_projectors(FakeGemma4(with_audio=False), GEMMA4) == ["model.embed_vision"]
    assert "model.embed_audio" in caplog.text and "skipped" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="engine.models.adapters"):
        found = adapters.present_projectors(FakeGemma4(), GEMMA4)
    assert found == ["model.embed_vision", "model.embed_audio"] and not caplog.text
    assert adapters.present_projectors(FakeGemma4(), None) == []


def test_lora_all_excludes_projectors_towers_and_conflicts():
    model = FakeGemma4()
    targets = adapters.find_all_linear_modules(model, GEMMA4, FinetuningArgs())
    # the vision tower has q_proj/up_proj too, so short names would catch it: full names are used
    assert targets == sorted(LANGUAGE_LINEARS)
    unfrozen = adapters.find_all_linear_modules(model, GEMMA4, FinetuningArgs(freeze_vision_tower=False))
    assert unfrozen == ["q_proj", "up_proj"]
    assert adapters.key_matches("model.visual.merger.mlp", "visual.merger")
    assert not adapters.key_matches("model.prevvisual.merger", "visual.merger")


def test_lora_config_trains_projectors_when_asked():
    model = FakeGemma4(with_audio=False)
    config = adapters.lora_config(model, FinetuningArgs(freeze_multi_modal_projector=False), GEMMA4)
    assert config.modules_to_save == ["model.embed_vision"]
    assert adapters.lora_config(model, FinetuningArgs(), GEMMA4).modules_to_save is None


@pytest.mark.parametrize("train_projector", [True, False])
def test_freeze_adds_every_projector_unless_frozen(train_projector):
    model = FakeGemma4()
    args = FinetuningArgs(finetuning_type="freeze", freeze_trainable_layers=1,
                          freeze_multi_modal_projector=not train_projector)
    trainable = set(adapters.setup_freeze(model, args, GEMMA4))
    layer = {n for n in trainable if n.startswith("model.language_model.layers.")}
    assert layer and all(n.startswith("model.language_model.layers.1.") for n in layer)
    projectors = {n for n in trainable if n.startswith(("model.embed_vision", "model.embed_audio"))}
    assert bool(projectors) == train_projector
    if train_projector:
        assert {"model.embed_vision.0.weight", "model.embed_audio.weight"} <= projectors
    assert not any("vision_tower" in n for n in trainable)


def test_full_keeps_frozen_parts_frozen():
    model = FakeGemma4()
    adapters.setup_full(model, FinetuningArgs(finetuning_type="full"), GEMMA4)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(n.startswith(("model.vision_tower", "model.embed_")) for n in frozen)
    adapters.setup_full(model, FinetuningArgs(finetuning_type="full", freeze_vision_tower=False,
                                              freeze_multi_modal_projector=False), GEMMA4)
    assert all(p.requires_grad for p in model.parameters())


def test_projector_outputs_are_cast_to_the_compute_dtype():
    model = FakeGemma4(with_audio=False)
    hooks = adapters.add_projector_cast_hooks(model, GEMMA4, torch.bfloat16)
    assert len(hooks) == 1
    assert model.model.embed_vision(torch.randn(2, 4)).dtype == torch.bfloat16
    assert model.lm_head(torch.randn(2, 8)).dtype == torch.float32
    hooks[0].remove()
    assert model.model.embed_vision(torch.randn(2, 4)).dtype == torch.float32


def test_upcast_and_count():
    model = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)).to(torch.bfloat16)
    model[1].requires_grad_(False)
    assert adapters.upcast_trainable_params(model) == 2
    assert model[0].weight.dtype == torch.float32 and model[1].weight.dtype == torch.bfloat16
    assert adapters.count_parameters(model) == (20, 30)


@pytest.mark.parametrize(("target", "words"), [
    ("1", "`lora_target` matches `model.layers.1`, a LlamaDecoderLayer, which LoRA cannot train"),
    ("mlp", "`lora_target` matches `model.layers.0.mlp` and 1 more, a LlamaMLP, which LoRA cannot train"),
    ("q_proj,norm", "`lora_target` matches `model.norm`, a LlamaRMSNorm, which LoRA cannot train"),
])
def test_a_lora_target_peft_cannot_train_is_named_not_a_traceback(target, words):
    """`lora_target: 1,2` (a YAML list of numbers) matched the decoder layers by their index: PEFT raised a ValueError
    printing the whole layer, and no name of it, in a traceback."""
    from types import SimpleNamespace

    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.errors import ModelError

    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                                         num_attention_heads=2, num_key_value_heads=2))
    model_args = SimpleNamespace(adapter_name_or_path=None, resize_vocab=False)
    with pytest.raises(ModelError) as raised:
        adapters.setup_lora(model, model_args, FinetuningArgs(lora_target=target), is_trainable=True)
    assert words in str(raised.value), str(raised.value)
    assert "Name linear layers (down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj)" in str(
        raised.value)
