"""Context parallelism's data rules, as pure functions (the seed's rules, see ../shared/SEED_FACTS.md).

1. Labels are shifted on the full sequence *before* it is split, so the target of each rank's last token is the
   first token of the next rank's chunk (the causal boundary between ranks is kept).
2. The sequence is padded to a multiple of ``2 × cp_size`` (labels with -100, attention mask with 0, position ids
   continued), so that it splits into ``2 × cp_size`` equal chunks; rank ``r`` takes chunks ``r`` and
   ``2·cp − 1 − r`` (one early and one late chunk: causal attention work is balanced across ranks).
3. The loss is the sum of token losses over the whole CP group divided by the number of trained tokens in the
   group, not a mean of per-rank means.
"""

from __future__ import annotations

from typing import Any

import torch

IGNORE_INDEX = -100


def shift_labels(labels: torch.Tensor) -> torch.Tensor:
    """``labels[..., t]`` becomes the target at position t: ``labels[..., t + 1]``; the last position is ignored."""
    shifted = torch.full_like(labels, IGNORE_INDEX)
    shifted[..., :-1] = labels[..., 1:]
    return shifted


def pad_to_multiple(batch: dict[str, torch.Tensor], cp_size: int, pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """Pad the sequence dimension to a multiple of ``2 × cp_size``.

    ``input_ids`` get ``pad_token_id``, ``labels`` / ``shift_labels`` get -100, ``attention_mask`` 0, and
    ``position_ids`` continue counting from their last value.
    """
    multiple = 2 * cp_size
    length = batch["input_ids"].shape[-1]
    extra = (-length) % multiple
    if extra == 0:
        return dict(batch)
    out = {}
    for key, value in batch.items():
        if not torch.is_tensor(value) or value.shape[-1] != length:
            out[key] = value
            continue
        if key == "position_ids":
            steps = torch.arange(1, extra + 1, dtype=value.dtype, device=value.device)
            tail = value[..., -1:] + steps
        else:
            fill = {"labels": IGNORE_INDEX, "shift_labels": IGNORE_INDEX, "attention_mask": 0}.get(key, pad_token_id)
            tail = torch.full((*value.shape[:-1], extra), fill, dtype=value.dtype, device=value.device)
        out[key] = torch.cat([value, tail], dim=-1)
    return out


def shard_indices(length: int, cp_size: int, cp_rank: int) -> torch.Tensor:
    """The sequence positions rank ``cp_rank`` keeps (load-balanced: chunk r and chunk 2·cp − 1 − r)."""
    if length % (2 * cp_size):
        raise ValueError(f"sequence length {length} is not a multiple of 2 × cp_size ({2 * cp_size}); pad it first")
    chunk = length // (2 * cp_size)
    first = torch.arange(cp_rank * chunk, (cp_rank + 1) * chunk)
    second_start = (2 * cp_size - 1 - cp_rank) * chunk
    return torch.cat([first, torch.arange(second_start, second_start + chunk)])


def shard_batch(batch: dict[str, torch.Tensor], cp_size: int, cp_rank: int) -> dict[str, torch.Tensor]:
    """This rank's part of a padded, label-shifted batch (every tensor with the sequence length is split)."""
    length = batch["input_ids"].shape[-1]
    keep = shard_indices(length, cp_size, cp_rank)
    return {k: (v.index_select(-1, keep.to(v.device)) if torch.is_tensor(v) and v.shape[-1] == length else v)
            for k, v in batch.items()}


def prepare_batch(batch: dict[str, torch.Tensor], cp_size: int, cp_rank: int, pad_token_id: int = 0
                  ) -> dict[str, torch.Tensor]:
    """The three rules in order: shift labels on the full sequence, pad, then take this rank's shard."""
    batch = dict(batch)
    if "labels" in batch:
        batch["shift_labels"] = shift_labels(batch.pop("labels"))
    return shard_batch(pad_to_multiple(batch, cp_size, pad_token_id), cp_size, cp_rank)


def local_loss_sum(logits: torch.Tensor, shift_labels_: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(sum of token cross-entropies, trained-token count) on this rank's shard (labels already shifted)."""
    flat = shift_labels_.reshape(-1)
    loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), flat,
                                             ignore_index=IGNORE_INDEX, reduction="sum")
    return loss, (flat != IGNORE_INDEX).sum()


def group_normalized_loss(loss_sum: torch.Tensor, count: torch.Tensor, group: Any = None
                          ) -> tuple[torch.Tensor, torch.Tensor]:
    """(this rank's loss to backpropagate, the CP group's loss to report).

    Both divide by the trained-token count of the whole group (all-reduced). The first keeps only this rank's token
    losses, so the gradients of all ranks add up to exactly the full-sequence gradient (a wrapper that averages
    gradients over the CP ranks must scale by ``cp_size``); the second also sums the other ranks' losses and equals
    the loss of the unsplit sequence. Without a process group both are ``loss_sum / count``.
    """
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        loss = loss_sum / count.clamp(min=1)
        return loss, loss.detach()
    count = count.detach().clone().to(loss_sum.device)
    dist.all_reduce(count, group=group)
    total = loss_sum.detach().clone()
    dist.all_reduce(total, group=group)
    count = count.clamp(min=1)
    return loss_sum / count, total / count


class ContextParallelCollator:
    """Wraps a batch collator for ``cp_size > 1``: labels shifted on the full sequence (``shift_labels``), the
    sequence padded to a multiple of ``2 × cp_size``, position ids continued. The Trainer's context-parallel step
    (accelerate's ``maybe_context_parallel``) then splits these buffers across the CP ranks.

    The right-padding mask is dropped: with causal attention no real token attends to a later pad, and pads carry
    no label, so the result is exact (context parallelism accepts causal masks only).
    """

    def __init__(self, inner: Any, cp_size: int, pad_token_id: int = 0):
        self.inner = inner
        self.cp_size = cp_size
        self.pad_token_id = pad_token_id

    def __call__(self, features: Any) -> dict[str, torch.Tensor]:
        batch = dict(self.inner(features))
        if "labels" in batch and "shift_labels" not in batch:
            batch["shift_labels"] = shift_labels(batch["labels"])
        if "position_ids" not in batch:
            length = batch["input_ids"].shape[-1]
            batch["position_ids"] = torch.arange(length).expand(batch["input_ids"].shape[0], -1).clone()
        batch.pop("attention_mask", None)
        return pad_to_multiple(batch, self.cp_size, self.pad_token_id)


def wrap_collator(collator: Any, cfg: Any, tokenizer: Any) -> Any:
    """The collator to use: wrapped for context parallelism when ``cp_size > 1``."""
    cp_size = int(getattr(cfg.parallel, "cp_size", 1) or 1)
    if cp_size <= 1:
        return collator
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    return ContextParallelCollator(collator, cp_size, pad)
