"""Token-budget batches: as many rows per micro-batch as fit a budget of tokens (``max_tokens_per_batch``).

A fixed batch size pads every batch to its longest row, and a batch of long rows costs many times a batch of short
ones; a budget keeps each micro-batch's size at most ``max_tokens_per_batch``, so short rows travel many to a batch
and long ones few. The size counted is what the step computes on: with padded batches, rows x longest row; with
padding-free batches (rows back to back, no padding, ``padding_free``), the rows' own tokens, so more rows fit the
same budget. Batches are cut once, from the rows sorted by length (ties in a seeded random order), so their number,
which sets the number of optimizer steps, is the same every epoch; each epoch visits them in a new seeded order
(``set_epoch``), which a resumed run repeats exactly. A row longer than the budget forms a batch of its own. Under
several data-parallel processes accelerate hands the batches out in turn.

The loss stays a mean over trained tokens across the accumulated micro-batches (transformers counts them), so a
batch with more rows weighs by its tokens, not as one batch.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterator, Sequence
from typing import Any

logger = logging.getLogger(__name__)


def budget_batches(lengths: Sequence[int], budget: int, seed: int, padded: bool = True) -> list[list[int]]:
    """Row indices cut into batches whose size stays within ``budget`` (a longer row alone): ``rows x longest row``
    when ``padded``, else the sum of the rows' lengths (padding-free batches)."""
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)  # ties between equal lengths in a seeded order
    order.sort(key=lambda index: lengths[index])
    batches: list[list[int]] = []
    current: list[int] = []
    total = 0
    for index in order:
        length = lengths[index]  # ascending: the row being added is the longest so far
        size = length * (len(current) + 1) if padded else total + length
        if current and size > budget:
            batches.append(current)
            current, total = [], 0
        current.append(index)
        total += length
    if current:
        batches.append(current)
    return batches


class TokenBudgetBatchSampler:
    """A batch sampler over :func:`budget_batches`, in a seeded order per epoch (``shuffle``) or shortest first."""

    def __init__(self, lengths: Sequence[int], budget: int, seed: int = 42, shuffle: bool = True,
                 padded: bool = True):
        self.batches = budget_batches(lengths, budget, seed, padded)
        self.seed = seed
        self.shuffle = shuffle
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Iterator[list[int]]:
        order = list(range(len(self.batches)))
        if self.shuffle:
            random.Random(self.seed * 100_003 + self.epoch).shuffle(order)
        for position in order:
            yield list(self.batches[position])


def row_lengths(dataset: Any) -> list[int]:
    """Token count of every row of a tokenized set (its ``input_ids``), read from Arrow without decoding rows."""
    if hasattr(dataset, "with_format") and "input_ids" in getattr(dataset, "column_names", ()):
        import pyarrow.compute as pc

        return pc.list_value_length(dataset.with_format("arrow")["input_ids"]).to_pylist()
    return [len(row["input_ids"]) for row in dataset]


class TokenBudgetMixin:
    """Trainer mixin: with ``max_tokens_per_batch`` set, the training loader takes token-budget batches."""

    max_tokens_per_batch = 0
    budget_padded = True  # False where batches are padding-free: the budget counts the rows' own tokens

    def get_train_dataloader(self):
        if not self.max_tokens_per_batch or self.train_dataset is None or not hasattr(self.train_dataset, "__len__"):
            return super().get_train_dataloader()
        import datasets
        from torch.utils.data import DataLoader

        dataset, collator = self.train_dataset, self.data_collator
        if isinstance(dataset, datasets.Dataset):
            dataset = self._remove_unused_columns(dataset, description="Training")
        else:
            collator = self._get_collator_with_removed_columns(collator, description="Training")
        sampler = TokenBudgetBatchSampler(row_lengths(dataset), self.max_tokens_per_batch, seed=self.args.seed,
                                          padded=self.budget_padded)
        sizes = [len(batch) for batch in sampler.batches]
        logger.info("Token-budget batches (max_tokens_per_batch=%d %s tokens): %d batches of %d-%d rows (mean %.1f).",
                    self.max_tokens_per_batch, "padded" if self.budget_padded else "real", len(sizes), min(sizes),
                    max(sizes), sum(sizes) / len(sizes))
        loader = DataLoader(dataset, batch_sampler=sampler, collate_fn=collator,
                            num_workers=self.args.dataloader_num_workers, pin_memory=self.args.dataloader_pin_memory,
                            persistent_workers=self.args.dataloader_persistent_workers and
                            self.args.dataloader_num_workers > 0)
        return self.accelerator.prepare(loader)
