"""A model family (:class:`ModelFamily`) and the module keys its composite (vision/audio-language) members share.

The families themselves are in :mod:`engine.models.registry` (text and the first vision families),
:mod:`engine.models.families_vision` (the other vision-language and audio families) and
:mod:`engine.models.families_text`.
"""

from __future__ import annotations

from dataclasses import dataclass, field


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


def qwen_ids(sizes: list[str], prefix: str, org: str = "Qwen") -> dict[str, str]:
    return {f"{prefix}-{size}": f"{org}/{prefix}-{size}" for size in sizes}


QWEN_VL_KEYS = {
    "projector_keys": ("visual.merger",),
    "vision_keys": ("visual.patch_embed", "visual.blocks"),
    "language_keys": ("language_model", "lm_head"),
}
LLAVA_KEYS = {"projector_keys": ("multi_modal_projector",), "vision_keys": ("vision_tower",),
               "language_keys": ("language_model", "lm_head")}

GLM4V_KEYS = {  # LLaMA-Factory lists only patch_embed and blocks; the rest of the tower is frozen with it here
    "projector_keys": ("visual.merger",),
    "vision_keys": ("visual.embeddings", "visual.patch_embed", "visual.post_conv_layernorm", "visual.blocks",
                    "visual.post_layernorm", "visual.downsample"),
    "language_keys": ("language_model", "lm_head"),
}

OMNI_KEYS = {  # Qwen3-Omni; its deepstack mergers (merger_list) are projectors, as LLaMA-Factory's substring
    # match of `visual.merger` makes them there
    "projector_keys": ("visual.merger", "visual.merger_list", "audio_tower.proj"),
    "vision_keys": ("visual.pos_embed", "visual.patch_embed", "visual.blocks", "audio_tower"),
    "language_keys": ("language_model", "lm_head"),
}

MINICPM_KEYS = {
    "projector_keys": ("resampler",),
    "vision_keys": ("vpm", "apm", "audio_avg_pooler", "audio_projection_layer", "tts"),
    "language_keys": ("llm",),
}

QWEN3_VL_KEYS = {
    "projector_keys": ("visual.merger", "visual.deepstack_merger_list"),
    "vision_keys": ("visual.patch_embed", "visual.pos_embed", "visual.blocks"),
    "language_keys": ("language_model", "lm_head"),
}
