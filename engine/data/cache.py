"""A cache of tokenized datasets, so a second run with the same data and settings skips tokenization.

The key is a hash of everything the tokenized result depends on: the stage, the data settings (datasets, cutoff,
masking, packing, sampling, split, seed, template options), each dataset file's path, size and modification time
(and those of its dataset_info.json), the tokenizer (its vocabulary and rules, special tokens, chat template) and
the template. Change any of them and the key changes; ``overwrite_cache: true`` re-tokenizes and replaces the
entry. Hub datasets, media datasets and ``tokenized_path`` (the user's own saved copy) are not cached here.

Entries live in ``$LF_ENGINE_CACHE`` (default ``~/.cache/lf-engine``; ``off`` disables the cache) under
``tokenized/<key>``, as Arrow files that are memory-mapped when loaded. An entry is written to a temporary folder
and renamed into place, so a killed run leaves no half entry behind; an entry that is incomplete or cannot be read
is ignored and rebuilt. The cache is kept under ``$LF_ENGINE_CACHE_MAX_GB`` (default 20) by evicting the least
recently used entries after each write (:mod:`engine.data.cache_prune`; ``lf-engine cache`` lists, prunes and
clears it).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from engine.config.schema import packs_rows
from engine.data import cache_prune

logger = logging.getLogger(__name__)

FORMAT_VERSION = 19  # 4: CSV values as datasets reads them (None, numbers); 5: no undesirable KTO rows outside kto;
# 6: an alpaca reply that is a list (no `ranking`) is no reply, as in LLaMA-Factory; 7: a sharegpt turn without
# text refuses its dataset; 8: only a boolean kto_tag makes a KTO row; 9: a null history turn or openai
# content refuses it too; 10: a number where text belongs is no text; 11: KTO sets carry their KL pairs, formed
# with the skipped rows' stand-ins; 12: preserve_thinking keeps history thoughts of preference/KTO prompts with
# thinking off too; 13: KTO rows keep their prompt's reply-dependent empty thought block for exact KL pairs;
# 14: a desirable KTO row with an empty or null reply is kept by kto as an undesirable one with the empty reply
# 15: video frames become RGB through BT.601 whatever their colour tags, as PyAV 16 (LLaMA-Factory's) converts them
# 16: interleaving, val_size and packed batches take skipped rows too (LLaMA-Factory drops them inside its batches)
# 17: an openai entry's object tool-call arguments and tools get the whole file's keys (Arrow), as LLaMA-Factory's
# 18: a .json list's fractions and NaN read as pandas reads them for LLaMA-Factory (some long fractions rounded)
# 19: a .json list's columns named like dates (date, created_at...) hold dates where pandas reads them so, and
# JSON lines' columns of ISO dates where pyarrow does
"""Bump when tokenization changes what it produces for the same inputs: old entries are then never matched."""

DATA_KEYS = (
    "dataset", "eval_dataset", "dataset_dir", "cutoff_len", "max_samples", "val_size", "train_on_prompt",
    "mask_history", "packing", "neat_packing", "keep_prompt_end", "default_system", "enable_thinking", "tool_format",
    "mix_strategy", "interleave_probs", "preserve_thinking", "preprocessing_num_workers",
)


OFF = ("0", "off", "none", "false", "no")


def cache_root() -> Path | None:
    """``$LF_ENGINE_CACHE``, else ``~/.cache/lf-engine``; None when that variable says ``off``."""
    value = os.environ.get("LF_ENGINE_CACHE", "")
    if value.strip().lower() in OFF:
        return None
    return Path(value or Path.home() / ".cache" / "lf-engine").expanduser()


def _file_stamp(path: Path) -> list[Any]:
    """Path, size and mtime of a file, or of every file inside a folder (sorted)."""
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    stamps = []
    for file in files:
        try:
            stat = file.stat()
        except OSError:
            continue
        stamps.append([str(file.resolve()), stat.st_size, stat.st_mtime_ns])
    return stamps


def _tokenizer_stamp(tokenizer: Any) -> str:
    digest = hashlib.sha256()
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        digest.update(backend.to_str().encode("utf-8"))
    else:  # a slow tokenizer: its vocabulary stands for it
        digest.update(json.dumps(sorted(tokenizer.get_vocab().items())).encode("utf-8"))
    extra = {
        "class": type(tokenizer).__name__, "len": len(tokenizer),
        "special": {k: str(v) for k, v in sorted((getattr(tokenizer, "special_tokens_map", None) or {}).items())},
        "chat_template": str(getattr(tokenizer, "chat_template", None)),
        "padding_side": getattr(tokenizer, "padding_side", None),
        "truncation_side": getattr(tokenizer, "truncation_side", None),
        "add_bos": getattr(tokenizer, "add_bos_token", None), "add_eos": getattr(tokenizer, "add_eos_token", None),
    }
    digest.update(json.dumps(extra, sort_keys=True).encode("utf-8"))
    return digest.hexdigest()


def _template_stamp(template: Any) -> str:
    """The template's compared fields (a template parsed from a chat template: its slots)."""
    if dataclasses.is_dataclass(template):
        fields = {f.name: getattr(template, f.name) for f in dataclasses.fields(template) if f.compare}
        return type(template).__name__ + json.dumps(fields, sort_keys=True, default=str)
    return repr(template)


def _local_dir(value: Any) -> Any:
    """A dataset folder as one spelling (``data`` and ``./data`` and its absolute path are one entry); other values
    (none, a hub name) as given."""
    if isinstance(value, str) and value and Path(value).expanduser().is_dir():
        return str(Path(value).expanduser().resolve())
    return value


def data_stamps(cfg: Any) -> tuple[list[Any], Any] | None:
    """Each dataset file's name, path and stamps, and dataset_info.json's; None for a hub dataset (not cached)."""
    from engine.data.loader import split_names
    from engine.data.registry import info_path, resolve_dataset

    data = cfg.data
    files: list[Any] = []
    for name in split_names(data.dataset) + split_names(data.eval_dataset):
        spec = resolve_dataset(name, data.dataset_dir)
        if getattr(spec, "hub", None):
            return None
        files.append([name, str(Path(spec.path).expanduser().resolve()), _file_stamp(Path(spec.path))])
    info = info_path(data.dataset_dir)
    return files, _file_stamp(info) if info.is_file() else None


def cache_key(cfg: Any, tokenizer: Any, template: Any) -> str | None:
    """The cache key of this run's tokenized data, or None when it cannot be cached (hub datasets)."""
    data = cfg.data
    if cache_root() is None:
        return None
    stamps = data_stamps(cfg)
    if stamps is None:
        return None
    files, info = stamps
    key = {
        "version": FORMAT_VERSION, "stage": cfg.finetuning.stage, "seed": cfg.train.seed,
        "data": {k: _local_dir(getattr(data, k, None)) if k == "dataset_dir" else getattr(data, k, None)
                 for k in DATA_KEYS if k != "preprocessing_num_workers"},
        # pre-training blocks join texts, and KTO rows pair, within the preprocessing batches these two shape
        "batches": [data.preprocessing_batch_size, data.preprocessing_num_workers]
        if cfg.finetuning.stage in ("pt", "kto") or packs_rows(cfg.finetuning.stage, data) else None,
        "files": files, "info": info,
        "tokenizer": _tokenizer_stamp(tokenizer), "template": _template_stamp(template),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def entry_path(key: str) -> Path:
    return cache_root() / "tokenized" / key


def describe_source(cfg: Any, tokenizer: Any, template: Any) -> dict[str, Any]:
    """What an entry came from, for ``lf-engine cache``: stage, datasets, tokenizer and template names."""
    data = cfg.data
    return {"stage": cfg.finetuning.stage, "dataset": data.dataset, "eval_dataset": data.eval_dataset,
            "dataset_dir": str(Path(data.dataset_dir).expanduser().absolute()) if data.dataset_dir else None,
            "cutoff_len": data.cutoff_len, "tokenizer": getattr(tokenizer, "name_or_path", None) or None,
            "template": getattr(template, "name", None) or getattr(data, "template", None)}


def load_entry(key: str) -> Any | None:
    """The cached DatasetBundle for ``key``, or None (absent, incomplete or unreadable: it is then rebuilt).

    Loading holds the entry (a shared lock until the process ends) so that no prune removes it while its data is
    memory-mapped here, and marks it used now.
    """
    folder = entry_path(key)
    if not (folder / cache_prune.META).is_file():
        return None
    if not cache_prune.hold(folder.parent, key):
        logger.info("The tokenized-data cache entry %s is being removed; tokenizing again.", folder)
        return None
    if cache_prune.read_meta(folder) is None:
        cache_prune.release(key)
        if not folder.exists():  # evicted while this process waited for it
            return None
        logger.warning("Ignoring the incomplete tokenized-data cache entry %s (a file is missing or cut short); "
                       "tokenizing again.", folder)
        return None
    from engine.data import DatasetBundle

    try:
        from datasets import load_from_disk

        from engine.small_json import read_small_json

        loaded = load_from_disk(str(folder / "data"))
        stats = read_small_json(folder / "lf_stats.json")  # bounded: a regular file of at most 16 MB
        if not isinstance(stats, dict):
            raise ValueError(f"{folder / 'lf_stats.json'} holds no JSON object")
    except Exception as err:  # a damaged entry: tokenize again
        cache_prune.release(key)
        logger.warning("Ignoring the unreadable tokenized-data cache %s (%s); tokenizing again.", folder, err)
        return None
    cache_prune.touch(folder)
    logger.info("Tokenized data reused from the cache %s (overwrite_cache: true tokenizes again).", folder)
    return DatasetBundle(train=loaded.get("train"), eval=loaded.get("eval"), stats=stats)


def save_entry(key: str, bundle: Any, source: dict[str, Any] | None = None) -> Path | None:
    """Store ``bundle`` under ``key`` atomically, then apply the size cap; the entry (None when not written).

    ``source`` (see :func:`describe_source`) is kept in the entry's meta for ``lf-engine cache``.
    """
    from engine.data.stream import save_splits

    folder = entry_path(key)
    tokenized = folder.parent
    splits = {name: ds for name, ds in (("train", bundle.train), ("eval", bundle.eval)) if ds is not None}
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    except OSError as err:
        logger.warning("Tokenized data not cached (%s).", err)
        return None
    writing = cache_prune.writing_lock(tmp)  # a prune leaves this folder alone while the lock is held
    try:
        save_splits(splits, tmp / "data")
        (tmp / "lf_stats.json").write_text(json.dumps(bundle.stats), encoding="utf-8")
        (tmp / cache_prune.USED).touch()
        meta = {"version": FORMAT_VERSION, "key": key, "created": time.time(), "source": source or {},
                "files": cache_prune.manifest(tmp)}
        (tmp / cache_prune.META).write_text(json.dumps(meta, default=str), encoding="utf-8")  # last: complete now
        (tmp / cache_prune.WRITING_LOCK).unlink(missing_ok=True)
        if not cache_prune.publish(tokenized, tmp, folder):  # the entry there is in use: it stays
            shutil.rmtree(tmp, ignore_errors=True)
            logger.info("The tokenized-data cache entry %s is in use by another process; kept it as it is.", folder)
            return folder if cache_prune.read_meta(folder) is not None else None
    except OSError as err:  # disk full, permissions: training goes on without a cache entry
        shutil.rmtree(tmp, ignore_errors=True)
        if cache_prune.read_meta(folder) is not None:  # another process wrote the same entry meanwhile
            return folder
        logger.warning("Tokenized data not cached (%s).", err)
        return None
    finally:
        if writing is not None:
            os.close(writing)
    cache_prune.prune_after_write(tokenized, key)
    return folder
