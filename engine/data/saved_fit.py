"""Whether the tokenized data in a ``tokenized_path`` fits the run that loads it.

The folder is loaded as it is, whatever the config says now (as in LLaMA-Factory). Data saved for another stage
lacks the columns this stage trains on, which ended in a ``KeyError`` traceback inside the trainer: that is a
:class:`DatasetError` naming the stage it was saved for. Data saved with another template or tokenizer has ids the
model was not trained to read: a warning names both. ``lf_tokenized.json`` beside the data records what it was made
with.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from engine.data.errors import DatasetError

logger = logging.getLogger(__name__)

MADE_WITH = "lf_tokenized.json"
STAGE_COLUMNS = {  # what each stage's trainer reads (engine/CONTRACTS.md: tokenized columns per stage)
    "pt": ("input_ids", "labels"), "sft": ("input_ids", "labels"), "rm": ("chosen_ids", "rejected_ids"),
    "dpo": ("prompt_ids", "chosen_ids", "rejected_ids"), "kto": ("prompt_ids", "completion_ids", "label"),
}


def _made_with(cfg: Any, tokenizer: Any) -> dict[str, Any]:
    return {"stage": cfg.finetuning.stage, "template": cfg.model.template,
            "tokenizer": str(getattr(tokenizer, "name_or_path", "") or ""),
            "vocab": len(tokenizer) if tokenizer is not None else None}


def record(path: Path, cfg: Any, tokenizer: Any) -> None:
    """Write what the data in ``path`` was tokenized for: a new file renamed over the old one, so that a link
    planted under that name (the folder is the user's) is replaced, never written through."""
    from engine.runs import write_text_atomic

    write_text_atomic(path / MADE_WITH, json.dumps(_made_with(cfg, tokenizer)))


def _saved(path: Path) -> dict[str, Any]:
    from engine.small_json import read_small_json, reason

    try:
        saved = read_small_json(path / MADE_WITH)
    except FileNotFoundError:  # tokenized by LLaMA-Factory, or before this file was written
        return {}
    except (OSError, ValueError, RecursionError) as err:
        logger.warning("%s cannot be read (%s); what the data was tokenized for is not checked. Delete it, or set "
                       "`overwrite_cache: true` to tokenize again.", path / MADE_WITH, reason(err))
        return {}
    return saved if isinstance(saved, dict) else {}


def check(path: Path, splits: list[Any], cfg: Any, tokenizer: Any) -> None:
    """Refuse data saved for another stage; warn about another template or tokenizer."""
    stage, saved = cfg.finetuning.stage, _saved(path)
    need = STAGE_COLUMNS.get(stage, ())
    for split in (s for s in splits if s is not None):
        missing = [name for name in need if name not in split.column_names]
        if missing:
            made_for = f" (saved for `stage: {saved['stage']}`)" if saved.get("stage") else ""
            raise DatasetError(
                f"tokenized_path {path} holds data tokenized for another stage{made_for}: stage {stage} trains on "
                f"{', '.join(need)}, and it lacks {', '.join(missing)} (its columns: "
                f"{', '.join(split.column_names)}). Set `overwrite_cache: true` to tokenize it again for this stage, "
                "or give another tokenized_path.")
    now = _made_with(cfg, tokenizer)
    changed = [f"{key} `{saved[key]}` (now `{now[key]}`)" for key in ("template", "tokenizer", "vocab")
               if key in saved and saved[key] != now[key]]
    if changed:
        logger.warning("tokenized_path %s was tokenized with %s: its token ids are loaded as they are, so the model "
                       "reads them with the wrong template or vocabulary. Set `overwrite_cache: true` to tokenize it "
                       "again.", path, "; ".join(changed))
