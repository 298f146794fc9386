"""``eval_on_each_dataset``: each dataset of ``eval_dataset`` tokenized as an evaluation set of its own, so that the
Trainer evaluates them one by one (``eval_NAME_loss``, ...), as LLaMA-Factory does with the same key."""

from __future__ import annotations

import dataclasses
from typing import Any


def eval_sets_by_name(cfg: Any, tokenizer: Any, template: Any, media: Any = None) -> dict[str, Any]:
    """Dataset name -> its tokenized evaluation rows, in ``eval_dataset``'s order (each cached on its own)."""
    from engine.data import get_dataset
    from engine.data.loader import split_names

    sets: dict[str, Any] = {}
    for name in split_names(cfg.data.eval_dataset):
        data = dataclasses.replace(cfg.data, dataset=None, eval_dataset=name, val_size=0.0, tokenized_path=None)
        sets[name] = get_dataset(dataclasses.replace(cfg, data=data), tokenizer, template, media).eval
    return sets
