"""Media inputs of cross-attention models (Llama 3.2 Vision, ``mllama``): batched per row, with the text-to-image mask.

Such a model takes its images per row, not as one list: ``pixel_values`` (batch, images, tiles, 3, H, W),
``aspect_ratio_ids`` (batch, images) and ``aspect_ratio_mask`` (batch, images, tiles), and a ``cross_attention_mask``
(batch, length, images, tiles) saying which image tiles each token attends to. As LLaMA-Factory builds them for a
batch (``MllamaPlugin.get_mm_inputs``): a row's images are processed together (the plugin stores them with the row),
rows with fewer images (or none) are padded with zero images whose aspect-ratio mask keeps its first tile (as the
image processor pads them), and the mask comes from each row's own ids through transformers'
``get_cross_attention_token_mask`` and ``convert_sparse_cross_attention_mask_to_dense``, placed on the tokenizer's
padding side: with right padding it is LLaMA-Factory's (its rows run to the longest row, then zeros to the padded
length), with left padding each row's mask starts where its tokens start (LLaMA-Factory pads the mask on the right
whatever the side, which would shift it off the tokens; this equals transformers' functions on the padded ids).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PER_ROW_KEYS = ("pixel_values", "aspect_ratio_ids", "aspect_ratio_mask")


@dataclass(frozen=True)
class CrossAttention:
    """What the mask needs from the processor: the image token and the image processor's most tiles per image."""

    image_token_id: int
    max_tiles: int


def per_row_arrays(arrays: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every row's media arrays, a row without images given empty ones (no image, the other axes as the rest), so
    that the batch axis is the row axis; [] when no row has images."""
    import numpy as np

    template = next((row for row in arrays if row), None)
    if template is None:
        return []
    empty = {key: np.zeros((1, 0, *value.shape[2:]), dtype=value.dtype) for key, value in template.items()}
    return [row if row else empty for row in arrays]


def keep_first_tile(joined: dict[str, Any]) -> dict[str, Any]:
    """The joined arrays with the aspect-ratio mask's first tile set for the padding images too, as the image
    processor sets it for a batch (the zero-padding of the join leaves it 0)."""
    mask = joined.get("aspect_ratio_mask")
    if mask is not None and mask.ndim == 3:
        mask = mask.copy()
        mask[:, :, 0] = 1
        joined = {**joined, "aspect_ratio_mask": mask}
    return joined


def num_tiles(row: dict[str, Any]) -> list[int]:
    """The tile count of each image of one row (its aspect-ratio mask, before any padding)."""
    mask = row.get("aspect_ratio_mask")
    return [] if mask is None else [int(count) for count in mask[0].sum(-1)]


def cross_attention_mask(spec: CrossAttention, rows: list[list[int]], tiles: list[list[int]], length: int,
                         left: bool) -> Any:
    """(batch, ``length``, images, tiles) int64 mask of rows ``rows`` (unpadded ids) whose images have ``tiles`` tiles,
    padded to ``length`` on the left or right (see the module docstring)."""
    import numpy as np
    from transformers.models.mllama.processing_mllama import (
        convert_sparse_cross_attention_mask_to_dense,
        get_cross_attention_token_mask,
    )

    images = max([len(row_tiles) for row_tiles in tiles] + [1])
    out = np.zeros((len(rows), length, images, spec.max_tiles), dtype=np.int64)
    longest = max(len(ids) for ids in rows)
    for index, (ids, row_tiles) in enumerate(zip(rows, tiles)):
        sparse = get_cross_attention_token_mask(list(ids), spec.image_token_id)
        if not sparse:
            continue
        span = len(ids) if left else longest  # right: the row's last image reaches the longest row's end, as there
        dense = convert_sparse_cross_attention_mask_to_dense([sparse], [row_tiles], spec.max_tiles, span)[0]
        start = length - span if left else 0
        out[index, start:start + span, :dense.shape[1]] = dense
    return out
