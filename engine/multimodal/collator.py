"""Batching rows with media: text padded as usual, media inputs joined, token-type ids padded on the same side.

Per-row media inputs (``mm_inputs`` blobs, see :mod:`engine.multimodal.dataset`) are concatenated along their
first axis (images, frames or audio clips of the whole batch, in row order, as the models expect); arrays whose
other axes differ between rows (audio features of different lengths) are zero-padded to the longest first.
``mm_token_type_ids`` are padded with 0 on the tokenizer's padding side, so they stay aligned with ``input_ids``
(Gemma 3 gets them as ``token_type_ids``), and a plugin's further token types are built from the padded ids
(ERNIE-4.5-VL's ``moe_mm_token_type_ids``: padding is text); a plugin's flags (Qwen-Omni's ``use_audio_in_video``) ride along with
each batch. Cross-attention models (Llama 3.2 Vision) take their images per row and a
cross-attention mask instead (:mod:`engine.multimodal.cross_attention`, :func:`batch_media`). On runs of more than
one process a batch without media gets LLaMA-Factory's stand-in media (:mod:`engine.multimodal.stand_in`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.data.collator import PaddingCollator
from engine.multimodal.cross_attention import (
    CrossAttention,
    cross_attention_mask,
    keep_first_tile,
    num_tiles,
    per_row_arrays,
)
from engine.multimodal.plugins import JOIN_LAST, unpack_arrays


def join_numpy(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each key's arrays of all ``rows`` concatenated along axis 0, in row order (zero-padded on other axes;
    scalars stacked); the keys a row lists under :data:`JOIN_LAST` along their last axis instead."""
    import numpy as np

    keys: list[str] = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    last = sorted({str(name) for row in rows for name in row.get(JOIN_LAST, ())})
    out: dict[str, Any] = {JOIN_LAST: np.array(last)} if last else {}
    for key in keys:
        parts = [row[key] for row in rows if key in row]
        if key == JOIN_LAST:
            continue
        if key in last:  # one sequence: MiniCPM-V 4.6's NaViT-packed pixel values (1, 3, patch, length)
            out[key] = np.concatenate(parts, axis=-1)
            continue
        frames = sorted({part.shape[1] for part in parts if part.ndim == 5})
        if key == "pixel_values_videos" and len(frames) > 1:  # (videos, frames, C, H, W): LLaVA-NeXT-Video, Video-LLaVA
            from engine.multimodal.errors import MediaError

            raise MediaError(f"The videos of one batch sample {', '.join(map(str, frames))} frames; this model reads "
                             "every frame of a padded video, so they must be equal. Set "
                             "`per_device_train_batch_size: 1` (and `per_device_eval_batch_size: 1`), or `video_maxlen` "
                             "low enough that every clip samples the same number of frames.")
        if any(part.ndim == 0 for part in parts):
            out[key] = np.stack(parts)
            continue
        shape = [max(part.shape[axis] for part in parts) for axis in range(1, parts[0].ndim)]
        padded = []
        for part in parts:
            gaps = [(0, 0)] + [(0, size - part.shape[axis + 1]) for axis, size in enumerate(shape)]
            padded.append(np.pad(part, gaps) if any(gap for _, gap in gaps) else part)
        out[key] = np.concatenate(padded, axis=0)
    return out


def join_arrays(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Tensors of all rows' media inputs, each key concatenated along axis 0 (:func:`join_numpy`)."""
    return to_tensors(join_numpy(rows))


def batch_media(arrays: list[dict[str, Any]], cross: CrossAttention | None = None, rows: list[list[int]] | None = None,
                length: int = 0, left: bool = False) -> dict[str, Any]:
    """The numpy media inputs of a batch from each row's ``arrays`` ({} for a row without media): joined along the
    first axis (:func:`join_numpy`); for a cross-attention model (``cross``) joined per row, with the
    cross-attention mask of the rows' unpadded ids ``rows`` padded to ``length`` on the left or right; {} without
    media."""
    if cross is None:
        kept = [row for row in arrays if row]
        return join_numpy(kept) if kept else {}
    full = per_row_arrays(arrays)
    if not full:
        return {}
    joined = keep_first_tile(join_numpy(full))
    joined["cross_attention_mask"] = cross_attention_mask(cross, rows or [], [num_tiles(row) for row in full], length,
                                                          left)
    return joined


def to_tensors(arrays: dict[str, Any]) -> dict[str, Any]:
    """The numpy arrays of :func:`batch_media` as tensors (the :data:`JOIN_LAST` list left out)."""
    import torch

    return {key: torch.from_numpy(value) for key, value in arrays.items() if key != JOIN_LAST}


def typed_ids(table: dict[int, int], input_ids: Any, text: int = 0) -> Any:
    """Token-type ids of a batch of ``input_ids`` (a tensor) from ``table`` (token id -> type; other tokens
    ``text``)."""
    import torch

    out = torch.full_like(input_ids, text)
    for token, kind in table.items():
        out[input_ids == token] = kind
    return out


def extra_typed(tables: dict[str, dict[int, int]] | None, input_ids: Any, prefix: str = "") -> dict[str, Any]:
    """A plugin's further token-type inputs (``extra_type_ids``) for a batch of ``input_ids``, keys prefixed."""
    return {prefix + name: typed_ids(table, input_ids) for name, table in (tables or {}).items()}


@dataclass
class MediaCollator(PaddingCollator):
    """:class:`engine.data.collator.PaddingCollator` plus media inputs and padded token-type ids (and a cross-attention
    model's mask, with ``cross``)."""

    type_ids_key: str | None = "mm_token_type_ids"
    cross: CrossAttention | None = None
    flags: dict[str, Any] | None = None  # keyword arguments every batch carries (Qwen-Omni's use_audio_in_video)
    stand_ins: list[Any] | None = None  # multi-process runs: media for batches without (engine.multimodal.stand_in)
    extra_types: dict[str, dict[int, int]] | None = None  # ERNIE-4.5-VL's moe_mm_token_type_ids, from the ids

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        arrays = [unpack_arrays(feature.get("mm_inputs")) for feature in features]
        type_ids = [feature.get("mm_token_type_ids") for feature in features]
        added = 0
        if self.stand_ins:
            from engine.multimodal.stand_in import add_stand_ins

            features, arrays, type_ids, added = add_stand_ins(features, arrays, type_ids, self.stand_ins)
        text = [{k: v for k, v in feature.items() if k not in ("mm_inputs", "mm_token_type_ids")}
                for feature in features]
        batch = super().__call__(text)
        length = batch["input_ids"].shape[1]
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        if self.type_ids_key and any(ids is not None for ids in type_ids):
            rows = []
            for ids, feature in zip(type_ids, features):
                ids = list(ids) if ids is not None else [0] * len(feature["input_ids"])
                filler = [0] * (length - len(ids))
                rows.append(filler + ids if left else ids + filler)
            batch[self.type_ids_key] = torch.tensor(rows, dtype=torch.long)
        batch.update(extra_typed(self.extra_types, batch["input_ids"]))
        row_ids = [list(feature["input_ids"]) for feature in features] if self.cross is not None else None
        batch.update(to_tensors(batch_media(arrays, self.cross, row_ids, length, left)))
        batch.update(self.flags or {})
        if self.stand_ins and "attention_mask" not in batch:  # packed: on every batch, so every rank counts alike
            from engine.train.stand_in_count import STAND_IN_TOKENS

            batch[STAND_IN_TOKENS] = torch.tensor(added)
        return batch
