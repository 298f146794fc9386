"""A padding-free batch through forward and backward a few whole rows at a time (``max_tokens_per_pass``).

What a training step keeps for its backward pass (each layer's inputs, q, k and v, the attention output, the MLP's
gate and up outputs) grows with the tokens of its batch, and the longest batch of a run sets its peak memory. Where
the batch's rows lie back to back (padding-free batches), the step can instead run forward and backward over
consecutive groups of whole rows of at most ``max_tokens_per_pass`` tokens each: the activations of one group are
freed before the next is computed, and the gradients of all groups add up in the parameters' ``.grad`` as the
optimizer step expects. The loss of a step is a sum of its tokens' terms over the step's count of trained tokens
(``num_items_in_batch``), which every group divides by, so the groups' losses add up to the batch's loss and their
gradients to its gradients: the same values up to the order of float additions, one optimizer step per batch as
before (``per_device_train_batch_size`` and the number of steps do not change). No row is cut: a row's first label
is never trained in a padding-free batch, so a group ending between two rows drops no target.

It applies only where that sum is exact: one process (data-parallel processes would synchronise gradients after
every group), no DeepSpeed, no label smoothing and no ASFT (transformers' label smoother and ASFT take a mean per
call), a count of trained tokens given, and batches holding nothing but the padding-free keys (no media).

Each pass has a fixed cost (every layer's forward and backward launched once more), so smaller passes trade speed for
memory. On the reference workload (README "Speed", batches of up to 1,825 tokens) the peak fell from 1.14-1.17 GiB to
1.06-1.08 at 1,024 tokens, 0.97 at 640 and 0.78 at 256, for 4-15 % more time (``examples/benchmark/SITTINGS.md``).
On the CPU it is on by default at 2,048 tokens: that bounds what a step keeps however long the rows and large the
batch, for one more pass per 2,048 tokens. On accelerators large batches are what keep the device busy, so it is off
there unless set.
"""

from __future__ import annotations

import logging
from typing import Any

import torch

LF_PAD_MULTIPLE = 8
"""LLaMA-Factory's sft collator pads a training batch to a multiple of 8 tokens (``pad_to_multiple_of``); its pt
collator (transformers' DataCollatorForLanguageModeling) to the longest row."""

logger = logging.getLogger(__name__)

CPU_DEFAULT = 2048
"""Tokens per pass on the CPU when ``max_tokens_per_pass`` is not set."""

PASS_KEYS = frozenset({"input_ids", "labels", "position_ids", "cu_seq_lens_q", "cu_seq_lens_k", "use_cache"})
"""What a padding-free text batch holds (``engine.data.collator``): anything else (media, masks) keeps one pass."""


def settle_budget(trainer: Any, setting: int | None, device_type: str, padding_free: bool) -> None:
    """Set the trainer's tokens per pass (:func:`resolve_budget`) and log what a run will do: the budget, or why a
    budget set by hand cannot apply (one pass then, as without it)."""
    budget = resolve_budget(setting, device_type, padding_free)
    reason = trainer.one_pass_reason() if budget else None if padding_free else (
        "its batches are padded, not rows back to back: media, padding_free: false, or the reason logged above")
    if setting and reason is not None:
        logger.warning("max_tokens_per_pass=%d does not apply to this run (%s): every batch runs in one pass. Set "
                       "max_tokens_per_pass: 0 to silence this, or see the README on where it applies.", setting, reason)
    trainer.max_tokens_per_pass = budget if reason is None else 0
    if trainer.max_tokens_per_pass:
        logger.info("Longer batches run forward and backward in groups of whole rows of at most %d tokens "
                    "(max_tokens_per_pass; 0: one pass): the same loss and gradients, less memory.",
                    trainer.max_tokens_per_pass)


def resolve_budget(setting: int | None, device_type: str, padding_free: bool) -> int:
    """Tokens per pass for a run: the setting, else :data:`CPU_DEFAULT` on the CPU and 0 (one pass) elsewhere;
    always 0 where batches are padded."""
    if not padding_free:
        return 0
    if setting is None:
        return CPU_DEFAULT if device_type == "cpu" else 0
    return int(setting)


def row_groups(offsets: list[int], budget: int) -> list[tuple[int, int]]:
    """Consecutive rows cut into groups of at most ``budget`` tokens, as ``(first row, end row)`` pairs; ``offsets``
    are the rows' start offsets and the batch's end (``cu_seq_lens_q``). A row longer than the budget goes alone."""
    groups: list[tuple[int, int]] = []
    first = 0
    for end in range(1, len(offsets)):
        if end - 1 > first and offsets[end] - offsets[first] > budget:
            groups.append((first, end - 1))
            first = end - 1
    if len(offsets) > 1:
        groups.append((first, len(offsets) - 1))
    return groups


def split_back_to_back(inputs: dict[str, Any], budget: int) -> list[dict[str, Any]] | None:
    """A padding-free batch as groups of whole rows within ``budget`` tokens; None where it stays one pass (not a
    padding-free batch, other keys, or it fits)."""
    ids, offsets = inputs.get("input_ids"), inputs.get("cu_seq_lens_q")
    if (budget <= 0 or not isinstance(inputs, dict) or not set(inputs) <= PASS_KEYS or ids is None or offsets is None
            or ids.dim() != 2 or ids.shape[0] != 1 or ids.shape[1] <= budget):
        return None
    bounds = [int(value) for value in offsets.tolist()]
    if bounds[0] != 0 or bounds[-1] != ids.shape[1]:
        return None
    groups = row_groups(bounds, budget)
    if len(groups) < 2:
        return None
    pieces = []
    for first, end in groups:
        start, stop = bounds[first], bounds[end]
        piece: dict[str, Any] = {}
        for key, value in inputs.items():
            if key in ("cu_seq_lens_q", "cu_seq_lens_k"):
                piece[key] = value[first:end + 1] - value[first]
            elif torch.is_tensor(value):
                piece[key] = value[:, start:stop]
            else:
                piece[key] = value
        pieces.append(piece)
    return pieces


class RowPassesMixin:
    """Trainer mixin (before ``transformers.Trainer``): with ``max_tokens_per_pass`` set, a padding-free batch
    longer than it runs as several forward and backward passes of whole rows (the trainer's ``passes_add_up``
    says where the sum is exact); the step's loss is the sum of theirs."""

    max_tokens_per_pass = 0
    flos_pad_multiple = LF_PAD_MULTIPLE  # 1 for pt (LLaMA-Factory's pt collator pads to the longest row)
    split_batches = 0  # batches that ran in several passes, and those passes
    split_passes = 0

    def one_pass_reason(self) -> str | None:
        """Why the passes' losses and gradients would not add up to the batch's (see the module docstring); None
        where they do."""
        if self.args.world_size != 1:
            return f"{self.args.world_size} processes synchronise their gradients after every pass"
        if self.is_deepspeed_enabled or self.is_fsdp_enabled:
            return "DeepSpeed and FSDP reduce gradients after every backward pass"
        if self.label_smoother is not None:
            return "label smoothing takes a mean per pass"
        return None

    def passes_add_up(self) -> bool:
        return self.one_pass_reason() is None

    def training_step(self, model, inputs, num_items_in_batch=None):
        pieces = None
        if self.max_tokens_per_pass and num_items_in_batch is not None and self.passes_add_up():
            pieces = split_back_to_back(inputs, self.max_tokens_per_pass)
        if pieces is None:
            return super().training_step(model, inputs, num_items_in_batch)
        self.split_batches += 1
        self.split_passes += len(pieces)
        total = None
        for piece in pieces:
            loss = super().training_step(model, piece, num_items_in_batch)
            total = loss if total is None else total + loss
        return total

    def floating_point_ops(self, inputs: dict[str, Any]) -> int:
        """transformers' estimate for ``total_flos`` (6 x tokens x parameters outside the embeddings), its tokens
        counted as in LLaMA-Factory's batch of the same rows: rows x the longest row, rounded up to a multiple of
        :attr:`flos_pad_multiple` (its sft collator's ``pad_to_multiple_of`` 8; its pt collator pads to the longest
        row), padding included. Counted on the batch as it is here, rows back to back gave a smaller ``total_flos``
        than LLaMA-Factory's for the same sft run (188.6M against its 247.3M on the golden one), and pt rows padded
        to a multiple of 8 a larger one."""
        starts, mask = inputs.get("cu_seq_lens_q"), inputs.get("attention_mask")
        if starts is not None:
            lengths = (starts[1:] - starts[:-1]).tolist()
        elif self.flos_pad_multiple == 1 and torch.is_tensor(mask) and mask.dim() == 2:
            lengths = mask.sum(dim=1).tolist()
        else:  # padded here as there
            return super().floating_point_ops(inputs)
        if "input_ids" not in inputs or not hasattr(self.model, "num_parameters"):
            return super().floating_point_ops(inputs)
        multiple = self.flos_pad_multiple
        width = -(-int(max(lengths, default=0)) // multiple) * multiple
        return 6 * len(lengths) * width * self.model.num_parameters(exclude_embeddings=True)

    def train(self, *args, **kwargs):
        result = super().train(*args, **kwargs)
        if self.split_batches:
            logger.info("%d batches ran forward and backward in %d passes of at most %d tokens (max_tokens_per_pass).",
                        self.split_batches, self.split_passes, self.max_tokens_per_pass)
        return result
