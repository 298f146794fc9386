"""``streaming: true``: rows are tokenized while training, in LLaMA-Factory 0.9.5's streaming order.

As LLaMA-Factory does with local files, each dataset is read and converted first (here into the Arrow file of
:mod:`engine.data.examples`, on disk, as its ``load_dataset`` writes one), and nothing is tokenized before training
starts: :class:`StreamedRows` walks the shuffled mix (:mod:`engine.data.stream_order`) one preprocessing batch
(``preprocessing_batch_size`` rows, 1000 when unset) at a time, reads those examples from disk, tokenizes them as
the non-streaming path tokenizes a batch (the same rows, labels, pre-training blocks and packs of that batch), and
yields the rows. Memory holds one batch, the shuffle buffer of row numbers and a row-number table per dataset.
Stages pt, sft, rm, dpo and kto stream (LLaMA-Factory 0.9.5 trains each of them so). KTO's KL pairs are formed
within each of these batches, as LLaMA-Factory's map forms them (each row takes the completion of the row before it
in the batch, the first the last's), the stand-ins of its skipped rows taking part (:func:`engine.data.kto_pairs.
pair_batch`); so they depend on ``preprocessing_batch_size`` and on the rows held out by ``val_size``.

LLaMA-Factory's rules: ``max_steps`` is needed and ``max_samples`` refused (engine.config.streaming_checks);
``num_samples`` of dataset_info.json is not applied; ``val_size`` is a row count, the first rows of the stream,
which training skips; ``eval_dataset`` is shuffled the same way. The evaluation rows are tokenized up front here (a
finite set; the Trainer evaluates the same rows in the same order). A new epoch (the stream ran out before
``max_steps``) reshuffles: the Trainer calls :meth:`StreamedRows.set_epoch`. With ``dataloader_num_workers`` W
above 1, each dataset is split into W shards and each data loader worker streams its own (torch's loader then takes
a batch from each worker in turn), as LLaMA-Factory's ``to_iterable_dataset(num_shards=W)`` does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import torch

from engine.config.streaming_checks import media_refusal
from engine.data.errors import DatasetError
from engine.data.examples import Examples, concat, count_media
from engine.data.kto_pairs import pair_batch
from engine.data.loader import example_positions, load_dataset_examples, split_names, untagged_kto_sets
from engine.data.stream_order import split_number, stream_order
from engine.data.tokenize import TokenizeOptions, cutoff_phrase, tokenize_examples

logger = logging.getLogger(__name__)

LF_BATCH_ROWS = 1000  # LLaMA-Factory's preprocessing_batch_size default: the rows of one streamed map batch
DEFAULT_BUFFER = 16384  # LLaMA-Factory's buffer_size default


class StreamedRows(torch.utils.data.IterableDataset):
    """Tokenized rows of several datasets, in LLaMA-Factory's streaming order, tokenized a batch at a time.

    ``examples``: each dataset's examples; ``positions``: per dataset, the example of each row read (-1 for a row
    the converter skipped, which LLaMA-Factory's preprocessing drops from its batch). ``skip``: rows at the start of
    the stream held out for evaluation (``val_size``). ``order["shards"]`` above 1 (``dataloader_num_workers``): each
    data loader worker streams its own shard (outside a data loader, the workers' streams one after another)."""

    def __init__(self, examples: list[Examples], positions: list[Any], order: dict[str, Any], stage: str,
                 tokenizer: Any, template: Any, opts: TokenizeOptions, batch_rows: int, skip: int = 0) -> None:
        import numpy as np

        self.examples, self.positions, self.order = examples, positions, order
        self.stage, self.tokenizer, self.template, self.opts = stage, tokenizer, template, opts
        self.batch_rows, self.skip, self.epoch = batch_rows, skip, 0
        self._joined = concat(examples)
        self._offsets = np.cumsum([0] + [len(part) for part in examples[:-1]], dtype=np.int64)
        self.column_names: list[str] = []
        self.first: dict[str, list] | None = None  # the first training row (set before training)

    def set_epoch(self, epoch: int) -> None:
        """Reshuffle as ``datasets.IterableDataset.set_epoch`` does (the Trainer calls it at each new epoch)."""
        self.epoch = epoch

    @property
    def shards(self) -> int:
        return self.order.get("shards", 1)

    def picks(self, epoch: int | None = None, held_out: bool = False, worker: int = 0) -> Iterator[tuple[int, int]]:
        """``(dataset, row)`` of the stream this dataset walks (after the held-out rows), or of the held-out rows (of
        data loader ``worker``, whose share of the held-out rows is its share of ``skip``)."""
        order = stream_order(epoch=self.epoch if epoch is None else epoch, worker=worker, **self.order)
        skip = split_number(self.skip, self.shards, worker)
        return islice(order, skip) if held_out else islice(order, skip, None)

    def batches(self, picks: Iterator[tuple[int, int]]) -> Iterator[tuple[dict[str, list], dict[str, int]]]:
        """Tokenized columns and stats of each preprocessing batch of ``picks`` (LLaMA-Factory's map batches)."""
        import numpy as np

        while True:
            batch = list(islice(picks, self.batch_rows))
            if not batch:
                return
            ids = [int(self._offsets[k] + self.positions[k][row]) for k, row in batch if self.positions[k][row] >= 0]
            if not ids:
                continue
            examples = list(self._joined.take(np.asarray(ids, dtype=np.int64)))
            columns, stats = tokenize_examples(examples, self.stage, self.tokenizer, self.template, self.opts)
            if self.stage == "kto":  # KL pairs within the map batch, its skipped rows' stand-ins included
                columns = pair_batch(columns, self.opts, examples)
            yield columns, stats

    def training_examples(self, chunk: int = 1000) -> Iterator[dict[str, Any]]:
        """The examples of epoch 0's training rows (past the held-out ones), each worker's, read ``chunk`` at a time
        and not tokenized (the KTO trainer's check of its labels)."""
        import numpy as np

        for worker in range(self.shards):
            picks = self.picks(0, worker=worker)
            while batch := list(islice(picks, chunk)):
                ids = [int(self._offsets[k] + self.positions[k][row]) for k, row in batch if self.positions[k][row] >= 0]
                if ids:
                    yield from self._joined.take(np.asarray(ids, dtype=np.int64))

    def __iter__(self) -> Iterator[dict[str, list]]:
        info = torch.utils.data.get_worker_info()
        if info is not None and self.shards > 1 and info.num_workers != self.shards:
            raise DatasetError(f"The stream is split into {self.shards} shards (dataloader_num_workers) but is read by "
                               f"{info.num_workers} data loader workers; they must be equal.")
        workers = [info.id] if info is not None and self.shards > 1 else range(self.shards)
        for worker in workers:
            yield from rows_of(self.batches(self.picks(worker=worker)))


def rows_of(batches: Iterator[tuple[dict[str, list], dict[str, int]]]) -> Iterator[dict[str, list]]:
    """The rows of tokenized batches, one dict per row."""
    for columns, _ in batches:
        names = list(columns)
        for i in range(len(columns[names[0]])):
            yield {name: columns[name][i] for name in names}


def get_streaming_dataset(cfg: Any, tokenizer: Any, template: Any,
                          opts: TokenizeOptions) -> tuple[StreamedRows | None, Any, dict[str, Any]]:
    """The training rows (a :class:`StreamedRows`), the evaluation rows (a tokenized ``datasets.Dataset``) and the
    stats of a ``streaming: true`` config (``template`` configured, ``opts`` its tokenization settings).

    Raises:
        DatasetError: where the data cannot stream here, naming the fix.
    """
    data, seed = cfg.data, cfg.train.seed
    refuse_here(cfg)
    batch_rows = data.preprocessing_batch_size or LF_BATCH_ROWS
    buffer_size = getattr(data, "buffer_size", None) or DEFAULT_BUFFER
    train, evaluation, stats = None, None, {}
    held = int(data.val_size) if data.val_size and data.val_size >= 1 else 0
    if data.dataset:
        train = _streamed(cfg, data.dataset, tokenizer, template, opts, batch_rows, buffer_size, held)
        if held:
            evaluation, stats["eval"] = _materialize(train, True, cfg.train.per_device_eval_batch_size,
                                                     "held-out (val_size)")
        _first_row(train)
        stats["train"] = {"streaming": True, "rows": sum(map(len, train.positions))}
        logger.info("Streaming %d rows of %s: tokenized %d at a time while training (buffer_size %d, seed %d)%s.",
                    stats["train"]["rows"], data.dataset, batch_rows, buffer_size, seed,
                    f"; the first {held} rows of the stream are held out for evaluation" if held else "")
    if data.eval_dataset:
        rows = _streamed(cfg, data.eval_dataset, tokenizer, template, opts, batch_rows, buffer_size, 0)
        evaluation, stats["eval"] = _materialize(rows, False, cfg.train.per_device_eval_batch_size, "eval_dataset")
    return train, evaluation, stats


def refuse_here(cfg: Any) -> None:
    """What streaming cannot do in this process (the config-level rules are in engine.config.streaming_checks).

    Raises:
        DatasetError: for several processes (each would need its share of the stream).
    """
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world > 1:
        raise DatasetError(f"`streaming: true` runs in one process here, and this run has {world} (WORLD_SIZE): the "
                           "share of the stream each process trains on is not implemented. Train on one device, or "
                           "remove `streaming`.")
    path = cfg.data.tokenized_path
    if path and not (Path(path).expanduser().exists() and not cfg.data.overwrite_cache):
        raise DatasetError(f"`streaming: true` with `tokenized_path: {path}`, which holds no saved data here (or "
                           "`overwrite_cache: true` asks to save it again): streamed rows are tokenized while "
                           "training and cannot be saved (LLaMA-Factory refuses it too: \"Turn off "
                           "`streaming` when saving dataset to disk\"). Remove `streaming` to tokenize and save them "
                           "once, then stream from the saved folder, or remove `tokenized_path`.")


def _streamed(cfg: Any, names: str, tokenizer: Any, template: Any, opts: TokenizeOptions, batch_rows: int,
              buffer_size: int, skip: int) -> StreamedRows:
    """Read and convert ``names`` (no tokenization) and wrap them in a :class:`StreamedRows`."""
    data, stage = cfg.data, cfg.finetuning.stage
    items = split_names(names)
    # kto: a set without a kto_tag column beside a KTO set lends its replies to the KL pairs of its map batches and
    # is not trained (LLaMA-Factory drops its rows in preprocessing, after the pairs are formed), as without streaming
    untagged = untagged_kto_sets(items, data.dataset_dir) if stage == "kto" else set()
    loaded: dict[str, tuple[Examples, Any]] = {}  # a name given twice is used once, as in LLaMA-Factory
    for name in items:
        streamed: dict[str, Any] = {}
        examples = load_dataset_examples(name, data.dataset_dir, stage, None, getattr(data, "media_dir", None),
                                         stand_ins=stage == "kto", streamed=streamed,  # kl_stand_ins
                                         untagged=name in untagged)
        if count_media(examples):
            raise DatasetError(media_refusal(name))
        loaded[name] = (examples, example_positions(streamed["rows"], streamed["read_as"]))
    strategy = data.mix_strategy or "concat"
    if len(loaded) > 1 and strategy == "concat":
        logger.warning("`mix_strategy: concat` with `streaming: true`: the datasets come one after another (in a "
                       "shuffled order) and their rows are not mixed, as in LLaMA-Factory; set `mix_strategy: "
                       "interleave_under` or `interleave_over` to mix them.")
    probs = [float(p) for p in str(data.interleave_probs).split(",")] if data.interleave_probs else None
    examples = [part for part, _ in loaded.values()]
    positions = [position for _, position in loaded.values()]
    shards = max(1, cfg.train.dataloader_num_workers)
    for name, position in zip(loaded, positions):
        if len(position) < shards:  # datasets' to_iterable_dataset refuses it in LLaMA-Factory
            raise DatasetError(f"Dataset {name!r} has {len(position)} rows, fewer than the {shards} shards "
                               f"`dataloader_num_workers: {shards}` splits each streamed dataset into (LLaMA-Factory "
                               "fails on it too); lower `dataloader_num_workers`.")
    order = {"lengths": [len(position) for position in positions], "seed": cfg.train.seed,
             "buffer_size": buffer_size, "strategy": strategy, "probs": probs, "shards": shards}
    return StreamedRows(examples, positions, order, stage, tokenizer, template, opts, batch_rows, skip)


def _first_row(rows: StreamedRows) -> None:
    """Tokenize until the first row (as LLaMA-Factory prints its first example), to fail before training when no
    row is usable, and to know the columns (the Trainer checks for packed rows' ``position_ids``)."""
    first = next(iter(rows), None)
    if first is None and rows.skip >= sum(map(len, rows.positions)):
        raise DatasetError(f"`val_size: {rows.skip}` holds out every one of the {sum(map(len, rows.positions))} rows "
                           "of the stream, leaving none to train on; lower `val_size`.")
    if first is None:
        raise DatasetError(f"No row of the stream has a token to train on after cutting to "
                           f"{cutoff_phrase(rows.opts)} (or, for pre-training, fills a block); raise cutoff_len or check "
                           "the data.")
    rows.column_names, rows.first = list(first), first


def _materialize(rows: StreamedRows, held_out: bool, batch_size: int, what: str) -> tuple[Any, dict[str, int]]:
    """The tokenized evaluation rows of ``rows`` (its held-out rows, or all of epoch 0) as a ``datasets.Dataset``,
    in the order the Trainer's evaluation loader would read the stream (with several workers: a batch of
    ``batch_size`` rows from each worker in turn, as torch's loader takes them), and their stats."""
    from datasets import Dataset

    columns: dict[str, list] = {}
    stats: dict[str, int] = {}
    per_worker: list[list[dict[str, list]]] = []
    for worker in range(rows.shards):
        tokenized: list[dict[str, list]] = []
        for part, part_stats in rows.batches(rows.picks(0, held_out=held_out, worker=worker)):
            tokenized.append(part)
            for name, value in part_stats.items():
                if isinstance(value, int):
                    stats[name] = stats.get(name, 0) + value
        per_worker.append(list(rows_of((part, {}) for part in tokenized)))
    turns = [[rows_[i:i + batch_size] for i in range(0, len(rows_), batch_size)] for rows_ in per_worker]
    for turn in range(max(map(len, turns), default=0)):
        for batches in turns:
            for row in batches[turn] if turn < len(batches) else ():
                for name, value in row.items():
                    columns.setdefault(name, []).append(value)
    if not columns or not next(iter(columns.values())):
        raise DatasetError(f"The {what} rows of the stream hold no row to evaluate on after tokenization; give more "
                           "rows (a larger `val_size`) or check the data.")
    logger.info("Evaluation data (%s, streamed order): %d rows.", what, len(next(iter(columns.values()))))
    return Dataset.from_dict(columns), stats
