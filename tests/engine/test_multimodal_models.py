"""Composite rules on the real transformers classes: exactly which parameters train for each family and setting.

The expected groups are written out per class (parameter-name prefixes of the transformers models), independent of
the registry keys the engine uses, so a wrong or missing key shows up here.
"""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm  # noqa: E402

from engine.config import FinetuningArgs, ModelArgs  # noqa: E402
from engine.models import adapters  # noqa: E402
from engine.models.registry import composite_info  # noqa: E402

# family -> (vision tower prefixes, projector prefixes); everything else under model.language_model / lm_head
GROUPS = {
    "qwen2_vl": (("model.visual.patch_embed", "model.visual.blocks"), ("model.visual.merger",)),
    "qwen2_5_vl": (("model.visual.patch_embed", "model.visual.blocks"), ("model.visual.merger",)),
    "qwen3_vl": (("model.visual.patch_embed", "model.visual.pos_embed", "model.visual.blocks"),
                 ("model.visual.merger", "model.visual.deepstack_merger_list")),
    "qwen3_5": (("model.visual.patch_embed", "model.visual.pos_embed", "model.visual.blocks"),
                ("model.visual.merger",)),
    "glm4v": (("model.visual.embeddings", "model.visual.patch_embed", "model.visual.post_conv_layernorm",
               "model.visual.blocks", "model.visual.post_layernorm", "model.visual.downsample"),
              ("model.visual.merger",)),
    "gemma3": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "gemma4": (("model.vision_tower",), ("model.embed_vision",)),
    "gemma4n": (("model.vision_tower", "model.audio_tower"), ("model.embed_vision", "model.embed_audio")),
    "llava": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "llava_next": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "qwen2_audio": (("model.audio_tower",), ("model.multi_modal_projector",)),  # the audio encoder as the "tower"
    "intern_vl": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "paligemma": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "mistral3": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "llava_next_video": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "video_llava": (("model.image_tower", "model.video_tower"), ("model.multi_modal_projector",)),
    "pixtral": (("model.vision_tower",), ("model.multi_modal_projector",)),
    "mllama": (("model.vision_model",), ("model.multi_modal_projector",)),
    "ernie_vl": (("model.vision_tower",), ("model.resampler_model",)),
    "minicpmv4_6": (("model.vision_tower",), ("model.merger",)),  # vision_tower holds its window merger (vit_merger)
}
# Parameters outside the three groups: LLaVA-NeXT's image_newline (the row-end embedding of its any-resolution grid),
# which LLaMA-Factory trains in full tuning whatever the freeze keys say, and leaves frozen with LoRA and freeze tuning.
OTHERS = {"llava_next": ("model.image_newline",), "llava_next_video": ("model.image_newline",)}


@pytest.fixture(scope="module", params=list(GROUPS))
def family_model(request):
    model, _ = build_tiny_vlm(request.param)
    return request.param, model


def _group(family: str, name: str) -> str:
    name = name.replace("base_model.model.", "")
    if name.startswith(OTHERS.get(family, ("-",))):
        return "other"
    towers, projectors = GROUPS[family]
    if name.startswith(towers):
        return "tower"
    if name.startswith(projectors):
        return "projector"
    assert name.startswith(("model.language_model", "lm_head")), name
    return "language"


def _trainable_groups(family: str, model) -> dict[str, int]:
    counts = {"tower": 0, "projector": 0, "language": 0, "other": 0}
    for name, param in model.named_parameters():
        if param.requires_grad:
            counts[_group(family, name)] += 1
    return counts


def _fresh(model):
    import copy

    clone = copy.deepcopy(model)
    clone.requires_grad_(True)
    return clone


def test_lora_all_never_reaches_tower_or_projectors(family_model):
    family, model = family_model
    composite = composite_info(model)
    assert composite is not None
    for args in (FinetuningArgs(), FinetuningArgs(freeze_vision_tower=False)):
        targets = adapters.find_all_linear_modules(model, composite, args)
        full = [n for n, _ in model.named_modules() if n.split(".")[-1] in targets or n in targets]
        assert full and all(_group(family, n) in ("language", "tower") for n in full)
        assert not any(_group(family, n) == "projector" for n in full)
        if args.freeze_vision_tower:
            assert all(_group(family, n) == "language" for n in full)
    peft_model = adapters.setup_lora(_fresh(model), ModelArgs(), FinetuningArgs(), composite, is_trainable=True)
    counts = _trainable_groups(family, peft_model)
    assert counts["language"] > 0 and counts["tower"] == 0 and counts["projector"] == 0 and counts["other"] == 0
    assert all("lora_" in n for n, p in peft_model.named_parameters() if p.requires_grad)


def test_lora_with_trainable_projectors_trains_every_projector(family_model):
    family, model = family_model
    args = FinetuningArgs(freeze_multi_modal_projector=False)
    peft_model = adapters.setup_lora(_fresh(model), ModelArgs(), args, composite_info(model), is_trainable=True)
    trained = {n for n, p in peft_model.named_parameters() if p.requires_grad and _group(family, n) == "projector"}
    for prefix in GROUPS[family][1]:  # each projector of a list-valued key set (Gemma 4 E: vision and audio)
        assert any(prefix in name for name in trained), prefix
    assert _trainable_groups(family, peft_model)["tower"] == 0 and _trainable_groups(family, peft_model)["other"] == 0


@pytest.mark.parametrize(("settings", "expected"), [
    ({}, {"tower": False, "projector": False, "language": True}),
    ({"freeze_vision_tower": False}, {"tower": True, "projector": False, "language": True}),
    ({"freeze_multi_modal_projector": False, "freeze_language_model": True},
     {"tower": False, "projector": True, "language": False}),
])
def test_full_tuning_follows_the_freeze_keys(family_model, settings, expected):
    family, model = family_model
    clone = _fresh(model)
    adapters.setup_full(clone, replace(FinetuningArgs(finetuning_type="full"), **settings), composite_info(model))
    for name, param in clone.named_parameters():
        group = _group(family, name)
        if group == "language" and expected["language"]:
            continue
        assert param.requires_grad == expected.get(group, True), (name, settings)  # "other": trained, as in LF
    counts = _trainable_groups(family, clone)
    assert all((counts[g] > 0) == expected[g] for g in expected)


def test_freeze_tuning_adds_projectors_unless_frozen(family_model):
    family, model = family_model
    clone = _fresh(model)
    args = FinetuningArgs(finetuning_type="freeze", freeze_trainable_layers=1, freeze_multi_modal_projector=False)
    adapters.setup_freeze(clone, args, composite_info(model))
    counts = _trainable_groups(family, clone)
    assert counts["projector"] > 0 and counts["tower"] == 0 and counts["language"] > 0 and counts["other"] == 0
    clone = _fresh(model)
    adapters.setup_freeze(clone, replace(args, freeze_multi_modal_projector=True), composite_info(model))
    assert _trainable_groups(family, clone)["projector"] == 0


def test_gemma4_e_loads_with_eager_attention_only_in_its_audio_tower(tmp_path):
    """Gemma 4 E's audio tower has no SDPA: the loader keeps SDPA for the rest and uses eager attention there."""
    from tinyvlms import save_tiny_vlm

    from engine.models import load_model

    folder = save_tiny_vlm("gemma4n", tmp_path / "gemma4n")
    model = load_model(ModelArgs(model_name_or_path=str(folder)), FinetuningArgs(finetuning_type="lora"),
                       is_trainable=False)
    config = model.config
    assert config.audio_config._attn_implementation == "eager"
    assert config.text_config._attn_implementation == config.vision_config._attn_implementation == "sdpa"


def test_text_template_vlms_keep_lora_off_their_encoders():
    """Llama 4 and Mistral Small 3.1 checkpoints (templates for text rows only here) still have their vision encoder
    and projector told apart: `lora_target: all` reaches only the language model, as in LLaMA-Factory."""
    from transformers import (
        Llama4Config,
        Llama4ForConditionalGeneration,
        Mistral3Config,
        Mistral3ForConditionalGeneration,
    )

    vision = {"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2, "intermediate_size": 64,
              "image_size": 28, "patch_size": 14}
    text = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 4,
            "num_key_value_heads": 2, "vocab_size": 100}
    models = [
        Llama4ForConditionalGeneration(Llama4Config(
            vision_config={**vision, "vision_output_dim": 32, "projector_input_dim": 32, "projector_output_dim": 32},
            text_config={**text, "head_dim": 8, "intermediate_size_mlp": 64, "num_local_experts": 2})),
        Mistral3ForConditionalGeneration(Mistral3Config(vision_config={**vision, "head_dim": 16},
                                                        text_config={"model_type": "mistral", **text})),
    ]
    for model, family in zip(models, ("Llama 4", "Mistral Small 3.1")):
        composite = composite_info(model)
        assert composite is not None and composite.name == family
        targets = adapters.find_all_linear_modules(model, composite, FinetuningArgs())
        assert targets and all("language_model" in name for name in targets)
