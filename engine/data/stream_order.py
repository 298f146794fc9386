"""The order in which LLaMA-Factory 0.9.5 streams rows (``streaming: true``), computed on row numbers.

LLaMA-Factory turns each local dataset into a ``datasets.IterableDataset`` of one shard, mixes them
(``concatenate_datasets`` or ``interleave_datasets``), shuffles the mix with a buffer (``buffer_size``, ``seed``),
takes the first ``val_size`` rows of that stream for evaluation and skips them for training. A new training epoch
(transformers' Trainer calls ``set_epoch`` when the stream runs out before ``max_steps``) reseeds the shuffle.

LLaMA-Factory 0.9.5 pins ``datasets<=4.0.0``; later ``datasets`` releases shuffle the buffer differently (half of it
at a time), so the order is written out here, as ``datasets`` 4.0.0 computes it, rather than taken from the
``datasets`` installed beside this engine. Each function yields ``(dataset, row)`` pairs: the position of the
dataset in ``dataset`` and the row number in its file. Memory: the shuffle buffer, nothing per row.

With ``dataloader_num_workers`` W above 1, LLaMA-Factory splits each dataset into W contiguous shards, and data
loader worker w streams the w-th shard of a shuffled shard order of each dataset, mixed and buffer-shuffled on its
own (:func:`stream_order` with ``shards``/``worker``); the loader takes batches from the workers in turn.
"""

from __future__ import annotations

from collections.abc import Iterator
from copy import deepcopy

import numpy as np

RANDOM_BATCH = 1000  # datasets draws its random indices 1000 at a time


def epoch_generator(seed: int, epoch: int = 0) -> np.random.Generator:
    """The generator of the shuffle in ``epoch`` (``IterableDataset._effective_generator``)."""
    generator = np.random.default_rng(seed)
    if epoch == 0:
        return generator
    effective = int(deepcopy(generator).integers(0, 1 << 63)) - epoch
    return np.random.default_rng((1 << 63) + effective if effective < 0 else effective)


def _random_batches(draw) -> Iterator[int]:
    while True:
        yield from (int(i) for i in draw())


def _source(dataset: int, rows: range) -> Iterator[tuple[int, int]]:
    return ((dataset, row) for row in rows)


def shard_rows(rows: int, shards: int, index: int) -> range:
    """The rows of shard ``index`` of ``shards`` contiguous shards (``datasets.Dataset.shard(contiguous=True)``)."""
    div, mod = divmod(rows, shards)
    start = div * index + min(index, mod)
    return range(start, start + div + (1 if index < mod else 0))


def split_number(count: int, shards: int, index: int) -> int:
    """The share of ``count`` rows (``take``/``skip``) of shard ``index`` (``SkipExamplesIterable.split_number``)."""
    div, mod = divmod(count, shards)
    return div + (1 if index < mod else 0)


def worker_rows(lengths: list[int], generator: np.random.Generator, shards: int = 1,
                worker: int = 0) -> list[range]:
    """The rows of each dataset that data loader ``worker`` streams: with one shard all of them, else the shard at
    position ``worker`` of the shard order shuffled by a copy of the generator (the same order for every dataset)."""
    if shards == 1:
        return [range(rows) for rows in lengths]
    order = list(range(shards))
    deepcopy(generator).shuffle(order)
    return [shard_rows(rows, shards, order[worker]) for rows in lengths]


def concatenated(rows: list[range], generator: np.random.Generator) -> Iterator[tuple[int, int]]:
    """``concatenate_datasets`` of shuffled streams: the datasets come one after another, in an order shuffled by
    a copy of the generator (not mixed: LLaMA-Factory warns so)."""
    order = list(range(len(rows)))
    if len(order) > 1:
        deepcopy(generator).shuffle(order)
    for dataset in order:
        yield from _source(dataset, rows[dataset])


def interleaved(rows: list[range], generator: np.random.Generator, probs: list[float] | None,
                stopping: str) -> Iterator[tuple[int, int]]:
    """``interleave_datasets`` of streams: without ``probs`` the datasets take turns, with them each row's dataset is
    drawn; ``first_exhausted`` stops once a dataset has given its last row, ``all_exhausted`` once each has (a
    dataset that ran out starts again)."""
    count = len(rows)
    if probs is None:
        picks: Iterator[int] = (k for _ in iter(int, 1) for k in range(count))
    else:
        rng = deepcopy(generator)
        picks = _random_batches(lambda: rng.choice(count, size=RANDOM_BATCH, p=probs))
    iterators = [_source(k, rows[k]) for k in range(count)]
    nexts: list = [None] * count
    exhausted = np.zeros(count, dtype=bool)
    done = np.all if stopping == "all_exhausted" else np.any
    for k in picks:
        if done(exhausted):
            return
        if nexts[k] is None:
            nexts[k] = next(iterators[k], False)
        result = nexts[k]
        nexts[k] = next(iterators[k], False)
        if nexts[k] is False:
            exhausted[k] = True
            nexts[k] = None
            iterators[k] = _source(k, rows[k])
        if result is not False:
            yield result


def buffer_shuffled(items: Iterator, buffer_size: int, generator: np.random.Generator) -> Iterator:
    """``IterableDataset.shuffle(buffer_size)``: once the buffer is full, each new row replaces a randomly picked one,
    which is yielded; the rows left at the end come in a shuffled order."""
    rng = deepcopy(generator)
    indices = _random_batches(lambda: rng.integers(0, buffer_size, size=RANDOM_BATCH))
    buffer: list = []
    for item in items:
        if len(buffer) == buffer_size:
            i = next(indices)
            yield buffer[i]
            buffer[i] = item
        else:
            buffer.append(item)
    rng.shuffle(buffer)
    yield from buffer


def stream_order(lengths: list[int], seed: int, buffer_size: int, strategy: str = "concat",
                 probs: list[float] | None = None, epoch: int = 0, shards: int = 1,
                 worker: int = 0) -> Iterator[tuple[int, int]]:
    """``(dataset, row)`` of every row of the shuffled mix, in LLaMA-Factory's streaming order for ``epoch`` (of
    data loader ``worker`` when each dataset is split into ``shards``).

    ``lengths``: the row count of each dataset, in the order of ``dataset``. ``strategy``: ``mix_strategy``.
    """
    generator = epoch_generator(seed, epoch)
    rows = worker_rows(lengths, generator, shards, worker)
    if len(lengths) == 1:
        mixed: Iterator[tuple[int, int]] = _source(0, rows[0])
    elif strategy == "concat":
        mixed = concatenated(rows, generator)
    else:
        if probs is not None and abs(sum(probs) - 1.0) > 1e-8:
            probs = [w / sum(probs) for w in probs]
        mixed = interleaved(rows, generator, probs,
                            "first_exhausted" if strategy == "interleave_under" else "all_exhausted")
    return buffer_shuffled(mixed, buffer_size, generator)

