"""Pre-training and supervised fine-tuning: transformers' Trainer over our tokenized, loss-masked batches."""

from __future__ import annotations

from typing import Any

from transformers import Trainer, TrainingArguments

from engine.config import RunConfig
from engine.train.arguments import build_args


def build_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Trainer:
    """A Trainer for stage pt or sft; batches of similar length are grouped to cut padding."""
    from engine.data.collator import build_collator

    has_eval = bundle.eval is not None
    specific: dict[str, Any] = {}
    if cfg.train.group_by_length and not cfg.data.packing:
        specific["train_sampling_strategy"] = "group_by_length"
    args = build_args(TrainingArguments, cfg, has_eval=has_eval, **specific)
    return Trainer(
        model=model,
        args=args,
        train_dataset=bundle.train,
        eval_dataset=bundle.eval,
        data_collator=build_collator(tokenizer, cfg),
        processing_class=tokenizer,
        callbacks=callbacks,
    )
