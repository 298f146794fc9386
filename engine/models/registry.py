"""Known model families: the board's model dropdown, default templates and composite-model keys.

One explicit dict, :data:`FAMILIES`, maps a family name to its :class:`ModelFamily`. A family lists its
models (display name → hub id), the prompt template they use, the ``model_type`` values of their
``config.json`` and, for composite (vision/audio-language) models, the module keys the loader needs:
projectors, encoder towers, the language model, and modules that must never get LoRA. The dataclass and the shared
keys are in :mod:`engine.models.family`; most vision-language families in :mod:`engine.models.families_vision`, the
later text families in :mod:`engine.models.families_text`; this module joins them in the board's order and looks
families up.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from engine.demo_names import DEMO_MODEL_NAME, DEMO_MODEL_PATH  # noqa: F401 - imported from here too
from engine.models.families_text import TEXT_FAMILIES
from engine.models.families_vision import VISION_FAMILIES
from engine.models.family import GLM4V_KEYS, ModelFamily, qwen_ids

logger = logging.getLogger(__name__)



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
            **qwen_ids(["0.6B", "1.7B", "4B", "8B", "14B", "32B", "30B-A3B"], "Qwen3"),
            **qwen_ids(["0.6B-Base", "1.7B-Base", "4B-Base", "8B-Base", "14B-Base"], "Qwen3"),
            "Qwen3-4B-Thinking-2507": "Qwen/Qwen3-4B-Thinking-2507",
        },
        model_types=("qwen3", "qwen3_moe"),
    ),
    "Qwen2.5": ModelFamily(
        name="Qwen2.5",
        template="qwen",
        models={
            **qwen_ids(["0.5B-Instruct", "1.5B-Instruct", "3B-Instruct", "7B-Instruct", "14B-Instruct",
                     "32B-Instruct", "72B-Instruct"], "Qwen2.5"),
            **qwen_ids(["0.5B", "1.5B", "3B", "7B"], "Qwen2.5"),
            **qwen_ids(["1.5B-Instruct", "7B-Instruct"], "Qwen2.5-Coder"),
            **qwen_ids(["1.5B-Instruct", "7B-Instruct"], "Qwen2.5-Math"),
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
        **GLM4V_KEYS,
    ),
    "GLM-4.5V": ModelFamily(
        name="GLM-4.5V",
        template="glm4_5v",
        models={"GLM-4.5V-Air-Thinking": "zai-org/GLM-4.5V", "GLM-4.6V": "zai-org/GLM-4.6V",
                "GLM-4.6V-Flash": "zai-org/GLM-4.6V-Flash"},
        multimodal=True,
        model_types=("glm4v_moe",),
        **GLM4V_KEYS,
    ),
    "GLM-OCR": ModelFamily(
        name="GLM-OCR", template="glm_ocr", models={"GLM-OCR": "zai-org/GLM-OCR"}, multimodal=True,
        model_types=("glm_ocr",), **GLM4V_KEYS,
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
    **VISION_FAMILIES,
    **{name: ModelFamily(name=name, template=template, models=models, model_types=model_types)
       for name, (template, models, model_types) in TEXT_FAMILIES.items()},
}

_BY_MODEL_TYPE: dict[str, ModelFamily] = {t: fam for fam in FAMILIES.values() for t in fam.model_types}


def list_models() -> dict[str, str]:
    """Every known model for the board's dropdown: display name → hub id (``demo`` for the demo)."""
    return {display: hub for family in FAMILIES.values() for display, hub in family.models.items()}


MAX_CONFIG_BYTES = 16 << 20
"""The largest model config.json read (real ones hold a few KB; a classifier's label table makes one a few MB). A
model folder from elsewhere can hold a sparse config.json of gigabytes that takes no disk: read whole, 1 GB held the
board 17 s and 2.1 GB of memory per reading (the model picker reads it twice on each change), and a larger one would
have had it killed."""


class ConfigTooLarge(ValueError):
    """A config.json past :data:`MAX_CONFIG_BYTES`; the message names the file, its size and the fix."""


def read_config_text(config_file: str | Path, max_bytes: int | None = None) -> str:
    """The text of a model's ``config.json`` (or another small JSON file of a model or adapter folder), read only
    when it is a regular file of at most ``max_bytes`` (default :data:`MAX_CONFIG_BYTES`).

    Raises:
        OSError: missing, unreadable, or no regular file.
        ConfigTooLarge: past the size (a ValueError).
        UnicodeDecodeError: not UTF-8 (a ValueError).
    """
    from engine.runs import read_regular

    limit = MAX_CONFIG_BYTES if max_bytes is None else max_bytes
    data = read_regular(config_file, max_bytes=limit + 1)
    if len(data) > limit:
        size = Path(config_file).stat().st_size
        raise ConfigTooLarge(f"{config_file} is {size:,} bytes, more than any model's {Path(config_file).name} "
                             f"(at most {limit:,} are read); copy it again from the original model.")
    return data.decode("utf-8")


def read_local_config(path: str | Path) -> dict[str, Any] | None:
    """The ``config.json`` of a local model folder, or None when there is none."""
    config_file = Path(path).expanduser() / "config.json"
    if not config_file.is_file():
        return None
    try:
        data = json.loads(read_config_text(config_file))
    except (OSError, ValueError, RecursionError) as err:  # unreadable, not JSON or not UTF-8, nested too deep
        logger.warning("Cannot read %s: %s", config_file, "nested too deeply" if isinstance(err, RecursionError) else err)
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
