"""Datasets: the dataset_info.json registry, file readers, format converters, tokenization, collation, preview.

``get_dataset(cfg, tokenizer, template)`` is the entry point for training; ``load_eval_prompts`` for prediction.
"""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine import collector
from engine.config.schema import packs_rows
from engine.data import saved_fit
from engine.data.collator import PaddingCollator, build_collator
from engine.data.convert_driver import convert_rows
from engine.data.converters import CONVERTERS
from engine.data.errors import DatasetError
from engine.data.examples import Examples, count_media, media_dataset_names
from engine.data.loader import load_examples, split_eval
from engine.data.preview import preview_dataset
from engine.data.readers import READERS, read_rows
from engine.data.register import register_dataset
from engine.data.registry import DatasetSpec, list_datasets, load_dataset_info, resolve_dataset
from engine.data.tokenize import TokenizeOptions, cutoff_phrase, tokenize_examples
from engine.wording import counted, was_were

logger = logging.getLogger(__name__)


@dataclass
class DatasetBundle:
    """Tokenized training and evaluation sets and their statistics.

    Attributes:
        train: The training set (None when no ``dataset`` is set).
        eval: The evaluation set from ``eval_dataset`` or ``val_size`` (None when neither is set).
        stats: ``{"train": {...}, "eval": {...}}``: rows, kept, truncated, dropped, total and trainable tokens.
    """

    train: Any = None
    eval: Any = None
    stats: dict[str, Any] = field(default_factory=dict)
    media: Any = None  # engine.multimodal.dataset.MediaContext when the rows carry media for a multimodal model
    eval_sets: Any = None  # eval_on_each_dataset for a trainer built with them (KTO, DPO, RM): dataset name -> its own set
    origin: str = "tokenized"  # "cache" (the tokenized-data cache) or "tokenized_path" when loaded, not tokenized;
    # "streamed" (streaming: true): ``train`` is tokenized while training
    cache_entry: Any = None  # the cache entry (a Path) that holds this data, when one does


def configured_template(cfg: Any, template: Any) -> Any:
    """``template`` with the data options of ``cfg`` (enable_thinking, default_system, tool_format) applied."""
    data = cfg.data
    return template.with_options(enable_thinking=data.enable_thinking, default_system=data.default_system,
                                 tool_format=data.tool_format,
                                 preserve_thinking=getattr(data, "preserve_thinking", None))


def _to_dataset(columns: dict[str, list]) -> Any:
    from datasets import Dataset

    return Dataset.from_dict(columns)


def _tokenized(examples: Sequence[dict], stage: str, tokenizer: Any, template: Any, opts: TokenizeOptions,
               split: str, media: Any = None, workers: int | None = None,
               chunk_rows: int | None = None, layout: dict | None = None) -> tuple[Any, dict[str, int]]:
    """``layout``: the rows as LLaMA-Factory preprocesses them, unusable ones included (its batches hold those)."""
    if media is not None and stage in ("dpo", "kto"):
        from engine.multimodal.preference import tokenize_media_preference

        columns, stats = tokenize_media_preference(examples, tokenizer, template, opts, media, stage)
    elif media is not None:
        from engine.data.lf_batches import lf_example_batches
        from engine.multimodal.dataset import tokenize_media_sft

        # packed rows meet only within LLaMA-Factory's preprocessing batches
        columns, stats = tokenize_media_sft(examples, tokenizer, template, opts, media,
                                            lf_example_batches(len(examples), chunk_rows, workers, layout))
    else:  # chunks straight into a memory-mapped Arrow file: no Python lists of the whole set
        from engine.data.stream import tokenize_to_arrow

        dataset, stats = tokenize_to_arrow(examples, stage, tokenizer, template, opts, workers, chunk_rows, layout)
    if not stats["kept"] and stage == "pt" and not (opts.pt_documents or opts.packing):
        raise DatasetError(
            f"The {stats['rows']} {split} texts hold {stats.get('remainder_tokens', 0)} tokens, not one whole block: "
            f"pre-training text is joined and cut into blocks of {opts.block_len or opts.cutoff_len} tokens "
            f"({cutoff_phrase(opts, opts.block_len)}; within "
            "each preprocessing batch), and a last block that is not whole is left out, as in LLaMA-Factory. Lower "
            "cutoff_len, or set `packing: false` to train on each text as a row of its own."
        )
    if not stats["kept"] or not stats["trainable_tokens"]:
        raise DatasetError(
            f"None of the {stats['rows']} {split} examples has a token to train on after cutting to "
            f"{cutoff_phrase(opts)}: such a run would learn nothing (LLaMA-Factory starts it, and a causal LM "
            "loss over no tokens is NaN). Raise cutoff_len or check the data."
        )
    if stats.get("untrained"):
        one = stats["untrained"] == 1
        logger.warning("%d of %s %s no trained token left after cutting to %s; %s kept, as LLaMA-Factory keeps "
                       "%s, but %s nothing: raise cutoff_len to train on %s.", stats["untrained"],
                       counted(stats["rows"], f"{split} row"), "has" if one else "have", cutoff_phrase(opts),
                       "it is" if one else "they are", "it" if one else "them", "teaches" if one else "teach",
                       "it" if one else "them")
    logger.info("%s data: %s -> %s (%d truncated, %d dropped), %d tokens of which %d trained.",
                split.capitalize(), counted(stats["rows"], "row"), counted(stats["kept"], "sequence"),
                stats["truncated"], stats["dropped"], stats["total_tokens"], stats["trainable_tokens"])
    if stats.get("remainder_tokens"):
        logger.info("%d %s tokens did not fill a last block of %d at the end of a preprocessing batch and are left "
                    "out, as in LLaMA-Factory (`packing: false` trains on each text as a row of its own).",
                    stats["remainder_tokens"], split, opts.block_len or opts.cutoff_len)
    if stats["truncated"] and stats["truncated"] * 2 >= stats["rows"]:
        logger.warning("%d of %s %s cut to %s, so part of %s text is not trained on; raise cutoff_len to keep "
                       "whole examples.", stats["truncated"], counted(stats["rows"], f"{split} row"),
                       was_were(stats["truncated"]), cutoff_phrase(opts), "its" if stats["truncated"] == 1 else "their")
    return (_to_dataset(columns) if media is not None else dataset), stats


def get_dataset(cfg: Any, tokenizer: Any, template: Any, media: Any = None) -> DatasetBundle:
    """Load, convert, split and tokenize the datasets of a run config.

    Uses ``cfg.finetuning.stage``, ``cfg.data`` (dataset, eval_dataset, dataset_dir, cutoff_len, max_samples,
    val_size, train_on_prompt, mask_history, packing/neat_packing, default_system, enable_thinking, tool_format,
    mix_strategy, interleave_probs, tokenized_path, overwrite_cache) and ``cfg.train.seed``. ``media`` (an
    :class:`engine.multimodal.dataset.MediaContext`, for a multimodal model) makes rows with media train on them.

    Raises:
        DatasetError: for any dataset problem, naming the dataset and the fix.
    """
    data = cfg.data
    cached = Path(data.tokenized_path).expanduser() if data.tokenized_path else None
    if cached is not None and cached.exists() and not data.overwrite_cache:
        loaded = _load_tokenized(cached)
        saved_fit.check(cached, [loaded.train, loaded.eval], cfg, tokenizer)
        split = loaded.train if loaded.train is not None else loaded.eval
        if media is not None and split is not None and "mm_inputs" in split.column_names:
            from engine.multimodal import refuse_unserved

            refuse_unserved(media)  # rows saved with media, for a model no plugin serves
            loaded.media = media
        loaded.origin = "tokenized_path"
        if data.streaming and loaded.train is not None:  # as LLaMA-Factory streams a saved set: in its saved order
            loaded.train = loaded.train.to_iterable_dataset()
        return loaded
    template = configured_template(cfg, template)
    if data.streaming:  # tokenized while training, never cached (engine.data.streaming)
        from engine.data.streaming import get_streaming_dataset

        train, evaluation, stats = get_streaming_dataset(cfg, tokenizer, template,  # refuses rows with media
                                                         tokenize_options(data, cfg.finetuning.stage))
        return DatasetBundle(train=train, eval=evaluation, stats=stats, origin="streamed")
    key = None
    if cached is None and media is None:  # a second run with the same data and settings skips tokenization
        from engine.data.cache import cache_key, entry_path, load_entry

        key = cache_key(cfg, tokenizer, template)
        hit = load_entry(key) if key and not data.overwrite_cache else None
        if hit is not None:
            hit.origin, hit.cache_entry = "cache", entry_path(key)
            _remember(cfg, key)
            return hit
    with collector.bulk_phase():
        bundle = _build(cfg, tokenizer, template, media)
    if cached is not None:
        _save_tokenized(bundle, cached)
        saved_fit.record(cached, cfg, tokenizer)
    elif key and bundle.media is None:
        from engine.data.cache import describe_source, save_entry

        bundle.cache_entry = save_entry(key, bundle, describe_source(cfg, tokenizer, template))
        if bundle.cache_entry is not None:
            _remember(cfg, key)
    return bundle


def _remember(cfg: Any, key: str) -> None:
    """Let `lf-engine data` find this entry without loading the tokenizer (engine.data.quick_key); one process of
    a distributed run writes it."""
    import os

    if os.environ.get("LOCAL_RANK", "0") == "0":
        from engine.data.quick_key import remember

        remember(cfg, key)


def tokenize_options(data: Any, stage: str) -> TokenizeOptions:
    """The tokenization settings of a data config (``cfg.data``) for ``stage``."""
    opts = TokenizeOptions(cutoff_len=data.cutoff_len, train_on_prompt=data.train_on_prompt,
                           mask_history=data.mask_history, packing=packs_rows(stage, data),
                           keep_prompt_end=getattr(data, "keep_prompt_end", False))
    if stage == "pt":  # LLaMA-Factory's pre-training rows: blocks unless `packing: false`; an explicit `packing:
        # true` makes them one token shorter there (its DataArguments take 1 off cutoff_len)
        opts.pt_documents = data.packing is False and not data.neat_packing
        opts.block_len = data.cutoff_len - 1 if data.packing is True and not data.neat_packing else None
        if opts.block_len is not None:
            opts.written_cutoff = data.cutoff_len
    elif stage == "sft" and opts.packing:  # LLaMA-Factory's DataArguments take 1 off cutoff_len when packing
        opts.cutoff_len, opts.mask_packed_starts = data.cutoff_len - 1, False
        opts.written_cutoff = data.cutoff_len
    elif data.packing or data.neat_packing:  # ... in every stage, though only pt and sft rows are packed
        opts.cutoff_len, opts.written_cutoff = data.cutoff_len - 1, data.cutoff_len
    return opts


def _build(cfg: Any, tokenizer: Any, template: Any, media: Any) -> DatasetBundle:
    """Load, split and tokenize (the part of :func:`get_dataset` after the cache lookups)."""
    data, stage, seed = cfg.data, cfg.finetuning.stage, cfg.train.seed
    opts = tokenize_options(data, stage)
    import numpy as np

    rng = np.random.RandomState(seed)  # num_samples draws, training datasets first (LLaMA-Factory's global one)
    stand_ins = stage == "kto"  # skipped rows take part in KTO's KL pairs (kl_stand_ins)
    layout: dict[str, Any] = {}  # the rows LLaMA-Factory splits, unusable ones included (it drops them after)
    train_examples = (load_examples(data, data.dataset, stage, seed, rng=rng, stand_ins=stand_ins, layout=layout)
                      if data.dataset else [])
    eval_layout: dict[str, Any] = {}
    eval_examples = (load_examples(data, data.eval_dataset, stage, seed, rng=rng, stand_ins=stand_ins,
                                   layout=eval_layout) if data.eval_dataset else [])
    if data.val_size and train_examples and not eval_examples:  # both set: refused with the config
        train_examples, eval_examples = split_eval(train_examples, data.val_size, seed, layout)
        layout, eval_layout = layout.get("parts", (layout, {}))  # a val_size of about 0 holds out nothing
    bundle = DatasetBundle()
    if media is not None and (count_media(train_examples) or count_media(eval_examples)):
        from engine.multimodal import refuse_unserved
        from engine.multimodal.dataset import check_stage

        refuse_unserved(media)
        check_stage(stage, itertools.chain(train_examples, eval_examples), getattr(cfg.finetuning, "pref_loss", None))
        bundle.media = media
    else:
        _without_media_model(stage, cfg.model.template, train_examples, eval_examples)
    if train_examples:
        bundle.train, bundle.stats["train"] = _tokenized(train_examples, stage, tokenizer, template, opts, "train",
                                                         bundle.media, data.preprocessing_num_workers,
                                                         data.preprocessing_batch_size, layout or None)
    if eval_examples:
        # packed like the training rows, as LLaMA-Factory packs its evaluation set (prediction prompts are
        # built apart, by load_eval_prompts)
        bundle.eval, bundle.stats["eval"] = _tokenized(eval_examples, stage, tokenizer, template, opts, "eval",
                                                       bundle.media, data.preprocessing_num_workers,
                                                       data.preprocessing_batch_size, eval_layout or None)
    if stage == "kto":  # pairs formed before the stand-ins of skipped rows leave
        from engine.data.kto_pairs import with_kl_pairs

        bundle.train = with_kl_pairs(bundle.train, data, train_examples) if bundle.train is not None else None
        bundle.eval = with_kl_pairs(bundle.eval, data, eval_examples) if bundle.eval is not None else None
    return bundle


def _without_media_model(stage: str, template: str | None, *parts: Sequence[dict]) -> None:
    """Rows with images, videos or audio for a model that takes text only: refused, as LLaMA-Factory 0.9.5's media
    plugin refuses them while it formats a conversation ("This model does not support image input. Please check
    whether the correct `template` is used.", or "Processor was not found" for a media template on a text model);
    pre-training reads only the text, there and here, so it is said and the text trained."""
    with_media = sum(count_media(part) for part in parts)
    if not with_media:
        return
    names = ", ".join(sorted({name for part in parts for name in media_dataset_names(part)}))
    rows = counted(sum(len(part) for part in parts), "row")
    if stage == "pt":
        logger.warning("%d of %s (%s) %s images, videos or audio; pre-training reads the text only, so the media "
                       "files are not given to the model and their placeholders stay in the text.", with_media, rows,
                       names, "has" if with_media == 1 else "have")
        return
    from engine.data.text_model_media import text_model_refusal  # lf-engine check says the same before the run

    raise DatasetError(text_model_refusal(f"{with_media} of {rows} ({names}) {'has' if with_media == 1 else 'have'}",
                                          template))


def _save_tokenized(bundle: DatasetBundle, path: Path) -> None:
    import json

    from engine.data.stream import save_splits
    from engine.runs import write_text_atomic

    splits = {name: ds for name, ds in (("train", bundle.train), ("eval", bundle.eval)) if ds is not None}
    save_splits(splits, path)
    # replaced whole: a link planted under this name in the user's folder is never written through
    write_text_atomic(path / "lf_stats.json", json.dumps(bundle.stats))
    logger.info("Tokenized data saved to %s.", path)


def _saved_stats(file: Path) -> dict[str, Any]:
    """The counts saved beside tokenized data (lf_stats.json, which LLaMA-Factory does not write: {} without one).
    Read only as a regular file of a bounded size; one that cannot be read is named and left out (the data loads)."""
    from engine.small_json import read_small_json, reason

    if not os.path.lexists(file):
        return {}
    try:
        stats = read_small_json(file)
        if not isinstance(stats, dict):
            raise ValueError("it holds no JSON object")
    except (OSError, ValueError, RecursionError) as err:
        logger.warning("%s cannot be read (%s), so the data's counts are not reported; delete it, or set "
                       "`overwrite_cache: true` to tokenize again.", file, reason(err))
        return {}
    return stats


def _load_tokenized(path: Path) -> DatasetBundle:
    from datasets import load_from_disk

    try:
        loaded = load_from_disk(str(path))
    except Exception as err:  # datasets raises FileNotFoundError or ValueError for foreign folders
        if not any((path / name).is_file() for name in ("dataset_dict.json", "state.json")):
            # not a save at all (a device, a file, someone's folder): deleting it, or saving over it, is no fix
            raise DatasetError(f"tokenized_path {path} is no folder of saved tokenized data (no dataset_dict.json or "
                               "state.json in it), and the data is loaded from it when it exists; set tokenized_path "
                               "to a new folder (the first run saves the data there).") from err
        raise DatasetError(f"tokenized_path {path} holds no saved dataset ({err}); delete it or set "
                           "overwrite_cache: true.") from err
    stats = _saved_stats(path / "lf_stats.json")
    logger.info("Tokenized data loaded from %s.", path)
    # LLaMA-Factory saves its evaluation split as `validation` (and `validation_NAME` per dataset)
    held = loaded.get("eval") or loaded.get("validation")
    per_name = sorted(key for key in loaded if key.startswith("validation_"))
    if held is None and per_name:
        logger.warning("tokenized_path %s holds evaluation sets per dataset (%s, LLaMA-Factory's eval_on_each_dataset), "
                       "which are not read from a saved folder here: set `overwrite_cache: true` to tokenize them "
                       "again.", path, ", ".join(per_name))
    return DatasetBundle(train=loaded.get("train"), eval=held, stats=stats)


def load_eval_prompts(cfg: Any, tokenizer: Any, template: Any, media: Any = None) -> list[dict[str, Any]]:
    """Prompts and reference answers for prediction.

    Rows come from ``eval_dataset``; without it, from the ``val_size`` split of ``dataset`` (same seed as
    training), or else from ``dataset`` itself. Each row: ``prompt_ids`` (the conversation before the last reply,
    with the generation prompt, cut as LLaMA-Factory cuts it: the first tokens of the share of ``cutoff_len`` the
    reply leaves it, or the last with ``keep_prompt_end``), ``prompt`` (its text), ``label`` (the reference reply as
    LLaMA-Factory's predictions file and scores have it: its token ids with the template's end of turn, cut to its
    share, decoded without special tokens), ``messages``, ``system`` and ``tools``.
    With ``media`` (a multimodal model's :class:`engine.multimodal.dataset.MediaContext`), rows with images, videos
    or audio get their soft tokens in ``prompt_ids`` and their processed media (``mm_inputs``); ``prompt`` keeps
    the placeholders.

    Raises:
        DatasetError: when no dataset is configured, or for any dataset problem.
    """
    data, seed = cfg.data, cfg.train.seed
    template = configured_template(cfg, template)
    if data.eval_dataset:
        examples = load_examples(data, data.eval_dataset, "sft", seed)
    elif data.dataset:
        layout: dict[str, Any] = {}
        examples = load_examples(data, data.dataset, "sft", seed, layout=layout)
        if data.val_size:
            examples = split_eval(examples, data.val_size, seed, layout)[1]
        else:
            logger.info("No eval_dataset or val_size: predicting on the training dataset %s.", data.dataset)
    else:
        raise DatasetError("Prediction needs data: set `eval_dataset` (or `dataset` with `val_size`).")
    if media is None:
        _without_media_model("sft", cfg.model.template, examples)
    from engine.data.tokenize import cut_prompt, fit_reply

    # LLaMA-Factory's DataArguments take 1 off cutoff_len when `packing` is set, for prediction rows too
    cutoff = data.cutoff_len - 1 if data.packing or data.neat_packing else data.cutoff_len
    opts = TokenizeOptions(cutoff_len=cutoff, keep_prompt_end=data.keep_prompt_end, written_cutoff=data.cutoff_len)
    rows = []
    for index, example in enumerate(examples):
        prompt_messages = example["messages"][:-1]
        # as LLaMA-Factory encodes a row for prediction: the prompt and the reply's ids (its template suffix too)
        # share cutoff_len as in training, and the label is the reply's ids decoded without special tokens
        prompt_ids, reply_ids = template.encode_oneturn(tokenizer, example["messages"], example.get("system"),
                                                        example.get("tools"))
        if template.uses_efficient_eos and tokenizer.eos_token_id is not None:
            reply_ids = [*reply_ids, tokenizer.eos_token_id]
        prompt_keep, reply_keep = fit_reply(len(prompt_ids), len(reply_ids), opts)
        prompt_ids = cut_prompt(prompt_ids, prompt_keep, opts)
        row = {
            "prompt_ids": prompt_ids,
            "prompt": tokenizer.decode(prompt_ids, skip_special_tokens=False),
            "label": tokenizer.decode(reply_ids[:reply_keep], skip_special_tokens=True),
            "messages": prompt_messages,
            "system": example.get("system", ""),
            "tools": example.get("tools", ""),
        }
        if media is not None and any(example.get(kind) for kind in ("images", "videos", "audios")):
            from engine.multimodal import refuse_unserved
            from engine.multimodal.predict import media_prompt_row

            refuse_unserved(media)
            row.update(media_prompt_row(example, prompt_messages, tokenizer, template, media, cutoff, index))
        rows.append(row)
    return rows


__all__ = [
    "CONVERTERS", "READERS", "DatasetBundle", "DatasetError", "DatasetSpec", "Examples", "PaddingCollator", "TokenizeOptions",
    "build_collator", "configured_template", "convert_rows", "get_dataset", "list_datasets", "load_dataset_info",
    "load_eval_prompts", "load_examples", "preview_dataset", "read_rows", "register_dataset", "resolve_dataset",
    "split_eval", "tokenize_examples", "tokenize_options",
]
