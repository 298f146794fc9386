"""Known model families: the board's model dropdown, default templates and composite-model keys.

One explicit dict, :data:`FAMILIES`, maps a family name to its :class:`ModelFamily`. A family lists its
models (display name → hub id), the prompt template they use, the ``model_type`` values of their
``config.json`` and, for composite (vision/audio-language) models, the module keys the loader needs:
projectors, encoder towers, the language model, and modules that must never get LoRA.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.models.families_text import TEXT_FAMILIES, hub_ids

logger = logging.getLogger(__name__)

DEMO_MODEL_NAME = "LF-Demo"
DEMO_MODEL_PATH = "demo"


@dataclass(frozen=True)
class ModelFamily:
    """One family of models sharing a template and an architecture.

    Attributes:
        name: Family name shown in the board.
        template: Prompt template name (the data room's template registry).
        models: Display name → hub id (or ``demo`` for the built-in demo).
        multimodal: Whether the family takes images, video or audio.
        model_types: ``config.json`` ``model_type`` values that identify the family unambiguously.
        projector_keys: Modules bridging encoders to the language model (composite models).
        vision_keys: Encoder towers (vision and audio) frozen by ``freeze_vision_tower``.
        language_keys: The language model inside a composite model.
        lora_conflict_keys: Modules that must never receive LoRA.
    """

    name: str
    template: str
    models: dict[str, str]
    multimodal: bool = False
    model_types: tuple[str, ...] = ()
    projector_keys: tuple[str, ...] = ()
    vision_keys: tuple[str, ...] = ()
    language_keys: tuple[str, ...] = ()
    lora_conflict_keys: tuple[str, ...] = field(default=())

    @property
    def hub_ids(self) -> list[str]:
        """Every known hub id of the family."""
        return list(self.models.values())

    @property
    def is_composite(self) -> bool:
        """True when the model has projectors joining encoders to a language model."""
        return bool(self.projector_keys)


def _qwen(sizes: list[str], prefix: str, org: str = "Qwen") -> dict[str, str]:
    return {f"{prefix}-{size}": f"{org}/{prefix}-{size}" for size in sizes}


_QWEN_VL_KEYS = {
    "projector_keys": ("visual.merger",),
    "vision_keys": ("visual.patch_embed", "visual.blocks"),
    "language_keys": ("language_model", "lm_head"),
}
_LLAVA_KEYS = {"projector_keys": ("multi_modal_projector",), "vision_keys": ("vision_tower",),
               "language_keys": ("language_model", "lm_head")}

_GLM4V_KEYS = {  # LLaMA-Factory lists only patch_embed and blocks; the rest of the tower is frozen with it here
    "projector_keys": ("visual.merger",),
    "vision_keys": ("visual.embeddings", "visual.patch_embed", "visual.post_conv_layernorm", "visual.blocks",
                    "visual.post_layernorm", "visual.downsample"),
    "language_keys": ("language_model", "lm_head"),
}

_OMNI_KEYS = {  # Qwen3-Omni; its deepstack mergers (merger_list) are projectors, as LLaMA-Factory's substring
    # match of `visual.merger` makes them there
    "projector_keys": ("visual.merger", "visual.merger_list", "audio_tower.proj"),
    "vision_keys": ("visual.pos_embed", "visual.patch_embed", "visual.blocks", "audio_tower"),
    "language_keys": ("language_model", "lm_head"),
}

_MINICPM_KEYS = {
    "projector_keys": ("resampler",),
    "vision_keys": ("vpm", "apm", "audio_avg_pooler", "audio_projection_layer", "tts"),
    "language_keys": ("llm",),
}

_QWEN3_VL_KEYS = {
    "projector_keys": ("visual.merger", "visual.deepstack_merger_list"),
    "vision_keys": ("visual.patch_embed", "visual.pos_embed", "visual.blocks"),
    "language_keys": ("language_model", "lm_head"),
}

FAMILIES: dict[str, ModelFamily] = {
    "LF-Demo": ModelFamily(
        name="LF-Demo",
        template="chatml",
        models={DEMO_MODEL_NAME: DEMO_MODEL_PATH},
    ),
    "LF-Demo-VLM": ModelFamily(
        name="LF-Demo-VLM",
        template="qwen2_vl",
        models={"LF-Demo-VLM": "demo-vlm"},
        multimodal=True,
        # A tiny Qwen2-VL (engine.demo_vlm); its config.json says qwen2_vl, so composite keys come from Qwen2-VL.
    ),
    "Qwen3": ModelFamily(
        name="Qwen3",
        template="qwen3",
        models={
            **_qwen(["0.6B", "1.7B", "4B", "8B", "14B", "32B", "30B-A3B"], "Qwen3"),
            **_qwen(["0.6B-Base", "1.7B-Base", "4B-Base", "8B-Base", "14B-Base"], "Qwen3"),
            "Qwen3-4B-Thinking-2507": "Qwen/Qwen3-4B-Thinking-2507",
        },
        model_types=("qwen3", "qwen3_moe"),
    ),
    "Qwen2.5": ModelFamily(
        name="Qwen2.5",
        template="qwen",
        models={
            **_qwen(["0.5B-Instruct", "1.5B-Instruct", "3B-Instruct", "7B-Instruct", "14B-Instruct",
                     "32B-Instruct", "72B-Instruct"], "Qwen2.5"),
            **_qwen(["0.5B", "1.5B", "3B", "7B"], "Qwen2.5"),
            **_qwen(["1.5B-Instruct", "7B-Instruct"], "Qwen2.5-Coder"),
            **_qwen(["1.5B-Instruct", "7B-Instruct"], "Qwen2.5-Math"),
        },
        model_types=("qwen2", "qwen2_moe"),
    ),
    "Llama 3": ModelFamily(
        name="Llama 3",
        template="llama3",
        models={
            "Llama-3-8B-Instruct": "meta-llama/Meta-Llama-3-8B-Instruct",
            "Llama-3-70B-Instruct": "meta-llama/Meta-Llama-3-70B-Instruct",
            "Llama-3.1-8B": "meta-llama/Llama-3.1-8B",
            "Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
            "Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B-Instruct",
            "Llama-3.2-1B": "meta-llama/Llama-3.2-1B",
            "Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B-Instruct",
            "Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B-Instruct",
        },
        # `llama` is shared with Llama 2 and countless fine-tunes, so a config alone does not identify it.
    ),
    "Gemma 3": ModelFamily(
        name="Gemma 3",
        template="gemma3",
        models={
            "Gemma-3-1B-Instruct": "google/gemma-3-1b-it",
            "Gemma-3-4B-Instruct": "google/gemma-3-4b-it",
            "Gemma-3-12B-Instruct": "google/gemma-3-12b-it",
            "Gemma-3-27B-Instruct": "google/gemma-3-27b-it",
        },
        multimodal=True,
        model_types=("gemma3", "gemma3_text"),
        projector_keys=("multi_modal_projector",),
        vision_keys=("vision_tower",),
        language_keys=("language_model", "lm_head"),
    ),
    "Gemma 4": ModelFamily(
        name="Gemma 4",
        template="gemma4",
        models={
            "Gemma-4-26B-A4B-Thinking": "google/gemma-4-26B-A4B-it",
            "Gemma-4-31B-Thinking": "google/gemma-4-31B-it",
        },
        multimodal=True,
        model_types=("gemma4", "gemma4_text"),
        projector_keys=("model.embed_vision", "model.embed_audio"),
        vision_keys=("vision_tower", "audio_tower"),
        language_keys=("language_model", "lm_head"),
        lora_conflict_keys=("per_layer_projection_norm",),
    ),
    "Gemma 4 E": ModelFamily(
        name="Gemma 4 E",
        template="gemma4n",
        models={
            "Gemma-4-E2B-Thinking": "google/gemma-4-E2B-it",
            "Gemma-4-E4B-Thinking": "google/gemma-4-E4B-it",
        },
        multimodal=True,
        # Same `gemma4` model type as above; a config with an audio encoder selects this family.
        projector_keys=("model.embed_vision", "model.embed_audio"),
        vision_keys=("vision_tower", "audio_tower"),
        language_keys=("language_model", "lm_head"),
        lora_conflict_keys=("per_layer_projection_norm",),
    ),
    "GLM-4": ModelFamily(
        name="GLM-4",
        template="glm4",
        models={
            "GLM-4-9B-Chat-0414": "zai-org/GLM-4-9B-0414",
            "GLM-4-32B-Chat-0414": "zai-org/GLM-4-32B-0414",
        },
        model_types=("glm4", "glm"),
    ),
    "GLM-4V": ModelFamily(
        name="GLM-4V",
        template="glm4v",
        models={"GLM-4.1V-9B-Thinking": "zai-org/GLM-4.1V-9B-Thinking"},
        multimodal=True,
        model_types=("glm4v",),
        **_GLM4V_KEYS,
    ),
    "GLM-4.5V": ModelFamily(
        name="GLM-4.5V",
        template="glm4_5v",
        models={"GLM-4.5V-Air-Thinking": "zai-org/GLM-4.5V", "GLM-4.6V": "zai-org/GLM-4.6V",
                "GLM-4.6V-Flash": "zai-org/GLM-4.6V-Flash"},
        multimodal=True,
        model_types=("glm4v_moe",),
        **_GLM4V_KEYS,
    ),
    "GLM-OCR": ModelFamily(
        name="GLM-OCR", template="glm_ocr", models={"GLM-OCR": "zai-org/GLM-OCR"}, multimodal=True,
        model_types=("glm_ocr",), **_GLM4V_KEYS,
    ),
    "Mistral": ModelFamily(
        name="Mistral",
        template="mistral",
        models={
            "Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-Instruct-v0.3",
        },
        model_types=("mistral",),
    ),
    "Phi-4": ModelFamily(
        name="Phi-4",
        template="phi4",
        models={"Phi-4-14B-Instruct": "microsoft/phi-4"},
        # `phi3` is the architecture of Phi-3 as well, whose template differs.
    ),
    "DeepSeek-V3": ModelFamily(
        name="DeepSeek-V3",
        template="deepseek3",
        models={
            "DeepSeek-V3-671B-Chat": "deepseek-ai/DeepSeek-V3",
            "DeepSeek-V3-671B-0324-Chat": "deepseek-ai/DeepSeek-V3-0324",
            "DeepSeek-V3.1": "deepseek-ai/DeepSeek-V3.1",
        },
        model_types=("deepseek_v3",),
    ),
    "Qwen2-VL": ModelFamily(
        name="Qwen2-VL",
        template="qwen2_vl",
        models={
            **_qwen(["2B-Instruct", "7B-Instruct", "72B-Instruct"], "Qwen2-VL"),
            **_qwen(["3B-Instruct", "7B-Instruct", "32B-Instruct", "72B-Instruct"], "Qwen2.5-VL"),
        },
        multimodal=True,
        model_types=("qwen2_vl", "qwen2_5_vl"),
        **_QWEN_VL_KEYS,
    ),
    "Qwen3-VL": ModelFamily(
        name="Qwen3-VL",
        template="qwen3_vl_nothink",  # LLaMA-Factory: the Instruct models never think
        models=_qwen(["2B-Instruct", "4B-Instruct", "8B-Instruct", "32B-Instruct", "30B-A3B-Instruct"], "Qwen3-VL"),
        multimodal=True,
        model_types=("qwen3_vl", "qwen3_vl_moe"),  # the same architecture: a local folder of either reads as this
        **_QWEN3_VL_KEYS,
    ),
    "Qwen3-VL-Thinking": ModelFamily(
        name="Qwen3-VL-Thinking",
        template="qwen3_vl",
        models=_qwen(["2B-Thinking", "4B-Thinking", "8B-Thinking", "32B-Thinking", "30B-A3B-Thinking"], "Qwen3-VL"),
        multimodal=True,
        **_QWEN3_VL_KEYS,  # no model types: a config alone says Qwen3-VL, whose Instruct template is the default
    ),
    "Qwen3.5": ModelFamily(
        name="Qwen3.5",
        template="qwen3_5",
        models=_qwen(["0.8B", "2B", "4B", "9B", "27B", "35B-A3B"], "Qwen3.5"),
        multimodal=True,
        model_types=("qwen3_5", "qwen3_5_moe"),
        projector_keys=("model.visual.merger",),
        vision_keys=("visual.pos_embed", "visual.patch_embed", "visual.blocks"),
        language_keys=("language_model", "lm_head"),
    ),
    "Qwen2.5-Omni": ModelFamily(
        name="Qwen2.5-Omni",
        template="qwen2_omni",
        models=_qwen(["3B", "7B"], "Qwen2.5-Omni"),
        multimodal=True,
        model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
        projector_keys=("visual.merger", "audio_tower.proj"),
        vision_keys=("visual.patch_embed", "visual.blocks", "audio_tower"),
        language_keys=("language_model", "lm_head"),
    ),
    "Qwen3-Omni": ModelFamily(
        name="Qwen3-Omni",
        template="qwen3_omni_nothink",
        models=_qwen(["30B-A3B-Instruct", "30B-A3B-Captioner"], "Qwen3-Omni"),
        multimodal=True,
        model_types=("qwen3_omni_moe", "qwen3_omni_moe_thinker"),
        **_OMNI_KEYS,
    ),
    "Qwen3-Omni-Thinking": ModelFamily(
        name="Qwen3-Omni-Thinking",
        template="qwen3_omni",
        models=_qwen(["30B-A3B-Thinking"], "Qwen3-Omni"),
        multimodal=True,
        **_OMNI_KEYS,
    ),
    "LLaVA": ModelFamily(
        name="LLaVA",
        template="llava",
        models={"LLaVA-1.5-7B-Chat": "llava-hf/llava-1.5-7b-hf", "LLaVA-1.5-13B-Chat": "llava-hf/llava-1.5-13b-hf"},
        multimodal=True,
        model_types=("llava",),
        **_LLAVA_KEYS,
    ),
    "Yi-VL": ModelFamily(
        name="Yi-VL", template="yi_vl", multimodal=True, **_LLAVA_KEYS,
        models={"Yi-VL-6B-Chat": "BUAADreamer/Yi-VL-6B-hf", "Yi-VL-34B-Chat": "BUAADreamer/Yi-VL-34B-hf"},
    ),
    "MiMo-VL": ModelFamily(
        name="MiMo-VL", template="mimo_vl", multimodal=True, **_QWEN_VL_KEYS,
        models={"MiMo-VL-7B-RL": "XiaomiMiMo/MiMo-VL-7B-RL", "MiMo-VL-7B-RL-2508": "XiaomiMiMo/MiMo-VL-7B-RL-2508"},
    ),
    # LLaVA-NeXT over other language models and Granite Vision: one model type (llava_next), told apart by name or,
    # for a local folder, by the language model in its config (_llava_family)
    **{name: ModelFamily(name=name, template=template, models=models, multimodal=True, **_LLAVA_KEYS)
       for name, template, models in (
           ("LLaVA-NeXT-Mistral", "llava_next_mistral",
            {"LLaVA-NeXT-Mistral-7B-Chat": "llava-hf/llava-v1.6-mistral-7b-hf"}),
           ("LLaVA-NeXT-Llama3", "llava_next_llama3", {"LLaVA-NeXT-Llama3-8B-Chat": "llava-hf/llama3-llava-next-8b-hf"}),
           ("LLaVA-NeXT-Yi", "llava_next_yi", {"LLaVA-NeXT-34B-Chat": "llava-hf/llava-v1.6-34b-hf"}),
           ("LLaVA-NeXT-Qwen", "llava_next_qwen", {"LLaVA-NeXT-72B-Chat": "llava-hf/llava-next-72b-hf",
                                                   "LLaVA-NeXT-110B-Chat": "llava-hf/llava-next-110b-hf"}),
           ("Granite Vision", "granite3_vision", {"Granite-Vision-3.2-2B": "ibm-granite/granite-vision-3.2-2b"}),
       )},
    "InternVL": ModelFamily(
        name="InternVL", template="intern_vl", multimodal=True, model_types=("internvl",), **_LLAVA_KEYS,
        models={
            **{f"InternVL2.5-{size}-MPO": f"OpenGVLab/InternVL2_5-{size}-MPO-hf" for size in ("2B", "8B")},
            **{f"InternVL3-{size}-hf": f"OpenGVLab/InternVL3-{size}-hf" for size in ("1B", "2B", "8B", "14B", "38B", "78B")},
            **{f"InternVL3.5-{size}-hf": f"OpenGVLab/InternVL3_5-{size}-HF"
               for size in ("1B", "2B", "4B", "8B", "14B", "30B-A3B", "38B")},
        },
    ),
    "PaliGemma": ModelFamily(
        name="PaliGemma", template="paligemma", multimodal=True, model_types=("paligemma",), **_LLAVA_KEYS,
        models={
            **{f"PaliGemma-3B-{kind}": f"google/paligemma-3b-{kind}"
               for kind in ("pt-224", "pt-448", "pt-896", "mix-224", "mix-448")},
            **{f"PaliGemma2-{size}-{kind}": f"google/paligemma2-{size.lower()}-{kind}"
               for size in ("3B", "10B", "28B") for kind in ("pt-224", "pt-448", "pt-896", "mix-224", "mix-448")},
        },
    ),
    "Qwen2-Audio": ModelFamily(
        name="Qwen2-Audio", template="qwen2_audio", multimodal=True, model_types=("qwen2_audio",),
        models={"Qwen2-Audio-7B": "Qwen/Qwen2-Audio-7B", "Qwen2-Audio-7B-Instruct": "Qwen/Qwen2-Audio-7B-Instruct"},
        projector_keys=("multi_modal_projector",), vision_keys=("audio_tower",), language_keys=("language_model", "lm_head"),
    ),
    "Llama 3.2 Vision": ModelFamily(
        name="Llama 3.2 Vision", template="mllama", multimodal=True, model_types=("mllama",),
        projector_keys=("multi_modal_projector",), vision_keys=("vision_model",),
        language_keys=("language_model", "lm_head"),
        models=hub_ids("meta-llama", ["Llama-3.2-11B-Vision", "Llama-3.2-11B-Vision-Instruct", "Llama-3.2-90B-Vision",
                                      "Llama-3.2-90B-Vision-Instruct"]),
    ),
    # Llama 4's template serves text rows here (no media plugin yet): its encoder and projector are still told
    # apart, so `lora_target: all` and the freeze keys leave them alone, as in LLaMA-Factory
    "Llama 4": ModelFamily(
        name="Llama 4", template="llama4", multimodal=True, model_types=("llama4",),
        projector_keys=("multi_modal_projector",),
        vision_keys=("vision_model",), language_keys=("language_model", "lm_head"),
        models=hub_ids("meta-llama", ["Llama-4-Scout-17B-16E", "Llama-4-Scout-17B-16E-Instruct",
                                      "Llama-4-Maverick-17B-128E", "Llama-4-Maverick-17B-128E-Instruct"]),
    ),
    # LLaVA-NeXT-Video and Video-LLaVA: images through their plugins; video through transformers' torchvision video
    # processors (refused without torchvision)
    "LLaVA-NeXT-Video": ModelFamily(
        name="LLaVA-NeXT-Video", template="llava_next_video", multimodal=True, model_types=("llava_next_video",),
        **_LLAVA_KEYS, models={"LLaVA-NeXT-Video-7B-Chat": "llava-hf/LLaVA-NeXT-Video-7B-hf",
                               "LLaVA-NeXT-Video-7B-DPO-Chat": "llava-hf/LLaVA-NeXT-Video-7B-DPO-hf"},
    ),
    "LLaVA-NeXT-Video-Mistral": ModelFamily(
        name="LLaVA-NeXT-Video-Mistral", template="llava_next_video_mistral", multimodal=True, **_LLAVA_KEYS,
        models={"LLaVA-NeXT-Video-7B-32k-Chat": "llava-hf/LLaVA-NeXT-Video-7B-32K-hf"},
    ),
    "LLaVA-NeXT-Video-Yi": ModelFamily(
        name="LLaVA-NeXT-Video-Yi", template="llava_next_video_yi", multimodal=True, **_LLAVA_KEYS,
        models={"LLaVA-NeXT-Video-34B-Chat": "llava-hf/LLaVA-NeXT-Video-34B-hf",
                "LLaVA-NeXT-Video-34B-DPO-Chat": "llava-hf/LLaVA-NeXT-Video-34B-DPO-hf"},
    ),
    "Video-LLaVA": ModelFamily(
        name="Video-LLaVA", template="video_llava", multimodal=True, model_types=("video_llava",),
        projector_keys=("multi_modal_projector",), vision_keys=("image_tower", "video_tower"),
        language_keys=("language_model", "lm_head"), models={"Video-LLaVA-7B-Chat": "LanguageBind/Video-LLaVA-7B-hf"},
    ),
    # LLaMA-Factory's vision families whose media no plugin serves here yet: text rows only (their templates are in
    # engine/templates/vision_text_only.py; a media row is refused); the towers are told apart, so `lora_target: all`
    # and the freeze keys leave them alone (LLaMA-Factory's composite keys where it has them; transformers' module
    # names for the rest)
    "LFM2-VL": ModelFamily(
        name="LFM2-VL", template="lfm2_vl", multimodal=True, model_types=("lfm2_vl",), **_LLAVA_KEYS,
        models={"LFM2.5-VL-1.6B": "LiquidAI/LFM2.5-VL-1.6B"},
    ),
    "MiniCPM-V-4.6": ModelFamily(
        name="MiniCPM-V-4.6", template="minicpm_v_4_6", multimodal=True, model_types=("minicpmv4_6",),
        projector_keys=("merger",), vision_keys=("vision_tower",), language_keys=("language_model", "lm_head"),
        models={"MiniCPM-V-4.6": "openbmb/MiniCPM-V-4_6"},
    ),
    "ERNIE-4.5-VL": ModelFamily(
        name="ERNIE-4.5-VL", template="ernie_vl", multimodal=True, model_types=("ernie4_5_vl_moe",),
        projector_keys=("resampler_model",), vision_keys=("vision_tower",), language_keys=("language_model", "lm_head"),
        models={"ERNIE-4.5-VL-28B-A3B-Instruct": "baidu/ERNIE-4.5-VL-28B-A3B-PT",
                "ERNIE-4.5-VL-28B-A3B-Thinking": "baidu/ERNIE-4.5-VL-28B-A3B-Thinking",
                "ERNIE-4.5-VL-424B-A47B-Instruct": "baidu/ERNIE-4.5-VL-424B-A47B-PT"},
    ),
    "Kimi-VL": ModelFamily(
        name="Kimi-VL", template="kimi_vl", multimodal=True, model_types=("kimi_vl",), **_LLAVA_KEYS,
        models=hub_ids("moonshotai", ["Kimi-VL-A3B-Instruct", "Kimi-VL-A3B-Thinking", "Kimi-VL-A3B-Thinking-2506"]),
    ),
    "Keye-VL": ModelFamily(
        name="Keye-VL", template="keye_vl", multimodal=True, model_types=("Keye",), projector_keys=("mlp_AR",),
        vision_keys=("visual.vision_model.patch_embedding", "visual.vision_model.encoder"),
        language_keys=("model", "lm_head"), models={"Keye-VL-8B-Chat": "Kwai-Keye/Keye-VL-8B-Preview"},
    ),
    "dots.ocr": ModelFamily(
        name="dots.ocr", template="dots_ocr", multimodal=True, model_types=("dots_ocr",),
        projector_keys=("vision_tower.merger",), vision_keys=("vision_tower",), language_keys=("model", "lm_head"),
        models={"dots.ocr": "rednote-hilab/dots.ocr"},
    ),
    "Intern-S1": ModelFamily(
        name="Intern-S1", template="intern_s1", multimodal=True, model_types=("interns1",), **_LLAVA_KEYS,
        models={"Intern-S1-mini": "internlm/Intern-S1-mini"},
    ),
    "Youtu-VL": ModelFamily(
        name="Youtu-VL", template="youtu_vl", multimodal=True, models={"Youtu-VL-4B-Instruct": "tencent/Youtu-VL-4B-Instruct"},
    ),
    # Mistral 3 (Pixtral vision tower), images through the pixtral plugin
    "Mistral Small 3.1": ModelFamily(
        name="Mistral Small 3.1", template="mistral_small", multimodal=True, model_types=("mistral3",), **_LLAVA_KEYS,
        models=hub_ids("mistralai", ["Mistral-Small-3.1-24B-Base-2503", "Mistral-Small-3.1-24B-Instruct-2503",
                                     "Mistral-Small-3.2-24B-Instruct-2506"]),
    ),
    "Pixtral": ModelFamily(  # a LLaVA model with a Pixtral vision tower: told apart by its vision config
        name="Pixtral", template="pixtral", multimodal=True, **_LLAVA_KEYS,
        models={"Pixtral-12B": "mistral-community/pixtral-12b"},
    ),
    "Ministral 3": ModelFamily(
        name="Ministral 3", template="ministral3", multimodal=True, **_LLAVA_KEYS,  # type mistral3 too: by name
        models=hub_ids("mistralai", [f"Ministral-3-{size}-{kind}-2512" for kind in ("Base", "Instruct")
                                     for size in ("3B", "8B", "14B")]),
    ),
    "MiniCPM-V": ModelFamily(
        name="MiniCPM-V",
        template="minicpm_v",
        models={"MiniCPM-V-2.6": "openbmb/MiniCPM-V-2_6", "MiniCPM-V-4": "openbmb/MiniCPM-V-4",
                "MiniCPM-V-4.5": "openbmb/MiniCPM-V-4_5"},
        multimodal=True,
        model_types=("minicpmv",),
        **_MINICPM_KEYS,
    ),
    "MiniCPM-o": ModelFamily(
        name="MiniCPM-o",
        template="minicpm_o",
        models={"MiniCPM-o-2.6": "openbmb/MiniCPM-o-2_6", "MiniCPM-o-4.5": "openbmb/MiniCPM-o-4_5"},
        multimodal=True,
        model_types=("minicpmo",),
        **_MINICPM_KEYS,
    ),
    "LLaVA-NeXT": ModelFamily(
        name="LLaVA-NeXT",
        template="llava_next",
        models={"LLaVA-NeXT-7B-Chat": "llava-hf/llava-v1.6-vicuna-7b-hf",
                "LLaVA-NeXT-13B-Chat": "llava-hf/llava-v1.6-vicuna-13b-hf"},
        multimodal=True,
        model_types=("llava_next",),
        **_LLAVA_KEYS,
    ),
    "Gemma 3n": ModelFamily(
        name="Gemma 3n",
        template="gemma3n",
        models={f"Gemma-3n-{size}{suffix}": f"google/gemma-3n-{size}{hub}" for size in ("E2B", "E4B")
                for suffix, hub in (("", ""), ("-Instruct", "-it"))},
        multimodal=True,
        model_types=("gemma3n",),
        projector_keys=("multi_modal_projector",),
        vision_keys=("vision_tower", "audio_tower"),
        language_keys=("language_model", "lm_head"),
        lora_conflict_keys=("timm_model", "subsample_conv_projection"),
    ),
    **{name: ModelFamily(name=name, template=template, models=models, model_types=model_types)
       for name, (template, models, model_types) in TEXT_FAMILIES.items()},
}

_BY_MODEL_TYPE: dict[str, ModelFamily] = {t: fam for fam in FAMILIES.values() for t in fam.model_types}


def list_models() -> dict[str, str]:
    """Every known model for the board's dropdown: display name → hub id (``demo`` for the demo)."""
    return {display: hub for family in FAMILIES.values() for display, hub in family.models.items()}


def read_local_config(path: str | Path) -> dict[str, Any] | None:
    """The ``config.json`` of a local model folder, or None when there is none."""
    config_file = Path(path).expanduser() / "config.json"
    if not config_file.is_file():
        return None
    try:
        data = json.loads(config_file.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        logger.warning("Cannot read %s: %s", config_file, err)
        return None
    return data if isinstance(data, dict) else None


def family_of_config(config: dict[str, Any] | Any) -> ModelFamily | None:
    """The family identified by a config (a ``config.json`` mapping or a transformers config)."""
    if config is None:
        return None
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    if get("lf_board_demo", False):
        return FAMILIES["LF-Demo"]
    model_type = get("model_type", None)
    if model_type == "gemma4" and get("audio_config", None):
        return FAMILIES["Gemma 4 E"]
    if model_type == "llava" and _sub_type(get("vision_config", None)) == "pixtral":
        return FAMILIES["Pixtral"]
    if model_type in ("llava", "llava_next"):
        return FAMILIES[_llava_family(model_type, get("text_config", None))]
    if model_type == "llava_next_video":  # Vicuna, Mistral or Yi, told apart as LLaVA-NeXT's are
        text = _llava_family("llava_next", get("text_config", None))
        return FAMILIES[{"LLaVA-NeXT-Mistral": "LLaVA-NeXT-Video-Mistral",
                         "LLaVA-NeXT-Yi": "LLaVA-NeXT-Video-Yi"}.get(text, "LLaVA-NeXT-Video")]
    return _BY_MODEL_TYPE.get(str(model_type)) if model_type else None


def _sub_type(sub_config: Any) -> str | None:
    """The model type of a sub-config (a mapping or a transformers config)."""
    return (sub_config.get("model_type") if isinstance(sub_config, dict)
            else getattr(sub_config, "model_type", None))


def _llava_family(model_type: str, text_config: Any) -> str:
    """The LLaVA / LLaVA-NeXT family of a config, told apart by its language model (one model type serves several
    templates): Mistral, Qwen2 and Granite by their type, Llama 3 and Yi by their vocabulary (128k and 64k tokens; the
    Vicuna models have 32k)."""
    text = text_config.to_dict() if hasattr(text_config, "to_dict") else dict(text_config or {})
    text_type, vocab = text.get("model_type"), int(text.get("vocab_size") or 0)
    yi = text_type == "llama" and 60_000 <= vocab < 70_000
    if model_type == "llava":
        return "Yi-VL" if yi else "LLaVA"
    by_type = {"mistral": "LLaVA-NeXT-Mistral", "qwen2": "LLaVA-NeXT-Qwen", "granite": "Granite Vision"}
    if text_type in by_type:
        return by_type[text_type]
    if text_type == "llama" and vocab >= 128_000:
        return "LLaVA-NeXT-Llama3"
    return "LLaVA-NeXT-Yi" if yi else "LLaVA-NeXT"


def family_of(name_or_path: str | None) -> ModelFamily | None:
    """The family of a display name, hub id, ``demo``, or local folder (by its ``config.json``)."""
    if not name_or_path:
        return None
    text = str(name_or_path).strip()
    lowered = text.lower().rstrip("/")
    for family in FAMILIES.values():
        for display, hub in family.models.items():
            if lowered in (display.lower(), hub.lower()):
                return family
    # A local copy of a hub model keeps the repo's folder name: ".../Qwen3-4B" or "models--Qwen--Qwen3-4B".
    tail = lowered.split("/")[-1].removeprefix("models--").split("--")[-1]
    for family in FAMILIES.values():
        for display, hub in family.models.items():
            if tail and tail in (display.lower(), hub.lower().split("/")[-1]):
                return family
    return family_of_config(read_local_config(text))


def model_media(name_or_path: str | None) -> tuple[str, ...]:
    """The media a known model takes (``image``, ``video``, ``audio``), from its family's template; () for text."""
    family = family_of(name_or_path)
    if family is None or not family.multimodal:
        return ()
    from engine.templates import TEMPLATES

    template = TEMPLATES.get(family.template)
    return tuple(template.modalities) if template is not None else ()


def default_template(name_or_path: str | None) -> str | None:
    """The template a model should use, or None when unknown (then the tokenizer's own template is used)."""
    family = family_of(name_or_path)
    return family.template if family else None


def composite_info(model: Any) -> ModelFamily | None:
    """The composite-model keys of a model (module, transformers config, or ``model_type`` string), or None."""
    if isinstance(model, str):
        model_type, family = model, _BY_MODEL_TYPE.get(model)
    else:
        config = getattr(model, "config", model)
        model_type = config.get("model_type") if isinstance(config, dict) else getattr(config, "model_type", None)
        family = family_of_config(config)
    if str(model_type).endswith("_text"):  # the text-only variant of a multimodal family (e.g. gemma3_text)
        return None
    return family if family is not None and family.is_composite else None
