"""Load one or more datasets as canonical examples for a stage, mix them, and hold out an evaluation split."""

from __future__ import annotations

import dataclasses
import logging
import random
from pathlib import Path
from typing import Any

from engine.data.converters import convert_rows, detect_format
from engine.data.errors import DatasetError
from engine.data.hub import spec_rows
from engine.data.registry import DatasetSpec, resolve_dataset

logger = logging.getLogger(__name__)

STAGES = ("pt", "sft", "rm", "dpo", "kto")


def split_names(names: str | list[str] | None) -> list[str]:
    """Dataset names from a comma-separated string (or a list)."""
    if not names:
        return []
    items = names if isinstance(names, list) else str(names).split(",")
    return [item.strip() for item in items if item and item.strip()]


def check_stage(spec: DatasetSpec, stage: str, first_row: dict[str, Any] | None = None) -> None:
    """Refuse a dataset that cannot serve ``stage``, saying what it lacks (``first_row`` refines the check).

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
    if stage in ("rm", "dpo") and not spec.ranking:
        raise DatasetError(
            f"Stage {stage} needs preference pairs, but dataset {spec.name!r} has no chosen/rejected answers. Use a "
            "ranking dataset (`ranking: true` with chosen and rejected columns in dataset_info.json, e.g. "
            "dpo_en_demo) or another stage."
        )
    if stage == "kto" and "kto_tag" not in spec.columns:
        raise DatasetError(
            f"Stage kto needs a desirable/undesirable label per row, but dataset {spec.name!r} has no kto_tag column. "
            "Map it in dataset_info.json (`columns: {\"kto_tag\": \"label\"}`, e.g. kto_en_demo) or use another stage."
        )
    if stage != "pt" and plain_text:
        raise DatasetError(
            f"Dataset {spec.name!r} is plain text for pre-training (no responses), so stage {stage} cannot use it. "
            "Use stage pt, or a dataset with prompts and responses."
        )


def load_dataset_examples(name: str, dataset_dir: str, stage: str, max_samples: int | None = None,
                          media_dir: str | None = None) -> list[dict]:
    """Canonical examples of one dataset (registered name or path) for ``stage``; relative media paths resolve
    against ``media_dir`` (default: the dataset's folder).

    Raises:
        DatasetError: for any problem with the dataset, naming it and the fix.
    """
    spec = resolve_dataset(name, dataset_dir)
    if media_dir:
        spec = dataclasses.replace(spec, media_dir=Path(media_dir).expanduser().absolute())
    rows = spec_rows(spec)
    if not rows:
        raise DatasetError(f"Dataset {name!r} ({spec.path}) is empty; add rows to it.")
    limit = min(n for n in (max_samples, spec.num_samples) if n) if (max_samples or spec.num_samples) else None
    if limit:
        rows = rows[:limit]
    spec = detect_format(spec, rows)
    check_stage(spec, stage, rows[0])
    if stage == "sft" and spec.ranking:
        logger.info("Dataset %s holds preference pairs; stage sft trains on the chosen answers.", name)
    examples = convert_rows(rows, spec, stage)
    for example in examples:
        example["_dataset"] = name
    return examples


def mix_examples(groups: list[list[dict]], strategy: str = "concat", probs: list[float] | None = None,
                 seed: int = 42) -> list[dict]:
    """Mix several datasets: ``concat``, or interleave until the smallest (``interleave_under``) or the largest
    (``interleave_over``, smaller ones cycled) is exhausted, picking the next dataset with ``probs``."""
    if len(groups) == 1 or strategy == "concat":
        return [example for group in groups for example in group]
    if strategy not in ("interleave_under", "interleave_over"):
        raise DatasetError(f"Unknown mix_strategy {strategy!r}; use concat, interleave_under or interleave_over.")
    weights = probs or [1.0] * len(groups)
    if len(weights) != len(groups) or any(w < 0 for w in weights) or sum(weights) <= 0:
        raise DatasetError(f"interleave_probs must give one non-negative weight per dataset ({len(groups)}).")
    rng = random.Random(seed)
    positions = [0] * len(groups)
    done = [False] * len(groups)
    out: list[dict] = []
    while True:
        index = rng.choices(range(len(groups)), weights=weights)[0]
        group = groups[index]
        if positions[index] >= len(group):
            done[index] = True
            if strategy == "interleave_under" or all(done[i] or weights[i] == 0 for i in range(len(groups))):
                return out
            positions[index] = 0
        out.append(group[positions[index]])
        positions[index] += 1


def load_examples(data_args: Any, names: str | list[str] | None, stage: str, seed: int = 42) -> list[dict]:
    """Canonical examples of all datasets in ``names`` (comma separated), mixed as ``data_args`` says.

    ``data_args`` provides ``dataset_dir``, ``max_samples`` (per dataset), ``mix_strategy`` and
    ``interleave_probs``.

    Raises:
        DatasetError: for any dataset problem (unknown name, missing file, bad JSON, wrong stage, no usable rows).
    """
    items = split_names(names)
    if not items:
        raise DatasetError("No dataset given: set `dataset` to a name from dataset_info.json or a file path.")
    groups = [load_dataset_examples(name, data_args.dataset_dir, stage, getattr(data_args, "max_samples", None),
                                    getattr(data_args, "media_dir", None)) for name in items]
    probs_text = getattr(data_args, "interleave_probs", None)
    try:
        probs = [float(p) for p in str(probs_text).split(",")] if probs_text else None
    except ValueError:
        raise DatasetError(f"interleave_probs {probs_text!r} must be comma-separated numbers.") from None
    return mix_examples(groups, getattr(data_args, "mix_strategy", "concat") or "concat", probs, seed)


def split_eval(examples: list[dict], val_size: float, seed: int = 42) -> tuple[list[dict], list[dict]]:
    """Hold out ``val_size`` examples (a fraction when < 1, a count otherwise), chosen with ``seed``.

    Raises:
        DatasetError: when the split would leave no training or no evaluation examples.
    """
    if not val_size or val_size <= 0:
        return examples, []
    total = len(examples)
    count = max(1, round(val_size * total)) if val_size < 1 else int(val_size)
    if count >= total:
        raise DatasetError(f"val_size {val_size} leaves no training examples out of {total}; lower it.")
    order = list(range(total))
    random.Random(seed).shuffle(order)
    held = set(order[:count])
    return ([ex for i, ex in enumerate(examples) if i not in held],
            [examples[i] for i in sorted(held)])
