"""MiniCPM-V 4.6 (transformers' ``minicpmv4_6``), as LLaMA-Factory 0.9.5's ``MiniCPMV4_6Plugin`` feeds it.

- A row's images go to the image processor as they are: LLaMA-Factory hands it the files unscaled, so
  ``image_max_pixels`` / ``image_min_pixels`` do not apply; the processor's ``scale_resolution`` and
  ``max_slice_nums`` size each image and cut it into slices.
- Each ``<image>`` becomes ``<image_id>i</image_id>`` (when the processor's ``default_use_image_id``; ``i`` counts the
  row's images from 0), ``<image>`` + the base view's tokens + ``</image>``, then the slices: one
  ``<slice>`` + tokens + ``</slice>`` per column, rows joined by a newline. A view's token count is its target size in
  patches (h × w) divided by 16, or by 4 in the ``"4x"`` downsample mode; every slice counts the first slice's
  tokens, as LLaMA-Factory does. The marker strings and the image token are the processor's.
- The downsample mode is the ``DOWNSAMPLE_MODE`` environment variable, else the image processor's
  ``downsample_mode``; LLaMA-Factory passes it to every forward (``downsample_mode``), and so do we.
- ``pixel_values`` are NaViT-packed, ``(1, 3, patch, length)``; the model reads only ``pixel_values[:1]``, so a batch
  joins its rows' along the last axis (:data:`engine.multimodal.plugins.JOIN_LAST`) and their ``target_sizes`` along
  the first.

Video is refused: LLaMA-Factory 0.9.5's plugin fails on every video row (its placeholder builder reads the image
``target_sizes``, which video inputs do not have), so there are no reference tokens to match, and transformers'
MiniCPM-V 4.6 video processor needs torchvision. A row with both images and video is refused as LLaMA-Factory
refuses it.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from engine.multimodal import media
from engine.multimodal.errors import MediaError
from engine.multimodal.processor import MediaOptions

logger = logging.getLogger(__name__)

DOWNSAMPLE_MODES = ("16x", "4x")
VIDEO_REFUSED = ("video is refused for MiniCPM-V 4.6: LLaMA-Factory 0.9.5's plugin fails on every video row (it "
                 "builds the placeholder from image target sizes that video inputs lack), so there are no reference "
                 "tokens to match, and transformers' MiniCPM-V 4.6 video processor needs torchvision")
"""Why video is refused (said in the pre-flight check and by the data layer)."""
_warned: set[str] = set()


def downsample_mode(processor: Any) -> str:
    """The downsample mode LLaMA-Factory uses: ``DOWNSAMPLE_MODE`` from the environment, else the image processor's.

    Raises:
        MediaError: for a value other than ``16x`` or ``4x`` (LLaMA-Factory would silently take it as ``16x``).
    """
    mode = os.environ.get("DOWNSAMPLE_MODE") or None  # set but empty: unset
    where = "the DOWNSAMPLE_MODE environment variable"
    if mode is None:
        mode = getattr(getattr(processor, "image_processor", None), "downsample_mode", None) or "16x"
        where = "the image processor's `downsample_mode` (preprocessor/processor config)"
    if mode not in DOWNSAMPLE_MODES:
        raise MediaError(f"{where} is {mode!r}; MiniCPM-V 4.6 takes '16x' (16 patches per token) or '4x' (4 per "
                         "token): set one of those, or unset DOWNSAMPLE_MODE to use the processor's.")
    return mode


def check_rows(images: list[Any], videos: list[Any]) -> None:
    """Refuse a row with video, or with images and video together (LLaMA-Factory's own refusal).

    Raises:
        MediaError: naming the reason and the fix.
    """
    if images and videos:
        raise MediaError("MiniCPM-V 4.6 does not take images and videos in the same row (LLaMA-Factory refuses them "
                         "too); split the row into an image row and a video row.")
    if videos:
        raise MediaError(f"{VIDEO_REFUSED[0].upper()}{VIDEO_REFUSED[1:]}; drop the rows with video.")


def process_images(processor: Any, images: list[Any], opts: MediaOptions) -> dict[str, Any]:
    """The image processor's outputs for a row's images, given at their own size (as LLaMA-Factory gives them)."""
    defaults = MediaOptions()
    if ((opts.image_max_pixels, opts.image_min_pixels) != (defaults.image_max_pixels, defaults.image_min_pixels)
            and "pixels" not in _warned):
        _warned.add("pixels")
        logger.warning("image_max_pixels / image_min_pixels do not apply to MiniCPM-V 4.6: as in LLaMA-Factory, the "
                       "images go to its processor at their own size, and the processor's scale_resolution and "
                       "max_slice_nums size them.")
    loaded = [media.load_image_as_is(image) for image in images]
    return dict(processor.image_processor(loaded, return_tensors="pt"))


def image_text(processor: Any, features: dict[str, Any], index: int) -> str:
    """LLaMA-Factory's ``_build_v4_6_placeholder`` for image ``index`` of a row (``features``: the row's processed
    images).

    Raises:
        MediaError: a ``16x`` DOWNSAMPLE_MODE over images the processor sized for ``4x`` (the model could not merge
            them).
    """
    divisor = 4 if downsample_mode(processor) == "4x" else 16
    counts = features["num_patches_per_image"]
    start = sum(counts[:index])
    sizes = features["target_sizes"][start:start + counts[index]]
    if divisor == 16 and bool((sizes % 4 != 0).any()):
        raise MediaError(f"DOWNSAMPLE_MODE is 16x but the image processor sized this image for '4x' (its target sizes "
                         f"{sizes.tolist()} in patches are not multiples of 4, so the model cannot merge them): unset "
                         "DOWNSAMPLE_MODE or set it to the processor's `downsample_mode`.")
    tokens = [int(n) for n in sizes.prod(-1) // divisor]
    rows, cols = (int(v) for v in features["grids"][index])
    image_token = (getattr(processor, "image_token", None)
                   or getattr(getattr(processor, "tokenizer", None), "image_token", None) or "<image>")
    text = _marker(processor, "image_start") + image_token * tokens[0] + _marker(processor, "image_end")
    if getattr(processor, "default_use_image_id", True):
        text = f"{_marker(processor, 'image_id_start')}{index}{_marker(processor, 'image_id_end')}" + text
    if getattr(processor, "slice_mode", True) and rows > 0 and cols > 0:
        per_slice = tokens[1] if len(tokens) > 1 else 0
        one = _marker(processor, "slice_start") + image_token * per_slice + _marker(processor, "slice_end")
        text += "\n".join(one * cols for _ in range(rows))
    return text


MARKERS = {"image_start": "<image>", "image_end": "</image>", "slice_start": "<slice>", "slice_end": "</slice>",
           "image_id_start": "<image_id>", "image_id_end": "</image_id>"}
"""The marker strings LLaMA-Factory falls back to when the processor lacks ``<name>_token``."""


def _marker(processor: Any, name: str) -> str:
    return getattr(processor, f"{name}_token", None) or MARKERS[name]
