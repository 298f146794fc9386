"""Load one or more datasets as canonical examples for a stage, mix them, and hold out an evaluation split."""

from __future__ import annotations

import dataclasses
import itertools
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine import collector
from engine.data.convert_driver import iter_converted, new_tally, report_conversion
from engine.data.converters import detect_format
from engine.data.errors import DatasetError
from engine.data.examples import Examples, ExampleWriter, concat
from engine.data.hub import iter_spec_rows
from engine.data.registry import DatasetSpec, resolve_dataset
from engine.wording import counted

logger = logging.getLogger(__name__)

STAGES = ("pt", "sft", "rm", "dpo", "kto")
MAX_SAMPLED_ROWS = 10_000_000
"""Most examples dataset_info's ``num_samples`` may repeat a dataset's rows into (a smaller dataset drawn from a larger
one is never refused). LLaMA-Factory draws and holds them all: ``num_samples: 10000000000`` over 32 rows ended in
numpy's "Unable to allocate 74.5 GiB" traceback, and 100,000,000 grew the process by gigabytes for minutes before any
row was tokenized."""


def split_names(names: str | list[str] | None) -> list[str]:
    """Dataset names from a comma-separated string (or a list)."""
    if not names:
        return []
    items = names if isinstance(names, list) else str(names).split(",")
    return [item.strip() for item in items if item and item.strip()]


def ranking_for_stage(spec: DatasetSpec, stage: str) -> DatasetSpec:
    """``spec`` as ``stage`` reads it: ``ranking: 1`` (a number, which LLaMA-Factory's stage check lets through,
    data/loader.py:178) is not read by pt, which takes only the prompts (processor/pretrain.py:30), nor for KTO
    data, whose rows with a true/false kto_tag are KTO rows before ``ranking`` is looked at (data/converter.py:102)."""
    if spec.ranking and spec.ranking_number is not None and stage == "kto" and "kto_tag" in spec.columns:
        logger.info("Dataset %s: `ranking: 1` is not read by stage %s, as in LLaMA-Factory; write `ranking: false` "
                    "or remove it.", spec.name, stage)
        return dataclasses.replace(spec, ranking=False)
    return spec


def check_stage(spec: DatasetSpec, stage: str, first_row: dict[str, Any] | None = None,
                untagged: bool = False) -> None:
    """Refuse a dataset that cannot serve ``stage``, saying what it lacks (``first_row`` refines the check;
    ``untagged``: a set without a kto_tag column is let through to stage kto, mixed with a KTO set).

    Raises:
        DatasetError: when the dataset lacks ranking pairs (rm/dpo), a kto_tag (kto) or responses (sft/rm/dpo/kto).
    """
    if stage not in STAGES:
        raise DatasetError(f"Unknown stage {stage!r}; use one of: {', '.join(STAGES)}.")
    plain_text = spec.formatting == "text" or (
        spec.formatting == "alpaca" and not spec.ranking and "response" not in spec.columns
        and "prompt" in spec.columns and set(spec.columns) <= {"prompt", "system"}
        and "output" not in (first_row or {})
    )
    number = spec.ranking_number
    if stage in ("rm", "dpo") and not spec.ranking:
        written = (f" (`ranking: {number}` reads as false; LLaMA-Factory's stage check lets a number through, then "
                   "it drops every row and fails: \"Cannot find valid samples\")") if number is not None else ""
        raise DatasetError(
            f"Stage {stage} needs preference pairs, but dataset {spec.name!r} has no chosen/rejected answers{written}. "
            "Use a ranking dataset (`ranking: true` with chosen and rejected columns in dataset_info.json, e.g. "
            "dpo_en_demo) or another stage."
        )
    if stage not in ("rm", "dpo") and spec.ranking and number is None:
        raise DatasetError(
            f"Dataset {spec.name!r} holds preference pairs (`ranking: true`), which stage {stage} cannot use; "
            "LLaMA-Factory refuses it too (\"The dataset is not applicable in the current training stage\"). Use "
            "stage rm or dpo for its pairs, or a dataset of single answers (for sft, e.g. a copy of its prompts "
            "with the chosen answers as `output`)."
        )
    if stage not in ("rm", "dpo", "pt") and number and spec.ranking:
        raise DatasetError(
            f"Dataset {spec.name!r} has `ranking: {number}`, which reads as true (preference pairs), so stage {stage} "
            "cannot use it: LLaMA-Factory's stage check lets a number through (it tests `ranking is True`), then it "
            "reads the rows as pairs, which this stage drops (sft fails with \"Cannot find valid samples\"). Use "
            "stage rm or dpo for its pairs, or write `ranking: false` (or remove it) in dataset_info.json if its rows "
            "are not pairs."
        )
    if stage == "kto" and "kto_tag" not in spec.columns and not untagged:
        raise DatasetError(
            f"Stage kto needs a desirable/undesirable label per row, but dataset {spec.name!r} has no kto_tag column. "
            "Map it in dataset_info.json (`columns: {\"kto_tag\": \"label\"}`, e.g. kto_en_demo) or use another stage."
        )
    if stage != "pt" and plain_text:
        raise DatasetError(
            f"Dataset {spec.name!r} is plain text for pre-training (no prompts or responses), so "
            f"{'stages sft, grpo and rloo' if stage == 'sft' else f'stage {stage}'} cannot use it. "
            "Use stage pt, or a dataset with prompts and responses."
        )


def load_dataset_examples(name: str, dataset_dir: str, stage: str, max_samples: int | None = None,
                          media_dir: str | None = None, first: int | None = None, rng: Any = None,
                          stand_ins: bool = False, streamed: dict[str, Any] | None = None,
                          layout: dict[str, Any] | None = None, untagged: bool = False) -> Examples:
    """Canonical examples of one dataset (registered name or path) for ``stage``; relative media paths resolve
    against ``media_dir`` (default: the dataset's folder).

    Rows are read and converted one at a time into an Arrow file (:mod:`engine.data.examples`); with ``first``,
    reading stops once that many examples are converted (a preview). ``max_samples`` keeps the first rows read;
    dataset_info's ``num_samples`` samples rows as LLaMA-Factory does (:func:`sample_rows`, drawn from ``rng``, a
    ``numpy.random.RandomState``; seed 42 when None), then ``max_samples`` keeps the first of those. With
    ``stand_ins`` (KTO training data), skipped rows stay as :mod:`engine.data.kl_stand_ins` stand-ins. With
    ``streamed`` (a dict; ``streaming: true``), ``num_samples`` is not applied (LLaMA-Factory streams every row) and the
    dict receives ``rows`` (rows read) and ``read_as`` (the row number of each example, a numpy array). ``layout``
    (a dict) receives the dataset as LLaMA-Factory mixes it, skipped rows included: ``rows`` (its row count after
    ``num_samples`` and ``max_samples``) and ``kept`` (each example's position among them, a numpy array).
    ``untagged`` (stage kto with ``stand_ins``, beside a KTO set): a set without a kto_tag column, every row of which
    becomes a stand-in, as LLaMA-Factory drops such rows after they lend their replies to the KL pairs.

    Raises:
        DatasetError: for any problem with the dataset, naming it and the fix.
    """
    spec = resolve_dataset(name, dataset_dir)
    if media_dir:
        spec = dataclasses.replace(spec, media_dir=Path(media_dir).expanduser().absolute())
    rows = iter_spec_rows(spec)
    head = next(rows, None)
    if head is None:
        if spec.split:
            raise DatasetError(f"Dataset {name!r}: `split: {spec.split}` in dataset_info.json selects no rows of "
                               f"{spec.path}; change the slice or remove `split`.")
        raise DatasetError(f"Dataset {name!r} ({spec.path}) is empty; add rows to it.")
    sample = spec.num_samples if spec.num_samples and not first and streamed is None else None
    limit = None if sample or streamed is not None else min((n for n in (max_samples, spec.num_samples) if n),
                                                               default=None)
    rows = itertools.chain([head], rows)
    if limit:
        rows = itertools.islice(rows, limit)
    spec = ranking_for_stage(detect_format(spec, [head]), stage)
    check_stage(spec, stage, head, untagged)
    tally = new_tally()
    writer = ExampleWriter(name)
    read_as: list[int] = []  # with num_samples: the row number each example was read from
    try:
        with collector.paused():  # rows converted form no reference cycles
            for example in iter_converted(rows, spec, stage, tally, stand_ins):
                example["_dataset"] = name
                writer.add(example)
                if sample or streamed is not None or layout is not None:
                    read_as.append(tally["rows"] - 1)
                if first and writer.count >= first:
                    break
        if untagged:
            logger.warning("Dataset %s has no kto_tag column: its %s lend their replies to the KL pairs of stage kto "
                           "and are not trained, as in LLaMA-Factory (it drops them as invalid); map a kto_tag column "
                           "in dataset_info.json to train them.", name, counted(tally["rows"], "row"))
        else:
            report_conversion(spec, stage, tally)
    except BaseException:
        writer.abort()
        raise
    examples = writer.finish()
    if streamed is not None:
        import numpy as np

        streamed.update(rows=tally["rows"], read_as=np.asarray(read_as, dtype=np.int64))
    if layout is not None:
        import numpy as np

        layout.update(rows=tally["rows"], kept=np.asarray(read_as, dtype=np.int64))
    if sample and sample > max(tally["rows"], MAX_SAMPLED_ROWS):
        raise DatasetError(f"Dataset '{name}': `num_samples: {sample:,}` in dataset_info.json would repeat its "
                           f"{tally['rows']:,} rows into {sample:,} examples, more than the {MAX_SAMPLED_ROWS:,} that "
                           "are drawn at most (each is held in memory before training starts); lower num_samples.")
    if sample:
        examples = sample_rows(examples, read_as, tally["rows"], sample, max_samples, rng, layout)
        logger.info("Sampled %d examples from dataset %s (num_samples: %d of %d rows).", len(examples), name, sample,
                    tally["rows"])
    return examples


def example_positions(rows: int, kept: Any) -> Any:
    """For each of ``rows`` rows read, the number of the example it became, or -1 for a row skipped as unusable
    (``kept``: each example's row number, in order; a numpy array)."""
    import numpy as np

    position = np.full(rows, -1, dtype=np.int64)
    position[np.asarray(kept, dtype=np.int64)] = np.arange(len(kept), dtype=np.int64)
    return position


def sample_rows(examples: Examples, read_as: list[int], rows: int, count: int, max_samples: int | None,
                rng: Any = None, layout: dict[str, Any] | None = None) -> Examples:
    """dataset_info's ``num_samples`` as LLaMA-Factory 0.9.5 applies it: ``count`` of the ``rows`` rows read, drawn
    from ``rng`` (a ``numpy.random.RandomState``: LLaMA-Factory draws from numpy's global one, seeded with the run's
    seed before the datasets load) as a permutation's first ``count`` rows, plus rows chosen at random when ``count``
    exceeds ``rows``; then the first ``max_samples`` of those. Rows that were skipped as unusable stay out
    (KTO's stand-ins for them are drawn as rows).
    ``read_as`` holds the row number of each example; ``layout`` (see :func:`load_dataset_examples`) is updated."""
    import numpy as np

    rng = rng if rng is not None else np.random.RandomState(42)
    chosen = rng.permutation(rows)[:count]
    if count > rows:
        chosen = np.concatenate((chosen, rng.choice(rows, count - rows)), axis=0)
    if max_samples is not None:
        chosen = chosen[:max_samples]
    picked = example_positions(rows, read_as)[chosen]
    if layout is not None:
        layout.update(rows=len(chosen), kept=np.flatnonzero(picked >= 0))
    return examples.take(picked[picked >= 0])


def mix_order(lengths: list[int], strategy: str = "concat", probs: list[float] | None = None,
              seed: int = 42) -> list[tuple[int, int]] | None:
    """(dataset, position) of each mixed example, or None for ``concat`` (the datasets one after another).

    The interleaved order is LLaMA-Factory's: ``datasets.interleave_datasets`` with ``probs`` and ``seed``, run here
    on the row numbers. ``interleave_under`` stops when the first dataset is exhausted, ``interleave_over`` when all
    are (exhausted ones start again); without ``probs`` the datasets take turns.
    """
    if len(lengths) == 1 or strategy == "concat":
        return None
    if strategy not in ("interleave_under", "interleave_over"):
        raise DatasetError(f"Unknown mix_strategy {strategy!r}; use concat, interleave_under or interleave_over.")
    if probs is not None and (len(probs) != len(lengths) or any(w < 0 for w in probs) or sum(probs) <= 0):
        raise DatasetError(f"interleave_probs must give one non-negative weight per dataset ({len(lengths)}).")
    import numpy as np
    from datasets import Dataset, interleave_datasets

    if probs is not None and abs(sum(probs) - 1.0) > 1e-8:  # numpy's choice needs them to sum to 1
        logger.info("interleave_probs %s do not sum to 1; they are scaled to.", probs)
        probs = [w / sum(probs) for w in probs]
    if probs is not None and strategy == "interleave_over":
        _check_oversampling(lengths, probs)
    parts = [Dataset.from_dict({"dataset": np.full(n, k, dtype=np.int64), "row": np.arange(n, dtype=np.int64)})
             for k, n in enumerate(lengths)]
    mixed = interleave_datasets(parts, probabilities=probs, seed=seed,
                                stopping_strategy="first_exhausted" if strategy == "interleave_under"
                                else "all_exhausted")
    return list(zip(mixed["dataset"], mixed["row"]))


def _check_oversampling(lengths: list[int], probs: list[float]) -> None:
    """Refuse ``interleave_over`` weights that never end or draw past :data:`MAX_SAMPLED_ROWS`: it draws until every
    dataset has been drawn whole, about ``rows / weight`` draws for each. A weight of 0 never ends (datasets raised
    a ValueError traceback); a tiny one (``0.9999999999,0.0000000001``) drew for minutes, 9 GB and growing."""
    for k, (rows, weight) in enumerate(zip(lengths, probs)):
        where = f"dataset {k + 1} of {len(lengths)} (in the order they are named)"
        if rows and weight <= 0:
            raise DatasetError(f"`mix_strategy: interleave_over` draws until every dataset has been drawn whole, but "
                               f"{where} weighs 0 in interleave_probs, so it is never drawn and the mix never ends; "
                               "give it a weight above 0, leave it out, or use interleave_under.")
        if rows and rows / weight > MAX_SAMPLED_ROWS:
            raise DatasetError(f"`mix_strategy: interleave_over` draws until every dataset has been drawn whole: "
                               f"{where} holds {rows:,} rows at a weight of {weight:.3g}, about {rows / weight:,.0f} "
                               f"draws, more than the {MAX_SAMPLED_ROWS:,} examples mixed at most; raise its weight "
                               "in interleave_probs, or use interleave_under.")


def mix_examples(groups: list[Sequence[dict]], strategy: str = "concat", probs: list[float] | None = None,
                 seed: int = 42, layouts: list[dict[str, Any]] | None = None,
                 mixed: dict[str, Any] | None = None) -> Sequence[dict]:
    """Mix several datasets (see :func:`mix_order`); :class:`Examples` groups give an :class:`Examples` view,
    lists a list. ``layouts`` (one per group, see :func:`load_dataset_examples`): mix the rows as LLaMA-Factory
    does, skipped rows included (it drops unusable rows after mixing them), then leave the skipped ones out; the
    ``mixed`` dict then receives the mix's layout (its ``rows``, skipped ones included, and where the examples sit:
    ``kept``)."""
    import numpy as np

    picks = mix_order([len(group) for group in groups] if layouts is None else [part["rows"] for part in layouts],
                      strategy, probs, seed)
    if layouts is not None and picks is None:  # concat: each group's rows after the previous group's
        if mixed is not None:
            offsets = np.cumsum([0] + [part["rows"] for part in layouts])
            mixed.update(rows=int(offsets[-1]), kept=np.concatenate(
                [np.asarray(part["kept"], dtype=np.int64) + offset for part, offset in zip(layouts, offsets)]))
    elif layouts is not None:
        positions = [example_positions(part["rows"], part["kept"]) for part in layouts]
        found = [int(positions[index][row]) for index, row in picks]
        if mixed is not None:
            mixed.update(rows=len(picks), kept=np.flatnonzero(np.asarray(found, dtype=np.int64) >= 0))
        picks = [(index, at) for (index, _), at in zip(picks, found) if at >= 0]
    if all(isinstance(group, Examples) for group in groups):
        joined = concat(groups)
        if picks is None:
            return joined
        offsets = [0]
        for group in groups:
            offsets.append(offsets[-1] + len(group))
        return joined.take([offsets[index] + position for index, position in picks])
    if picks is None:
        return [example for group in groups for example in group]
    return [groups[index][position] for index, position in picks]


def load_examples(data_args: Any, names: str | list[str] | None, stage: str, seed: int = 42,
                  first: int | None = None, rng: Any = None, stand_ins: bool = False,
                  layout: dict[str, Any] | None = None) -> Sequence[dict]:
    """Canonical examples of all datasets in ``names`` (comma separated), mixed as ``data_args`` says, as an
    :class:`engine.data.examples.Examples` (a lazy sequence over an Arrow file).

    ``data_args`` provides ``dataset_dir``, ``max_samples`` (per dataset), ``mix_strategy`` and
    ``interleave_probs``. ``stand_ins``: see :func:`load_dataset_examples`. ``layout`` (a dict) receives the rows
    as LLaMA-Factory holds them before it drops unusable ones (see :func:`mix_examples`' ``mixed``), for
    :func:`split_eval`. ``first`` reads only that many examples of each dataset (the first ``first`` mixed
    examples are then those of the whole load).

    Raises:
        DatasetError: for any dataset problem (unknown name, missing file, bad JSON, wrong stage, no usable rows).
    """
    items = split_names(names)
    if not items:
        raise DatasetError("No dataset given: set `dataset` to a name from dataset_info.json or a file path.")
    if rng is None:  # num_samples draws: one generator through the datasets in order, as LLaMA-Factory's global one
        import numpy as np

        rng = np.random.RandomState(seed)
    untagged = untagged_kto_sets(items, data_args.dataset_dir) if stage == "kto" and stand_ins else set()
    loaded: dict[str, Any] = {}  # LLaMA-Factory keeps its datasets in a dict by name: a name given twice is loaded
    layouts: dict[str, dict[str, Any]] = {}  # twice (its num_samples draws as well) and used once, where it first
    for name in items:  # appears
        layouts[name] = {}
        loaded[name] = load_dataset_examples(name, data_args.dataset_dir, stage, getattr(data_args, "max_samples", None),
                                             getattr(data_args, "media_dir", None), first, rng, stand_ins,
                                             layout=layouts[name], untagged=name in untagged)
    if len(loaded) < len(items):
        twice = sorted({name for name in items if items.count(name) > 1})
        logger.warning("Dataset %s is named more than once; its rows are used once, as in LLaMA-Factory.",
                       ", ".join(f"`{name}`" for name in twice))
    groups = list(loaded.values())
    probs_text = getattr(data_args, "interleave_probs", None)
    try:
        probs = [float(p) for p in str(probs_text).split(",")] if probs_text else None
    except ValueError:
        raise DatasetError(f"interleave_probs {probs_text!r} must be comma-separated numbers.") from None
    return mix_examples(groups, getattr(data_args, "mix_strategy", "concat") or "concat", probs, seed,
                        [layouts[name] for name in loaded], layout)


def untagged_kto_sets(items: list[str], dataset_dir: str) -> set[str]:
    """The sets of ``items`` without a kto_tag column, where another set has one (stage kto): LLaMA-Factory reads
    their rows and drops them while it preprocesses, so the KTO set trains; a mix of untagged sets alone is refused
    by the stage check (LLaMA-Factory: "Cannot find valid samples")."""
    tagged = {}
    for name in dict.fromkeys(items):
        try:
            tagged[name] = "kto_tag" in resolve_dataset(name, dataset_dir).columns
        except DatasetError:  # named by its own load or check
            continue
    return {name for name, has in tagged.items() if not has} if any(tagged.values()) else set()


def split_eval(examples: Sequence[dict], val_size: float, seed: int = 42,
               layout: dict[str, Any] | None = None) -> tuple[Sequence[dict], Sequence[dict]]:
    """Hold out ``val_size`` examples (a fraction when < 1, a count otherwise) as LLaMA-Factory does:
    ``datasets``' ``train_test_split(test_size, seed)`` (run here on the row numbers), so the same rows are held out
    and both parts come in its shuffled order. An :class:`Examples` gives two views of it, a list two lists.
    ``layout`` (:func:`load_examples`'): split the rows as LLaMA-Factory does, before it drops unusable ones, then
    leave those out of both parts; ``layout["parts"]`` then holds each part's layout (train, evaluation) in turn.

    Raises:
        DatasetError: when the split would leave no training or no evaluation examples.
    """
    if not val_size or val_size <= 0:
        return examples, []
    total = len(examples) if layout is None else layout["rows"]
    test_size: float | int = val_size if val_size < 1 else int(val_size)
    count = math.ceil(test_size * total) if isinstance(test_size, float) else test_size
    if count >= total:
        raise DatasetError(f"val_size {val_size} leaves no training examples out of {total}; lower it.")
    import numpy as np
    from datasets import Dataset

    split = Dataset.from_dict({"row": np.arange(total, dtype=np.int64)}).train_test_split(test_size=test_size,
                                                                                         seed=seed)
    train, held = split["train"]["row"], split["test"]["row"]
    if layout is not None:
        position = example_positions(total, layout["kept"])
        found = [position[np.asarray(part, dtype=np.int64)] for part in (train, held)]
        layout["parts"] = tuple({"rows": len(at), "kept": np.flatnonzero(at >= 0)} for at in found)
        train, held = ([int(i) for i in at if i >= 0] for at in found)
    if isinstance(examples, Examples):
        return examples.take(train), examples.take(held)
    return [examples[i] for i in train], [examples[i] for i in held]
