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


def build_collator(tokenizer: Any, cfg: Any = None, packed_attention: str = "position_ids") -> PaddingCollator:
    """The pt/sft collator for a run config (preference stages use their trainer's own collator)."""
    return PaddingCollator(tokenizer=tokenizer, pad_to_multiple_of=8, packed_attention=packed_attention)
