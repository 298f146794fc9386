"""The batches of LLaMA-Factory's preprocessing map, where the rows it joins (pre-training blocks, KTO's
mismatched pairs) meet.

LLaMA-Factory tokenizes with ``datasets``' ``map(batched=True, batch_size=preprocessing_batch_size,
num_proc=preprocessing_num_workers)``: the rows are cut into ``num_proc`` contiguous shards (shard i holds rows/n
rows, the first rows % n shards one more; ``datasets`` caps ``num_proc`` at the row count), and each shard is
processed ``preprocessing_batch_size`` rows at a time (1000 by default). Whatever joins rows (a pre-training block
spanning documents, a KTO row paired with its neighbour's completion) joins them only within one such batch.
"""

from __future__ import annotations

LF_PREPROCESSING_BATCH = 1000
"""LLaMA-Factory's ``preprocessing_batch_size`` default."""


def lf_batches(rows: int, batch_size: int | None = None, workers: int | None = None) -> list[tuple[int, int]]:
    """``(start, end)`` of every batch of LLaMA-Factory's preprocessing map over ``rows`` rows, in order."""
    size = max(1, batch_size or LF_PREPROCESSING_BATCH)
    shards = min(workers, rows) if workers and workers > 1 and rows else 1
    per_shard, extra = divmod(rows, shards)
    batches: list[tuple[int, int]] = []
    start = 0
    for shard in range(shards):
        end = start + per_shard + (1 if shard < extra else 0)
        batches += [(first, min(first + size, end)) for first in range(start, end, size)]
        start = end
    return batches


def lf_example_batches(count: int, batch_size: int | None = None, workers: int | None = None,
                       layout: dict | None = None) -> list[tuple[int, int]]:
    """:func:`lf_batches` as ranges of ``count`` examples. ``layout``: the rows as LLaMA-Factory holds them, unusable
    ones included (``rows``; ``kept``: each example's position among them, increasing), since it drops those only
    inside its batches; a batch left with no example is left out."""
    if layout is None or layout["rows"] == count:
        return lf_batches(count, batch_size, workers)
    import numpy as np

    kept = np.asarray(layout["kept"], dtype=np.int64)
    ranges = ((int(np.searchsorted(kept, start)), int(np.searchsorted(kept, end)))
              for start, end in lf_batches(layout["rows"], batch_size, workers))
    return [(start, end) for start, end in ranges if end > start]
