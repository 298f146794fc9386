"""engine.models.registry: the model dropdown, default templates and composite-model keys."""

from __future__ import annotations

import json
import types

import pytest

from engine.models import registry
from engine.models.registry import FAMILIES, composite_info, default_template, family_of, list_models


def test_one_explicit_dict_of_families():
    assert isinstance(FAMILIES, dict)
    for name, family in FAMILIES.items():
        assert family.name == name
        assert family.template and family.models
        assert isinstance(family.projector_keys, tuple) and isinstance(family.vision_keys, tuple)
        if family.is_composite:
            assert family.multimodal
    templates = {f.template for f in FAMILIES.values()}
    assert {"qwen3", "qwen", "llama3", "gemma3", "gemma4", "gemma4n", "glm4", "mistral", "phi4", "deepseek3",
            "chatml", "qwen2_vl", "qwen3_vl", "qwen3_5", "minicpm_v"} <= templates


def test_every_family_template_is_registered_with_a_family():
    from engine.templates import TEMPLATES

    used = {f.template for f in FAMILIES.values()}
    generic = {"default", "empty", "alpaca"}  # formats, not model families
    # LLaMA-Factory 0.9.5 defines them but lists no model for them
    unlisted = {"qwen3_5_nothink", "qwen3_6", "bailing", "bailing_v2", "chatml_de", "fewshot", "paligemma_chat"}
    assert set(TEMPLATES) - used == generic | unlisted


def test_no_model_is_listed_in_two_families():
    """A hub id in two families takes the first one's template: Mistral-Small-24B-Instruct-2501 got `mistral`, and
    Phi-4-mini `phi4`, where LLaMA-Factory uses `mistral_small` and `phi4_mini`."""
    seen: dict[str, str] = {}
    for family in FAMILIES.values():
        for hub in family.models.values():
            assert hub.lower() not in seen, f"{hub} is in {seen[hub.lower()]} and {family.name}"
            seen[hub.lower()] = family.name
    assert default_template("mistralai/Mistral-Small-24B-Instruct-2501") == "mistral_small"
    assert default_template("microsoft/Phi-4-mini-instruct") == "phi4_mini"
    assert default_template("zai-org/GLM-Z1-9B-0414") == "glmz1"
    assert default_template("mistralai/Mistral-Nemo-Instruct-2407") == "ministral"


@pytest.mark.parametrize(("model_type", "text", "template"), [
    ("llava_next", {"model_type": "llama", "vocab_size": 32064}, "llava_next"),  # llava-v1.6-vicuna
    ("llava_next", {"model_type": "mistral", "vocab_size": 32064}, "llava_next_mistral"),
    ("llava_next", {"model_type": "llama", "vocab_size": 128320}, "llava_next_llama3"),  # llama3-llava-next-8b
    ("llava_next", {"model_type": "llama", "vocab_size": 64064}, "llava_next_yi"),  # llava-v1.6-34b
    ("llava_next", {"model_type": "qwen2", "vocab_size": 152064}, "llava_next_qwen"),
    ("llava_next", {"model_type": "granite", "vocab_size": 49156}, "granite3_vision"),
    ("llava", {"model_type": "llama", "vocab_size": 32064}, "llava"),
    ("llava", {"model_type": "llama", "vocab_size": 64000}, "yi_vl"),
    ("llava_next_video", {"model_type": "llama", "vocab_size": 32064}, "llava_next_video"),
    ("llava_next_video", {"model_type": "mistral", "vocab_size": 32064}, "llava_next_video_mistral"),
    ("llava_next_video", {"model_type": "llama", "vocab_size": 64064}, "llava_next_video_yi"),
])
def test_a_local_llava_folder_gets_its_language_models_template(tmp_path, model_type, text, template):
    """One model type serves several LLaVA templates: a folder not named after its hub repo is told apart by the
    language model in its config."""
    folder = tmp_path / "my-vlm"
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type, "text_config": text}), encoding="utf-8")
    assert default_template(str(folder)) == template


def test_a_llava_folder_with_a_pixtral_tower_is_pixtral(tmp_path):
    """Pixtral 12B is a LLaVA model whose vision config is Pixtral's; Mistral Small 3.x has its own model type."""
    for name, config, template in (
            ("pixtral-12b-copy", {"model_type": "llava", "vision_config": {"model_type": "pixtral"},
                                  "text_config": {"model_type": "mistral", "vocab_size": 131072}}, "pixtral"),
            ("my-mistral3", {"model_type": "mistral3", "vision_config": {"model_type": "pixtral"}}, "mistral_small")):
        folder = tmp_path / name
        folder.mkdir()
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
        assert default_template(str(folder)) == template
    assert default_template("mistral-community/pixtral-12b") == "pixtral"


def test_list_models():
    models = list_models()
    assert models["LF-Demo"] == "demo"
    assert models["Gemma-4-26B-A4B-Thinking"] == "google/gemma-4-26B-A4B-it"
    assert models["Gemma-4-31B-Thinking"] == "google/gemma-4-31B-it"
    assert models["Gemma-4-E2B-Thinking"] == "google/gemma-4-E2B-it"
    assert models["Gemma-4-E4B-Thinking"] == "google/gemma-4-E4B-it"
    assert models["Qwen3-4B"] == "Qwen/Qwen3-4B"
    assert models["Llama-3.2-1B-Instruct"] == "meta-llama/Llama-3.2-1B-Instruct"
    assert len(models) == len(set(models))


@pytest.mark.parametrize(("name", "template"), [
    ("demo", "chatml"),
    ("LF-Demo", "chatml"),
    ("Gemma-4-31B-Thinking", "gemma4"),
    ("google/gemma-4-26B-A4B-it", "gemma4"),
    ("google/gemma-4-E2B-it", "gemma4n"),
    ("Gemma-4-E4B-Thinking", "gemma4n"),
    ("qwen/qwen3-8b", "qwen3"),
    ("Qwen/Qwen2.5-7B-Instruct", "qwen"),
    ("meta-llama/Llama-3.1-8B-Instruct", "llama3"),
    ("google/gemma-3-4b-it", "gemma3"),
    ("zai-org/GLM-4-9B-0414", "glm4"),
    ("mistralai/Mistral-7B-Instruct-v0.3", "mistral"),
    ("microsoft/phi-4", "phi4"),
    ("deepseek-ai/DeepSeek-R1", "deepseekr1"),
    ("deepseek-ai/DeepSeek-V3", "deepseek3"),
    ("Qwen/Qwen3-4B-Instruct-2507", "qwen3_nothink"),
    ("google/gemma-2-9b-it", "gemma2"),
    ("HuggingFaceTB/SmolLM2-1.7B-Instruct", "smollm2"),
    ("openai/gpt-oss-20b", "gpt_oss"),
    ("lmsys/vicuna-7b-v1.5", "vicuna"),
    ("HuggingFaceH4/zephyr-7b-beta", "zephyr"),
    ("Qwen/Qwen2.5-VL-7B-Instruct", "qwen2_vl"),
    ("/models/hub/models--Qwen--Qwen3-4B", "qwen3"),
    ("/data/weights/Qwen3-4B/", "qwen3"),
    ("someone/unknown-model", None),
    ("", None),
])
def test_default_template_by_name(name, template):
    assert default_template(name) == template


def _folder(tmp_path, config):
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(tmp_path)


def test_default_template_from_local_config(tmp_path):
    assert default_template(_folder(tmp_path, {"model_type": "qwen2_vl"})) == "qwen2_vl"
    assert default_template(_folder(tmp_path, {"model_type": "gemma4", "audio_config": {"hidden_size": 8}})) == "gemma4n"
    assert default_template(_folder(tmp_path, {"model_type": "gemma4", "audio_config": None})) == "gemma4"
    assert default_template(_folder(tmp_path, {"model_type": "llama", "lf_board_demo": True})) == "chatml"
    assert default_template(_folder(tmp_path, {"model_type": "llama"})) is None  # Llama 2 or 3: cannot tell
    (tmp_path / "config.json").write_text("{broken", encoding="utf-8")
    assert default_template(str(tmp_path)) is None


def test_composite_info():
    omni = composite_info("qwen2_5_omni_thinker")
    assert omni.projector_keys == ("visual.merger", "audio_tower.proj")
    # the deepstack mergers too, which LLaMA-Factory's substring match of `visual.merger` freezes with the projector
    assert composite_info("qwen3_omni_moe_thinker").projector_keys == ("visual.merger", "visual.merger_list",
                                                                       "audio_tower.proj")
    assert composite_info("qwen3_5").projector_keys == ("model.visual.merger",)
    assert composite_info("qwen2_vl").projector_keys == ("visual.merger",)
    assert composite_info("minicpmv").projector_keys == ("resampler",)
    gemma4 = composite_info(types.SimpleNamespace(config=types.SimpleNamespace(model_type="gemma4", audio_config=None)))
    assert gemma4.projector_keys == ("model.embed_vision", "model.embed_audio")
    assert gemma4.vision_keys == ("vision_tower", "audio_tower")
    assert gemma4.lora_conflict_keys == ("per_layer_projection_norm",)
    assert composite_info({"model_type": "gemma4", "audio_config": {"x": 1}}).template == "gemma4n"
    assert composite_info("llama") is None
    assert composite_info("gemma3_text") is None  # the text-only member of a multimodal family
    assert composite_info("qwen3") is None


def test_family_of_returns_family_objects():
    assert family_of("demo") is FAMILIES["LF-Demo"]
    assert family_of("Qwen3-4B").hub_ids[0].startswith("Qwen/")
    assert registry.family_of_config(None) is None
