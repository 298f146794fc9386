"""The vision-language and audio-language families after the first few (Qwen-VL onwards), in the board's order.

Each carries its composite keys (:mod:`engine.models.family`) so ``lora_target: all`` and the freeze keys tell its
encoders and projectors from its language model. :data:`engine.models.registry.FAMILIES` puts them after the
families of its own module.
"""

from __future__ import annotations

from engine.models.families_text import hub_ids
from engine.models.family import (
    LLAVA_KEYS,
    MINICPM_KEYS,
    OMNI_KEYS,
    QWEN3_VL_KEYS,
    QWEN_VL_KEYS,
    ModelFamily,
    qwen_ids,
)

VISION_FAMILIES: dict[str, ModelFamily] = {
    "Qwen2-VL": ModelFamily(
        name="Qwen2-VL",
        template="qwen2_vl",
        models={
            **qwen_ids(["2B-Instruct", "7B-Instruct", "72B-Instruct"], "Qwen2-VL"),
            **qwen_ids(["3B-Instruct", "7B-Instruct", "32B-Instruct", "72B-Instruct"], "Qwen2.5-VL"),
        },
        multimodal=True,
        model_types=("qwen2_vl", "qwen2_5_vl"),
        **QWEN_VL_KEYS,
    ),
    "Qwen3-VL": ModelFamily(
        name="Qwen3-VL",
        template="qwen3_vl_nothink",  # LLaMA-Factory: the Instruct models never think
        models=qwen_ids(["2B-Instruct", "4B-Instruct", "8B-Instruct", "32B-Instruct", "30B-A3B-Instruct"], "Qwen3-VL"),
        multimodal=True,
        model_types=("qwen3_vl", "qwen3_vl_moe"),  # the same architecture: a local folder of either reads as this
        **QWEN3_VL_KEYS,
    ),
    "Qwen3-VL-Thinking": ModelFamily(
        name="Qwen3-VL-Thinking",
        template="qwen3_vl",
        models=qwen_ids(["2B-Thinking", "4B-Thinking", "8B-Thinking", "32B-Thinking", "30B-A3B-Thinking"], "Qwen3-VL"),
        multimodal=True,
        **QWEN3_VL_KEYS,  # no model types: a config alone says Qwen3-VL, whose Instruct template is the default
    ),
    "Qwen3.5": ModelFamily(
        name="Qwen3.5",
        template="qwen3_5",
        models=qwen_ids(["0.8B", "2B", "4B", "9B", "27B", "35B-A3B"], "Qwen3.5"),
        multimodal=True,
        model_types=("qwen3_5", "qwen3_5_moe"),
        projector_keys=("model.visual.merger",),
        vision_keys=("visual.pos_embed", "visual.patch_embed", "visual.blocks"),
        language_keys=("language_model", "lm_head"),
    ),
    "Qwen2.5-Omni": ModelFamily(
        name="Qwen2.5-Omni",
        template="qwen2_omni",
        models=qwen_ids(["3B", "7B"], "Qwen2.5-Omni"),
        multimodal=True,
        model_types=("qwen2_5_omni", "qwen2_5_omni_thinker"),
        projector_keys=("visual.merger", "audio_tower.proj"),
        vision_keys=("visual.patch_embed", "visual.blocks", "audio_tower"),
        language_keys=("language_model", "lm_head"),
    ),
    "Qwen3-Omni": ModelFamily(
        name="Qwen3-Omni",
        template="qwen3_omni_nothink",
        models=qwen_ids(["30B-A3B-Instruct", "30B-A3B-Captioner"], "Qwen3-Omni"),
        multimodal=True,
        model_types=("qwen3_omni_moe", "qwen3_omni_moe_thinker"),
        **OMNI_KEYS,
    ),
    "Qwen3-Omni-Thinking": ModelFamily(
        name="Qwen3-Omni-Thinking",
        template="qwen3_omni",
        models=qwen_ids(["30B-A3B-Thinking"], "Qwen3-Omni"),
        multimodal=True,
        **OMNI_KEYS,
    ),
    "LLaVA": ModelFamily(
        name="LLaVA",
        template="llava",
        models={"LLaVA-1.5-7B-Chat": "llava-hf/llava-1.5-7b-hf", "LLaVA-1.5-13B-Chat": "llava-hf/llava-1.5-13b-hf"},
        multimodal=True,
        model_types=("llava",),
        **LLAVA_KEYS,
    ),
    "Yi-VL": ModelFamily(
        name="Yi-VL", template="yi_vl", multimodal=True, **LLAVA_KEYS,
        models={"Yi-VL-6B-Chat": "BUAADreamer/Yi-VL-6B-hf", "Yi-VL-34B-Chat": "BUAADreamer/Yi-VL-34B-hf"},
    ),
    "MiMo-VL": ModelFamily(
        name="MiMo-VL", template="mimo_vl", multimodal=True, **QWEN_VL_KEYS,
        models={"MiMo-VL-7B-RL": "XiaomiMiMo/MiMo-VL-7B-RL", "MiMo-VL-7B-RL-2508": "XiaomiMiMo/MiMo-VL-7B-RL-2508"},
    ),
    # LLaVA-NeXT over other language models and Granite Vision: one model type (llava_next), told apart by name or,
    # for a local folder, by the language model in its config (_llava_family)
    **{name: ModelFamily(name=name, template=template, models=models, multimodal=True, **LLAVA_KEYS)
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
        name="InternVL", template="intern_vl", multimodal=True, model_types=("internvl",), **LLAVA_KEYS,
        models={
            **{f"InternVL2.5-{size}-MPO": f"OpenGVLab/InternVL2_5-{size}-MPO-hf" for size in ("2B", "8B")},
            **{f"InternVL3-{size}-hf": f"OpenGVLab/InternVL3-{size}-hf" for size in ("1B", "2B", "8B", "14B", "38B", "78B")},
            **{f"InternVL3.5-{size}-hf": f"OpenGVLab/InternVL3_5-{size}-HF"
               for size in ("1B", "2B", "4B", "8B", "14B", "30B-A3B", "38B")},
        },
    ),
    "PaliGemma": ModelFamily(
        name="PaliGemma", template="paligemma", multimodal=True, model_types=("paligemma",), **LLAVA_KEYS,
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
        **LLAVA_KEYS, models={"LLaVA-NeXT-Video-7B-Chat": "llava-hf/LLaVA-NeXT-Video-7B-hf",
                               "LLaVA-NeXT-Video-7B-DPO-Chat": "llava-hf/LLaVA-NeXT-Video-7B-DPO-hf"},
    ),
    "LLaVA-NeXT-Video-Mistral": ModelFamily(
        name="LLaVA-NeXT-Video-Mistral", template="llava_next_video_mistral", multimodal=True, **LLAVA_KEYS,
        models={"LLaVA-NeXT-Video-7B-32k-Chat": "llava-hf/LLaVA-NeXT-Video-7B-32K-hf"},
    ),
    "LLaVA-NeXT-Video-Yi": ModelFamily(
        name="LLaVA-NeXT-Video-Yi", template="llava_next_video_yi", multimodal=True, **LLAVA_KEYS,
        models={"LLaVA-NeXT-Video-34B-Chat": "llava-hf/LLaVA-NeXT-Video-34B-hf",
                "LLaVA-NeXT-Video-34B-DPO-Chat": "llava-hf/LLaVA-NeXT-Video-34B-DPO-hf"},
    ),
    "Video-LLaVA": ModelFamily(
        name="Video-LLaVA", template="video_llava", multimodal=True, model_types=("video_llava",),
        projector_keys=("multi_modal_projector",), vision_keys=("image_tower", "video_tower"),
        language_keys=("language_model", "lm_head"), models={"Video-LLaVA-7B-Chat": "LanguageBind/Video-LLaVA-7B-hf"},
    ),
    # ERNIE-4.5-VL images (the ernie_vl plugin; the vision tower and resampler kept out of `lora_target: all`)
    "ERNIE-4.5-VL": ModelFamily(
        name="ERNIE-4.5-VL", template="ernie_vl", multimodal=True, model_types=("ernie4_5_vl_moe",),
        projector_keys=("resampler_model",), vision_keys=("vision_tower",), language_keys=("language_model", "lm_head"),
        models={"ERNIE-4.5-VL-28B-A3B-Instruct": "baidu/ERNIE-4.5-VL-28B-A3B-PT",
                "ERNIE-4.5-VL-28B-A3B-Thinking": "baidu/ERNIE-4.5-VL-28B-A3B-Thinking",
                "ERNIE-4.5-VL-424B-A47B-Instruct": "baidu/ERNIE-4.5-VL-424B-A47B-PT"},
    ),
    # LLaMA-Factory's vision families whose media no plugin serves here yet: text rows only (their templates are in
    # engine/templates/vision_text_only.py; a media row is refused); the towers are told apart, so `lora_target: all`
    # and the freeze keys leave them alone (LLaMA-Factory's composite keys where it has them; transformers' module
    # names for the rest)
    "LFM2-VL": ModelFamily(
        name="LFM2-VL", template="lfm2_vl", multimodal=True, model_types=("lfm2_vl",), **LLAVA_KEYS,
        models={"LFM2.5-VL-1.6B": "LiquidAI/LFM2.5-VL-1.6B"},
    ),
    "Kimi-VL": ModelFamily(
        name="Kimi-VL", template="kimi_vl", multimodal=True, model_types=("kimi_vl",), **LLAVA_KEYS,
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
        name="Intern-S1", template="intern_s1", multimodal=True, model_types=("interns1",), **LLAVA_KEYS,
        models={"Intern-S1-mini": "internlm/Intern-S1-mini"},
    ),
    "Youtu-VL": ModelFamily(
        name="Youtu-VL", template="youtu_vl", multimodal=True, models={"Youtu-VL-4B-Instruct": "tencent/Youtu-VL-4B-Instruct"},
    ),
    # Mistral 3 (Pixtral vision tower), images through the pixtral plugin
    "Mistral Small 3.1": ModelFamily(
        name="Mistral Small 3.1", template="mistral_small", multimodal=True, model_types=("mistral3",), **LLAVA_KEYS,
        models=hub_ids("mistralai", ["Mistral-Small-3.1-24B-Base-2503", "Mistral-Small-3.1-24B-Instruct-2503",
                                     "Mistral-Small-3.2-24B-Instruct-2506"]),
    ),
    "Pixtral": ModelFamily(  # a LLaVA model with a Pixtral vision tower: told apart by its vision config
        name="Pixtral", template="pixtral", multimodal=True, **LLAVA_KEYS,
        models={"Pixtral-12B": "mistral-community/pixtral-12b"},
    ),
    "Ministral 3": ModelFamily(
        name="Ministral 3", template="ministral3", multimodal=True, **LLAVA_KEYS,  # type mistral3 too: by name
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
        **MINICPM_KEYS,
    ),
    "MiniCPM-o": ModelFamily(
        name="MiniCPM-o",
        template="minicpm_o",
        models={"MiniCPM-o-2.6": "openbmb/MiniCPM-o-2_6", "MiniCPM-o-4.5": "openbmb/MiniCPM-o-4_5"},
        multimodal=True,
        model_types=("minicpmo",),
        **MINICPM_KEYS,
    ),
    # MiniCPM-V 4.6 (transformers' minicpmv4_6), images through its plugin; LLaMA-Factory's composite keys
    # (model.vision_tower, model.merger), so `lora_target: all` and the freeze keys leave the tower and merger alone
    "MiniCPM-V-4.6": ModelFamily(
        name="MiniCPM-V-4.6", template="minicpm_v_4_6", multimodal=True, model_types=("minicpmv4_6",),
        projector_keys=("model.merger",), vision_keys=("model.vision_tower",),
        language_keys=("model.language_model", "lm_head"), models={"MiniCPM-V-4.6": "openbmb/MiniCPM-V-4_6"},
    ),
    "LLaVA-NeXT": ModelFamily(
        name="LLaVA-NeXT",
        template="llava_next",
        models={"LLaVA-NeXT-7B-Chat": "llava-hf/llava-v1.6-vicuna-7b-hf",
                "LLaVA-NeXT-13B-Chat": "llava-hf/llava-v1.6-vicuna-13b-hf"},
        multimodal=True,
        model_types=("llava_next",),
        **LLAVA_KEYS,
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
}
"""Family name -> family, in the order the board lists them."""
