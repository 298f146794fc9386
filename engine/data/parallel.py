"""Tokenize in several processes (``preprocessing_num_workers``), like the ``num_proc`` of a dataset map.

The examples are cut into contiguous shards, one per worker; forked workers inherit the tokenizer and template
(nothing large is pickled on the way in), and the shards' columns are joined in order with their stats summed,
so the result equals the single-process one. (Pre-training text and packing, which join rows, are tokenized in
LLaMA-Factory's preprocessing batches: ``engine.data.stream``.)
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from engine.data.tokenize import TokenizeOptions, tokenize_examples

logger = logging.getLogger(__name__)

_JOB: dict[str, Any] = {}


def _work(bounds: tuple[int, int]) -> tuple[dict[str, list], dict[str, int], int]:
    start, end = bounds
    job = _JOB
    columns, stats = tokenize_examples(job["examples"][start:end], job["stage"], job["tokenizer"], job["template"],
                                       job["opts"])
    return columns, stats, os.getpid()


def _plain_signals() -> None:
    """A worker forks with the job's SIGTERM/SIGINT handlers (graceful stop); it must die on them instead."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def worker_pool(processes: int) -> Iterator[Any]:
    """A forked pool whose workers die on SIGTERM/SIGINT and that ends gracefully (close + join) after its work;
    only on an error is it terminated."""
    pool = multiprocessing.get_context("fork").Pool(processes, initializer=_plain_signals)
    try:
        yield pool
        pool.close()  # idle workers exit on their own; terminating them could leave a queue lock held
    except BaseException:
        pool.terminate()
        raise
    finally:
        pool.join()


def shard_bounds(total: int, workers: int) -> list[tuple[int, int]]:
    """Contiguous ``(start, end)`` ranges splitting ``total`` items into at most ``workers`` near-equal shards."""
    workers = max(1, min(workers, total))
    size, extra = divmod(total, workers)
    bounds, start = [], 0
    for i in range(workers):
        end = start + size + (1 if i < extra else 0)
        bounds.append((start, end))
        start = end
    return bounds


def tokenize_parallel(examples: list[dict], stage: str, tokenizer: Any, template: Any, opts: TokenizeOptions,
                      workers: int | None) -> tuple[dict[str, list], dict[str, int], set[int]]:
    """(columns, stats, worker process ids) for ``examples``, tokenized by up to ``workers`` processes."""
    if not workers or workers <= 1 or len(examples) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        columns, stats = tokenize_examples(examples, stage, tokenizer, template, opts)
        return columns, stats, {os.getpid()}
    bounds = shard_bounds(len(examples), workers)
    _JOB.update(examples=examples, stage=stage, tokenizer=tokenizer, template=template, opts=opts)
    try:
        with worker_pool(len(bounds)) as pool:
            parts = pool.map(_work, bounds)
    finally:
        _JOB.clear()
    columns: dict[str, list] = {}
    stats: dict[str, int] = {}
    for part_columns, part_stats, _ in parts:
        for key, values in part_columns.items():
            columns.setdefault(key, []).extend(values)
        for key, value in part_stats.items():
            stats[key] = stats.get(key, 0) + value
    logger.info("Tokenized %d rows in %d processes.", len(examples), len(bounds))
    return columns, stats, {pid for _, _, pid in parts}
