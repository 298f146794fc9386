"""A cache of tokenized datasets, so a second run with the same data and settings skips tokenization.

The key is a hash of everything the tokenized result depends on: the stage, the data settings (datasets, cutoff,
masking, packing, sampling, split, seed, template options), each dataset file's path, size and modification time
(and those of its dataset_info.json), the tokenizer (its vocabulary and rules, special tokens, chat template) and
the template. Change any of them and the key changes; ``overwrite_cache: true`` re-tokenizes and replaces the
entry. Hub datasets, media datasets and ``tokenized_path`` (the user's own saved copy) are not cached here.

Entries live in ``$LF_ENGINE_CACHE`` (default ``~/.cache/lf-engine``; ``off`` disables the cache) under
``tokenized/<key>``, as Arrow files that are memory-mapped when loaded. An entry is written to a temporary folder and renamed into place, so a killed run
leaves no half entry behind; an entry that cannot be read is ignored and rebuilt.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

FORMAT_VERSION = 1
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
        stamps.append([str(file.absolute()), stat.st_size, stat.st_mtime_ns])
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


def cache_key(cfg: Any, tokenizer: Any, template: Any) -> str | None:
    """The cache key of this run's tokenized data, or None when it cannot be cached (hub datasets)."""
    from engine.data.loader import split_names
    from engine.data.registry import info_path, resolve_dataset

    data = cfg.data
    if cache_root() is None:
        return None
    files: list[Any] = []
    for name in split_names(data.dataset) + split_names(data.eval_dataset):
        spec = resolve_dataset(name, data.dataset_dir)
        if getattr(spec, "hub", None):
            return None
        files.append([name, str(spec.path), _file_stamp(Path(spec.path))])
    info = info_path(data.dataset_dir)
    key = {
        "version": FORMAT_VERSION, "stage": cfg.finetuning.stage, "seed": cfg.train.seed,
        "data": {k: getattr(data, k, None) for k in DATA_KEYS if k != "preprocessing_num_workers"},
        "files": files, "info": _file_stamp(info) if info.is_file() else None,
        "tokenizer": _tokenizer_stamp(tokenizer), "template": _template_stamp(template),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def entry_path(key: str) -> Path:
    return cache_root() / "tokenized" / key


def load_entry(key: str) -> Any | None:
    """The cached DatasetBundle for ``key``, or None (absent or unreadable: it is then rebuilt)."""
    folder = entry_path(key)
    if not (folder / "lf_stats.json").is_file():
        return None
    from engine.data import DatasetBundle

    try:
        from datasets import load_from_disk

        loaded = load_from_disk(str(folder / "data"))
        stats = json.loads((folder / "lf_stats.json").read_text(encoding="utf-8"))
    except Exception as err:  # a damaged entry: tokenize again
        logger.warning("Ignoring the unreadable tokenized-data cache %s (%s); tokenizing again.", folder, err)
        return None
    logger.info("Tokenized data reused from the cache %s (overwrite_cache: true tokenizes again).", folder)
    return DatasetBundle(train=loaded.get("train"), eval=loaded.get("eval"), stats=stats)


def save_entry(key: str, bundle: Any) -> Path | None:
    """Store ``bundle`` under ``key`` atomically; returns the entry (None when the cache cannot be written)."""
    from datasets import DatasetDict

    folder = entry_path(key)
    splits = {name: ds for name, ds in (("train", bundle.train), ("eval", bundle.eval)) if ds is not None}
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{key}-", dir=folder.parent))
    except OSError as err:
        logger.warning("Tokenized data not cached (%s).", err)
        return None
    try:
        DatasetDict(splits).save_to_disk(str(tmp / "data"))
        (tmp / "lf_stats.json").write_text(json.dumps(bundle.stats), encoding="utf-8")
        if folder.exists():
            shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except OSError as err:  # disk full, permissions: training goes on without a cache entry
        shutil.rmtree(tmp, ignore_errors=True)
        logger.warning("Tokenized data not cached (%s).", err)
        return None
    return folder
