"""Batch collation for pt/sft rows: padding, and per-example attention for packed rows.

Rows are padded to the longest row of the batch rounded up to a multiple of 8, on the tokenizer's padding side:
``input_ids`` with the pad id, ``labels`` with -100, ``attention_mask`` with 0.

Packed rows (they carry ``position_ids`` restarting at 0 for each example) must not attend across examples. Two
ways are offered:

- ``packed_attention="position_ids"`` (default): the batch carries ``position_ids``, ``use_cache=False`` and no
  ``attention_mask``. transformers (5.x) then derives a block-diagonal causal mask from the position ids for its
  sdpa, eager and flex attention paths (it only does so when no cache is built, hence ``use_cache=False``), and
  FlashAttention-2/3 run varlen kernels from them. Padding gets its own position run, so it forms a separate
  block that real tokens never see.
- ``packed_attention="4d"``: a boolean ``(batch, 1, length, length)`` mask, causal within each example, is passed
  as ``attention_mask``; the sdpa path uses it as is. (Eager attention adds masks to the scores, so it needs the
  first way.)

Padding-free batches (``padding_free=True``, rows not packed): the batch's rows are laid back to back as one row
of their real tokens, ``position_ids`` restarting at 0 for each, the first label of every row set to -100 (so no row
learns to predict the next row's first token; the shifted loss never reads a row's first label anyway) and
``cu_seq_lens_q``/``cu_seq_lens_k`` holding the rows' start offsets. The model must run
:mod:`engine.models.row_attention`, which attends within each row; loss and gradients equal the padded batch's,
with no work spent on padding.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IGNORE = -100


@dataclass
class PaddingCollator:
    """Pads pt/sft rows; handles packed rows (with ``position_ids``) as described in the module docstring."""

    tokenizer: Any
    pad_to_multiple_of: int | None = 8
    packed_attention: str = "position_ids"
    padding_free: bool = False

    def __post_init__(self) -> None:
        if self.packed_attention not in ("position_ids", "4d"):
            raise ValueError("packed_attention must be 'position_ids' or '4d'.")

    @property
    def pad_id(self) -> int:
        """The pad token id (EOS, then 0, when the tokenizer has none)."""
        for token_id in (self.tokenizer.pad_token_id, self.tokenizer.eos_token_id):
            if token_id is not None:
                return token_id
        return 0

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        if self.padding_free and "position_ids" not in features[0]:
            return self._back_to_back(features)
        length = max(len(feature["input_ids"]) for feature in features)
        if self.pad_to_multiple_of:
            length = -(-length // self.pad_to_multiple_of) * self.pad_to_multiple_of
        left = getattr(self.tokenizer, "padding_side", "right") == "left"
        packed = "position_ids" in features[0]
        columns: dict[str, list[list[int]]] = {"input_ids": [], "labels": [], "attention_mask": []}
        if packed:
            columns["position_ids"] = []

        def pad(values: list[int], filler: list[int]) -> list[int]:
            return filler + values if left else values + filler

        for feature in features:
            ids = list(feature["input_ids"])
            gap = length - len(ids)
            labels = list(feature["labels"]) if "labels" in feature else list(ids)
            mask = list(feature.get("attention_mask") or [1] * len(ids))
            columns["input_ids"].append(pad(ids, [self.pad_id] * gap))
            columns["labels"].append(pad(labels, [IGNORE] * gap))
            columns["attention_mask"].append(pad(mask, [0] * gap))
            if packed:
                columns["position_ids"].append(pad(list(feature["position_ids"]), list(range(gap))))
        batch = {key: torch.tensor(value, dtype=torch.long) for key, value in columns.items()}
        if packed:
            valid = batch.pop("attention_mask").bool()
            if self.packed_attention == "4d":
                batch["attention_mask"] = block_causal_mask(batch["position_ids"], valid)
            else:
                batch["use_cache"] = False
        return batch

    @staticmethod
    def _back_to_back(features: list[dict[str, Any]]) -> dict[str, Any]:
        import torch

        ids: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        offsets = [0]
        for feature in features:
            row = list(feature["input_ids"])
            row_labels = list(feature["labels"]) if "labels" in feature else list(row)
            if row:
                row_labels[0] = IGNORE
            ids += row
            labels += row_labels
            positions += range(len(row))
            offsets.append(offsets[-1] + len(row))
        starts = torch.tensor(offsets, dtype=torch.int32)
        return {"input_ids": torch.tensor([ids], dtype=torch.long), "labels": torch.tensor([labels], dtype=torch.long),
                "position_ids": torch.tensor([positions], dtype=torch.long), "cu_seq_lens_q": starts,
                "cu_seq_lens_k": starts, "use_cache": False}


def block_causal_mask(position_ids: Any, valid: Any) -> Any:
    """A boolean ``(batch, 1, length, length)`` mask: token i sees token j when j <= i, both are real tokens, and
    they belong to the same packed example (a new example starts wherever the position id does not grow by 1)."""
    import torch

    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    segment = torch.cumsum(starts.long(), dim=1)
    same = segment[:, :, None] == segment[:, None, :]
    length = position_ids.shape[1]
    causal = torch.tril(torch.ones(length, length, dtype=torch.bool, device=position_ids.device))
    mask = same & causal[None] & valid[:, None, :] & valid[:, :, None]
    # A padding row must still see something, or sdpa returns NaN for it; let padding see itself.
    eye = torch.eye(length, dtype=torch.bool, device=position_ids.device)[None]
    mask = mask | (eye & ~valid[:, :, None])
    return mask[:, None]


def build_collator(tokenizer: Any, cfg: Any = None, packed_attention: str = "position_ids",
                   padding_free: bool = False) -> PaddingCollator:
    """The pt/sft collator for a run config (preference stages use their trainer's own collator)."""
    return PaddingCollator(tokenizer=tokenizer, pad_to_multiple_of=8, packed_attention=packed_attention,
                           padding_free=padding_free)
