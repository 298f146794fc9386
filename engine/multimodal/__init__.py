"""Multimodal fine-tuning: media readers, one plugin per model family, dataset mapping and batching.

- :mod:`engine.multimodal.media`: images (Pillow), video and audio (PyAV), frame sampling and timestamps.
- :mod:`engine.multimodal.plugins`: :data:`PLUGINS`, one plugin per family (the dispatch table).
- :mod:`engine.multimodal.plugin_ernie`: ERNIE-4.5-VL's image text and MoE routing token types.
- :mod:`engine.multimodal.processor`: the model's processor, assembled without torchvision when needed.
- :mod:`engine.multimodal.dataset`: rows with media -> tokenized columns plus processed media, once.
- :mod:`engine.multimodal.collator`: batches of them.
- :mod:`engine.multimodal.packing`: packed rows with their media (``packing`` / ``neat_packing``).
- :mod:`engine.multimodal.packed_model`: per-row positions and masks for packed batches in the models that need them.
- :mod:`engine.multimodal.checks`: every media problem of a config's datasets, before anything heavy loads.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class UnservedMedia:
    """The media context of a multimodal model no plugin serves yet: its text rows train and chat as text; a row with
    images, video or audio is refused with ``reason`` (:func:`refuse_unserved`) rather than trained without them."""

    reason: str


def refuse_unserved(media: Any) -> None:
    """Raise the refusal of an :class:`UnservedMedia` context (call where rows with media meet the context).

    Raises:
        MediaError: ``media`` is an :class:`UnservedMedia`.
    """
    if isinstance(media, UnservedMedia):
        from engine.multimodal.errors import MediaError

        raise MediaError(media.reason)


def media_context(cfg: Any, tokenizer: Any) -> Any:
    """The :class:`engine.multimodal.dataset.MediaContext` for a run's model, None for a text-only model, and an
    :class:`UnservedMedia` for a multimodal model no plugin serves (its text rows train; rows with media are refused).

    Raises:
        MediaError: a multimodal model folder without its processor files.
    """
    from engine.models.loader import resolve_model_path
    from engine.models.registry import read_local_config
    from engine.multimodal.dataset import MediaContext
    from engine.multimodal.errors import MediaError
    from engine.multimodal.plugins import PLUGINS, plugin_for
    from engine.multimodal.processor import MediaOptions, load_media_processor, media_config

    path = resolve_model_path(cfg.model.model_name_or_path, cfg.model.cache_dir, cfg.model.model_revision)
    config = media_config(read_local_config(path) or {})
    if not any(config.get(key) for key in ("vision_config", "audio_config")):
        return None
    plugin = plugin_for(config.get("model_type"), cfg.model.template)
    if plugin is None:
        return UnservedMedia(f"No media plugin serves model type `{config.get('model_type')}` yet (plugins: "
                             f"{', '.join(PLUGINS)}), so images, video and audio cannot be given to it here: use it "
                             "with text only (drop the rows' media columns), or use one of those families.")
    processor = load_media_processor(cfg.model, tokenizer)
    if processor is None:
        raise MediaError(f"`{cfg.model.model_name_or_path}` is a vision-language model but its folder has no "
                         "processor files (preprocessor_config.json); copy them from the base model.")
    return MediaContext(plugin=plugin, processor=processor, options=MediaOptions.from_data_args(cfg.data))


__all__ = ["UnservedMedia", "media_context", "refuse_unserved"]
