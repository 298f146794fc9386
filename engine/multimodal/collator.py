"""Batching rows with media: text padded as usual, media inputs joined, token-type ids padded on the same side.

Per-row media inputs (``mm_inputs`` blobs, see :mod:`engine.multimodal.dataset`) are concatenated along their
first axis (images, frames or audio clips of the whole batch, in row order, as the models expect); arrays whose
other axes differ between rows (audio features of different lengths) are zero-padded to the longest first.
``mm_token_type_ids`` are padded with 0 on the tokenizer's padding side, so they stay aligned with ``input_ids``
(Gemma 3 gets them as ``token_type_ids``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.data.collator import PaddingCollator
from engine.multimodal.plugins import unpack_arrays


def join_numpy(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Each key's arrays of all ``rows`` concatenated along axis 0, in row order (zero-padded on other axes;
    scalars stacked)."""
    import numpy as np

    keys: list[str] = []
    for row in rows:
        keys += [key for key in row if key not in keys]
    out: dict[str, Any] = {}
    for key in keys:
        parts = [row[key] for row in rows if key in row]
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
    import torch

    return {key: torch.from_numpy(value) for key, value in join_numpy(rows).items()}


@dataclass
class MediaCollator(PaddingCollator):
    """:class:`engine.data.collator.PaddingCollator` plus media inputs and padded token-type ids."""

    type_ids_key: str | None = "mm_token_type_ids"

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        blobs = [feature.get("mm_inputs") for feature in features]
        type_ids = [feature.get("mm_token_type_ids") for feature in features]
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
        arrays = [unpack_arrays(blob) for blob in blobs]
        if any(arrays):
            batch.update(join_arrays([row for row in arrays if row]))
        return batch
