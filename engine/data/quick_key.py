"""Finding a config's tokenized-data cache entry from files alone: no tokenizer load, no torch (``lf-engine data``).

The cache key (:func:`engine.data.cache.cache_key`) hashes the loaded tokenizer and template, so finding an entry
costs the imports and the tokenizer's load, seconds of a command that then has nothing to do. The quick key stands
for the same inputs by what they are made from, conservatively: the config's model and data settings (every key,
not only those that shape tokens), its stage and seed; the path, size and modification time of every file of
the model folder except the weights (the tokenizer's files, its config, its chat template); the data files and
dataset_info.json, as in the cache key; the versions of the libraries that load and run the tokenizer; and the
engine's own source files. Whenever a run finds or writes a cache entry it records ``quick key -> cache key`` in
``$LF_ENGINE_CACHE/quick/``; ``lf-engine data`` looks there first and otherwise loads the tokenizer as training
does. Any change to those inputs changes the quick key, so a stale record is never found, only orphaned (a few
bytes; removed when found pointing at an evicted entry, and by ``lf-engine cache --clear``).

Only a model in a local folder has a quick key (a hub id or the built-in demo, which is rebuilt when its stamp
changes, go the full way, even where a folder of the demo's name is in the working directory).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

QUICK = "quick"
"""The folder of quick-key records, beside ``tokenized/`` in the cache."""

QUICK_VERSION = 1
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".gguf", ".ckpt", ".h5", ".msgpack", ".onnx", ".npz")
LIBRARIES = ("transformers", "tokenizers", "sentencepiece", "tiktoken", "jinja2", "datasets", "pyarrow", "numpy",
             "protobuf")
SECTIONS = ("model", "data")
UNSHAPING = {"resize_vocab"}
"""Keys a job changes after loading the tokenizer (a template that adds tokens turns resize_vocab on) and that do
not shape the tokens: left out, so a training run's record is found by the config as written."""


def _version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def _stamps(files: list[Path]) -> list[list[Any]]:
    """Path, size and mtime of each file (the cache key's stamps, :func:`engine.data.cache._file_stamp`)."""
    from engine.data.cache import _file_stamp

    return [stamp for file in sorted(files) for stamp in _file_stamp(file)]


def _model_files(folder: Path) -> list[list[Any]]:
    """Stamps of the model folder's files other than weights, its subfolders' too (transformers reads chat templates
    from ``additional_chat_templates/``), but not those of checkpoints saved inside it."""
    files = []
    try:
        for path in folder.rglob("*"):
            inside = path.relative_to(folder).parts
            if any(part.startswith("checkpoint-") for part in inside[:-1]) or not path.is_file():
                continue
            if not path.name.endswith(WEIGHT_SUFFIXES):
                files.append(path)
    except OSError:
        return []
    return _stamps(files)


def _engine_files() -> list[list[Any]]:
    root = Path(__file__).resolve().parents[1]
    return _stamps(list(root.rglob("*.py")))


def _local_folder(value: Any) -> Path | None:
    """The model folder a name stands for, when it is a local folder that the loader would use as it is."""
    from engine.demo_names import is_demo_name

    if not isinstance(value, str) or not value.strip():
        return None
    if is_demo_name(value):
        return None  # the built-in demo (rebuilt when its stamp changes), even with a folder of that name here
    path = Path(value).expanduser()
    return path.resolve() if (path / "config.json").is_file() else None


def quick_key(cfg: Any) -> str | None:
    """The quick key of this config's tokenized data, or None (a model not in a local folder, a hub dataset,
    ``tokenized_path``, or the cache off)."""
    from engine.data.cache import cache_root, data_stamps

    if cache_root() is None or cfg.data.tokenized_path:
        return None
    model = _local_folder(cfg.model.model_name_or_path)
    if model is None:
        return None
    files = data_stamps(cfg)
    if files is None:
        return None
    adapters = [_local_folder(a.strip()) for a in str(cfg.model.adapter_name_or_path or "").split(",") if a.strip()]
    settings = {name: _section(getattr(cfg, name)) for name in SECTIONS}
    settings["stage"] = cfg.finetuning.stage  # of the method's settings, what the tokenized data depends on
    settings["pref_loss"] = getattr(cfg.finetuning, "pref_loss", None)
    key = {
        "quick": QUICK_VERSION, "settings": settings, "seed": cfg.train.seed, "data": files,
        "model": [str(model), _model_files(model)],
        "adapters": [[str(a), _model_files(a)] if a else None for a in adapters],
        "libraries": {name: _version(name) for name in LIBRARIES}, "engine": _engine_files(),
    }
    return hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode("utf-8")).hexdigest()[:32]


def _section(section: Any) -> dict[str, Any]:
    return {f.name: getattr(section, f.name) for f in dataclasses.fields(section) if f.name not in UNSHAPING}


def _record(quick: str) -> Path:
    from engine.data.cache import cache_root

    return cache_root() / QUICK / f"{quick}.json"


def remember(cfg: Any, key: str) -> None:
    """Record that this config's data is cache entry ``key`` (atomically; a failure only costs the quick lookup)."""
    try:
        quick = quick_key(cfg)
        if quick is None:
            return
        record = _record(quick)
        record.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=record.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump({"key": key}, handle)
            os.replace(tmp, record)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError as err:  # a full disk or a read-only cache: the next `lf-engine data` loads the tokenizer
        logger.debug("The quick-key record was not written (%s).", err)


MAX_RECORD_BYTES = 64 << 10
"""A record is one short JSON object (the cache key); one past this is no record of ours."""


def _recorded_key(record: Path) -> Any:
    """The cache key a record holds, read only as a regular file of at most :data:`MAX_RECORD_BYTES`.

    Raises:
        OSError, ValueError, KeyError, TypeError, RecursionError: not a readable record.
    """
    from engine.small_json import read_small_json

    return read_small_json(record, MAX_RECORD_BYTES)["key"]


def lookup(cfg: Any) -> Path | None:
    """The complete cache entry an earlier run recorded for this config's inputs; None otherwise."""
    from engine.data import cache_prune
    from engine.data.cache import FORMAT_VERSION, entry_path

    quick = quick_key(cfg)
    if quick is None:
        return None
    record = _record(quick)
    try:
        key = _recorded_key(record)
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as err:
        from engine.small_json import reason

        logger.info("The quick-key record %s cannot be read (%s); the tokenizer is loaded to find the cache entry.",
                    record, reason(err) if not isinstance(err, (KeyError, TypeError)) else "no key in it")
        return None
    if not isinstance(key, str) or not key.isalnum():
        return None
    folder = entry_path(key)
    meta = cache_prune.read_meta(folder)  # checks every file of the entry against its manifest
    if meta is None or meta.get("version") != FORMAT_VERSION:
        if not folder.exists():
            record.unlink(missing_ok=True)  # evicted: the record is of no more use
        return None
    return folder


def forget_evicted(root: Path) -> int:
    """Remove the records whose entries are gone (after ``lf-engine cache --prune`` / ``--clear``); how many."""
    removed = 0
    try:
        records = list((root / QUICK).glob("*.json"))
    except OSError:
        return 0
    for record in records:
        try:
            key = _recorded_key(record)
            gone = not (root / "tokenized" / str(key)).exists()
        except (OSError, ValueError, KeyError, TypeError, RecursionError):
            gone = True  # unreadable: of no use
        if gone:
            try:
                record.unlink()
                removed += 1
            except OSError:
                pass
    return removed
