"""``lf-engine data``: tokenize a config's datasets as its training run will, without loading the model, and say
what came out (rows kept, cut and dropped, tokens trained on) and where it is kept.

A training run with the same config then loads the result instead of tokenizing: from the tokenized-data cache
(:mod:`engine.data.cache`), or from ``tokenized_path`` where the config sets one. Data that is already tokenized
is found from the files alone when it can be (:mod:`engine.data.quick_key`: no tokenizer load, no torch), so asking
again costs a fraction of a second.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from engine.wording import counted

logger = logging.getLogger(__name__)


def _count(value: Any) -> str:
    return f"{int(value):,}" if isinstance(value, (int, float)) else "?"


def _counted(value: Any, noun: str) -> str:
    """``value`` and ``noun`` agreeing (:func:`engine.wording.counted`); "?" and the plural for a count it cannot
    read."""
    return counted(int(value), noun) if isinstance(value, (int, float)) else f"? {noun}s"


def split_lines(stats: dict[str, Any], cutoff_len: int, prompts: bool = False) -> list[str]:
    """One line per split: rows in, sequences (or prompts) out, what was cut or dropped, tokens."""
    lines = []
    for split in ("train", "eval"):
        part = stats.get(split)
        if not part or not isinstance(part, dict):  # a saved lf_stats.json from elsewhere can hold anything
            continue
        unit = "prompt" if prompts else "sequence"
        notes = [f"{_count(part.get('truncated', 0))} cut to cutoff_len {cutoff_len}"]
        if part.get("dropped"):
            notes.append(f"{_count(part['dropped'])} {'without a prompt' if prompts else 'dropped'}")
        if part.get("untrained"):
            notes.append(f"{_count(part['untrained'])} with no trained token left")
        if part.get("remainder_tokens"):
            notes.append(f"{_count(part['remainder_tokens'])} tokens short of a last block left out")
        tokens = f"{_count(part.get('total_tokens'))} tokens"
        if not prompts:
            tokens += f", {_count(part.get('trainable_tokens'))} trained on"
        lines.append(f"{split}: {_counted(part.get('rows'), 'row')} -> {_counted(part.get('kept'), unit)} "
                     f"({', '.join(notes)}); {tokens}")
    return lines


def quick_report(cfg: Any) -> list[str] | None:
    """The report for data an earlier run already tokenized with these inputs, found from the files alone; None
    when there is none to find that way (the caller then tokenizes, or finds it after loading the tokenizer)."""
    from engine.data import cache_prune
    from engine.data.quick_key import lookup

    if cfg.data.streaming:  # prepare() says why a stream has nothing to prepare
        return None
    folder = lookup(cfg)
    if folder is None:
        return None
    from engine.small_json import read_small_json, reason

    try:
        stats = read_small_json(folder / "lf_stats.json")
        if not isinstance(stats, dict):
            raise ValueError("it holds no JSON object")
    except (OSError, ValueError, RecursionError) as err:
        logger.info("The cache entry %s is not reused: %s cannot be read (%s); its data is tokenized again.", folder,
                    folder / "lf_stats.json", reason(err))
        return None
    cache_prune.touch(folder)
    return [*split_lines(stats, cfg.data.cutoff_len),
            f"Already tokenized: cache entry {folder}. `lf-engine train` with this config loads it instead of "
            "tokenizing (`overwrite_cache: true` tokenizes again)."]


def prepare(cfg: Any) -> list[str]:
    """Tokenize (or find) the config's data as its training run would; the report's lines."""
    from engine import collector
    from engine.models.tokenizer_setup import load_text_components
    from engine.train.rl_checks import RL_STAGES

    if cfg.data.streaming:
        from engine.data.errors import DatasetError

        raise DatasetError("`streaming: true`: the rows are tokenized while training, so there is nothing to tokenize "
                           "ahead of it; remove `streaming` to tokenize (and cache) the data now.")
    tokenizer, template = load_text_components(cfg)
    collector.settle()
    if cfg.finetuning.stage in RL_STAGES:
        from engine.train.rl import get_prompt_dataset

        bundle = get_prompt_dataset(cfg, tokenizer, template)
        return [*split_lines(bundle.stats, cfg.data.cutoff_len, prompts=True),
                f"Prompts for {cfg.finetuning.stage} are read from the data at the start of each run (they are quick "
                "to make); nothing is kept."]
    from engine.data import get_dataset
    from engine.multimodal import media_context

    bundle = get_dataset(cfg, tokenizer, template, media=media_context(cfg, tokenizer))
    lines = [*split_lines(bundle.stats, cfg.data.cutoff_len), _where(cfg, bundle)]
    if cfg.data.eval_on_each_dataset and cfg.data.eval_dataset:
        lines.append("With eval_on_each_dataset, a training run tokenizes each evaluation dataset again on its own "
                     "(those sets are not kept); the line above holds the training data.")
    return lines


def _where(cfg: Any, bundle: Any) -> str:
    from engine.data.cache import cache_root

    loads = "`lf-engine train` with this config loads it instead of tokenizing"
    if bundle.origin == "tokenized_path":
        return (f"Already tokenized: tokenized_path {cfg.data.tokenized_path}. {loads} (`overwrite_cache: true` "
                "tokenizes again).")
    if bundle.origin == "cache":
        return f"Already tokenized: cache entry {bundle.cache_entry}. {loads} (`overwrite_cache: true` tokenizes again)."
    if cfg.data.tokenized_path:
        return f"Tokenized and saved in tokenized_path {Path(cfg.data.tokenized_path).expanduser()}; {loads}."
    if bundle.cache_entry is not None:
        return f"Tokenized and cached in {bundle.cache_entry}; {loads}."
    if bundle.media is not None:
        reason = ("rows with images, videos or audio are not kept in the cache; set `tokenized_path: FOLDER` to keep "
                  "them")
    elif cache_root() is None:
        reason = "the cache is off (LF_ENGINE_CACHE); set `tokenized_path: FOLDER` to keep it"
    elif _from_hub(cfg):
        reason = "hub datasets are not kept in the cache; set `tokenized_path: FOLDER` to keep it"
    else:
        reason = "the cache could not be written (see the warning above); set `tokenized_path: FOLDER` to keep it"
    return f"Tokenized, but not kept: {reason}. A training run tokenizes it again."


def _from_hub(cfg: Any) -> bool:
    from engine.data.cache import data_stamps

    try:
        return data_stamps(cfg) is None
    except Exception:  # noqa: BLE001 - only chooses the wording of the reason
        return False
