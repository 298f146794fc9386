"""Tokenize in chunks straight into an Arrow file, so the tokenized set is never held as Python lists.

A tokenized row held as Python lists of ints costs about 8-9 times its Arrow size (an int object per token and a
pointer to it); on 100,000 rows that is the bulk of the process's memory. Here rows are tokenized ``chunk_rows``
at a time (in ``preprocessing_num_workers`` forked processes, one persistent pool, chunks handed out in order), each
chunk is appended to an Arrow file as soon as it is done, and the result is a ``datasets.Dataset`` memory-mapped
from that file. The rows and the stats equal the all-at-once tokenization (``engine.data.parallel``).

Pre-training blocks and packed sequences join rows within each batch of LLaMA-Factory's preprocessing map, so their
chunks are exactly those batches (``engine.data.lf_batches``).
"""

from __future__ import annotations

import atexit
import logging
import multiprocessing
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.data import parallel
from engine.data.arrow_columns import to_arrow_columns
from engine.data.lf_batches import lf_example_batches
from engine.data.tokenize import TokenizeOptions, tokenize_examples

logger = logging.getLogger(__name__)

CHUNK_ROWS = 2000
_SCRATCH: list[Path] = []
SCRATCH_PREFIX = "lf-engine-tokenized-"


def _scratch_dir() -> Path:
    """A folder for this process's Arrow files, removed when the process ends (or by the next process, when this
    one was killed: :func:`engine.data.cache_prune.claim_scratch`)."""
    if not _SCRATCH:
        from engine.data.cache_prune import claim_scratch

        folder = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))
        _SCRATCH.append(folder)
        atexit.register(shutil.rmtree, folder, True)
        claim_scratch(folder, SCRATCH_PREFIX)
    return _SCRATCH[0]


def _chunks(total: int, size: int) -> list[tuple[int, int]]:
    return [(start, min(start + size, total)) for start in range(0, total, size)]


def _add_stats(total: dict[str, int], part: dict[str, int]) -> None:
    for key, value in part.items():
        total[key] = total.get(key, 0) + value


def tokenize_to_arrow(examples: Sequence[dict], stage: str, tokenizer: Any, template: Any, opts: TokenizeOptions,
                      workers: int | None = None, chunk_rows: int | None = CHUNK_ROWS,
                      layout: dict | None = None) -> tuple[Any, dict[str, int]]:
    """(memory-mapped ``datasets.Dataset``, stats) of ``examples`` tokenized for ``stage``.

    ``chunk_rows`` is ``preprocessing_batch_size`` (None: unset); pre-training text and packed rows are tokenized in
    LLaMA-Factory's preprocessing batches (its default 1000 rows when unset), since it joins rows only within one;
    ``layout`` (see :func:`engine.data.lf_batches.lf_example_batches`) places those batches where rows were skipped."""
    from datasets import Dataset
    from datasets.arrow_writer import ArrowWriter

    # pre-training blocks and packing join rows only within LLaMA-Factory's preprocessing batches
    lf_grouped = stage == "pt" or (opts.packing and stage == "sft")
    size = chunk_rows or CHUNK_ROWS
    if not lf_grouped and len(examples) <= size:  # one chunk: nothing to stream
        columns, stats, _ = parallel.tokenize_parallel(examples, stage, tokenizer, template, opts, workers)
        return Dataset.from_dict(to_arrow_columns(columns)), stats  # the column types of a streamed set
    use_pool = bool(workers and workers > 1 and len(examples) > 1
                    and "fork" in multiprocessing.get_all_start_methods())
    if lf_grouped:
        bounds = lf_example_batches(len(examples), chunk_rows, workers, layout)
    else:
        bounds = _chunks(len(examples), size)
        if use_pool and len(bounds) < workers:  # at least one chunk per worker
            bounds = parallel.shard_bounds(len(examples), workers)
    use_pool = use_pool and len(bounds) > 1
    path = Path(tempfile.mkstemp(suffix=".arrow", dir=_scratch_dir())[1])
    stats: dict[str, int] = {}
    writer = ArrowWriter(path=str(path))
    try:
        if use_pool:
            parallel._JOB.update(examples=examples, stage=stage, tokenizer=tokenizer, template=template, opts=opts)
            try:
                with parallel.worker_pool(min(workers, len(bounds))) as pool:
                    for columns, part, _ in pool.imap(_arrow_work, bounds):
                        _write(writer, columns)
                        _add_stats(stats, part)
            finally:
                parallel._JOB.clear()
            logger.info("Tokenized %d rows in %d processes.", len(examples), min(workers, len(bounds)))
        else:
            for start, end in bounds:
                columns, part = tokenize_examples(examples[start:end], stage, tokenizer, template, opts)
                _write(writer, to_arrow_columns(columns))
                _add_stats(stats, part)
        if not stats.get("kept"):  # nothing written: the caller reports that all rows were dropped
            return Dataset.from_dict({}), stats
        writer.finalize()
    finally:
        writer.close()
    return Dataset.from_file(str(path)), stats


def _arrow_work(bounds: tuple[int, int]) -> tuple[dict[str, Any], dict[str, int], int]:
    """A pool worker's chunk, its columns already Arrow arrays (converted in the worker, and sent back as buffers
    instead of pickled lists)."""
    columns, stats, pid = parallel._work(bounds)
    return to_arrow_columns(columns), stats, pid


def _write(writer: Any, columns: dict[str, Any]) -> None:
    if columns and len(next(iter(columns.values()))):
        writer.write_batch(columns)


def save_splits(splits: dict[str, Any], folder: Path) -> None:
    """``DatasetDict(splits).save_to_disk(folder)``, except that a split backed by one whole Arrow file (a streamed
    tokenization) is copied file to file: ``save_to_disk`` reads every row through the memory map, and those pages
    then count in the process's peak RSS, growing with the row count.

    datasets writes the split's metadata itself (a save of its first row); only the data file is replaced by the
    copy, which holds the same schema and rows in the same Arrow stream format.
    """
    from datasets import DatasetDict

    _drop_links(folder, list(splits))
    copies = {name: ds for name, ds in splits.items() if _one_whole_file(ds)}
    DatasetDict({name: ds.select(range(1)) if name in copies else ds for name, ds in splits.items()}).save_to_disk(
        str(folder))
    for name, ds in copies.items():
        written = _written_files(folder / name / "state.json")
        if len(written) != 1:  # datasets changed its layout (or its state is unreadable): write the split its own way
            shutil.rmtree(folder / name)
            ds.save_to_disk(str(folder / name))
            continue
        shutil.copyfile(ds.cache_files[0]["filename"], folder / name / written[0]["filename"])


def _drop_links(folder: Path, names: list[str]) -> None:
    """Remove the links where a save writes in ``folder`` (a tokenized_path saved again with ``overwrite_cache``):
    ``dataset_dict.json``, a split's folder, and every entry of a split's folder. datasets opens each file by its
    name, so a link planted there (a folder copied from elsewhere, or shared) was written through, changing the file
    it pointed to (or filling the folder a split's link led to). Only the link goes; what it pointed to is left."""
    import os

    if not folder.is_dir():
        return
    entries = [folder / "dataset_dict.json", *(folder / name for name in names)]
    for name in names:
        split = folder / name
        if split.is_dir() and not split.is_symlink():
            entries.extend(split.iterdir())
    for entry in entries:
        if entry.is_symlink():
            logger.warning("%s is a link; it is removed, and the saved data takes its place (what it pointed to is "
                           "left as it was).", entry)
            os.unlink(entry)


def _written_files(state: Path) -> list[Any]:
    """The data files a split's ``state.json`` (datasets' own, a few hundred bytes) lists; [] when it cannot be read
    as such (read only as a regular file of a bounded size: one replaced by a pipe or a sparse file of gigabytes
    is not waited on nor held whole; a name that leads out of the split's folder is not written to), so that the
    split is written its own way."""
    from engine.small_json import read_small_json, reason

    try:
        files = read_small_json(state)["_data_files"]
        if not isinstance(files, list) or not all(
                isinstance(f, dict) and isinstance(f.get("filename"), str) and f["filename"]
                and Path(f["filename"]).name == f["filename"] for f in files):
            raise TypeError("`_data_files` is not a list of file names in the split's folder")
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        logger.warning("%s cannot be read (%s); the split is written by datasets itself.", state,
                       reason(err) if not isinstance(err, KeyError) else "no `_data_files` in it")
        return []
    return files


def _one_whole_file(ds: Any) -> bool:
    """Whether ``ds`` is exactly the rows of its one cache file (no selection, no format, no other files)."""
    files = getattr(ds, "cache_files", None)
    if not files or len(files) != 1 or getattr(ds, "_indices", None) is not None or getattr(ds, "format", {}).get(
            "type") is not None:
        return False
    import pyarrow as pa

    try:
        with pa.memory_map(files[0]["filename"]) as source:
            rows = sum(batch.num_rows for batch in pa.ipc.open_stream(source))
    except (OSError, pa.ArrowInvalid):
        return False
    return rows == len(ds) and len(ds) > 0
