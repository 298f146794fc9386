"""Map our typed config onto Hugging Face / TRL training-argument classes."""

from __future__ import annotations

import json
import logging
import os
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.train.parallel.deepspeed import validate as validate_deepspeed
from engine.train.parallel.fsdp import resolve_fsdp
from engine.train.parallel.nd import training_kwargs as nd_kwargs

logger = logging.getLogger(__name__)


def _has_accelerator() -> bool:
    from engine import devices

    return devices.get_accelerator().type != "cpu"


def _checkpointing_key() -> str:
    """transformers 5.x renamed gradient_checkpointing to activation_checkpointing."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return "activation_checkpointing" if "activation_checkpointing" in names else "gradient_checkpointing"


_CHECKPOINTING = _checkpointing_key()


def training_kwargs(cfg: RunConfig, *, has_eval: bool) -> dict[str, Any]:
    """Keyword arguments shared by ``transformers.TrainingArguments`` and TRL's configs."""
    tr = cfg.train
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    validate_deepspeed(cfg, world_size)  # offload keys, batch sizes, precision, installed: before the model loads
    eval_strategy = tr.eval_strategy if has_eval else "no"
    kwargs: dict[str, Any] = {
        "output_dir": tr.output_dir,
        "do_train": tr.do_train,
        "do_eval": tr.do_eval,
        "do_predict": tr.do_predict,
        "per_device_train_batch_size": tr.per_device_train_batch_size,
        "per_device_eval_batch_size": tr.per_device_eval_batch_size,
        "gradient_accumulation_steps": tr.gradient_accumulation_steps,
        "learning_rate": tr.learning_rate,
        "num_train_epochs": tr.num_train_epochs,
        "max_steps": tr.max_steps,
        "lr_scheduler_type": tr.lr_scheduler_type,
        "warmup_steps": tr.warmup_steps if tr.warmup_steps > 0 else tr.warmup_ratio,
        "weight_decay": tr.weight_decay,
        "max_grad_norm": tr.max_grad_norm,
        "optim": tr.optim,
        "logging_steps": tr.logging_steps,
        "save_strategy": tr.save_strategy,
        "save_steps": tr.save_steps,
        "save_total_limit": tr.save_total_limit,
        "eval_strategy": eval_strategy,
        "eval_steps": tr.eval_steps if eval_strategy == "steps" else None,
        "seed": tr.seed,
        "bf16": tr.bf16 and not tr.pure_bf16,
        "fp16": tr.fp16,
        "report_to": [] if tr.report_to in ("none", "", None) else tr.report_to.split(","),
        "dataloader_num_workers": tr.dataloader_num_workers,
        "ddp_timeout": tr.ddp_timeout,
        "deepspeed": tr.deepspeed,
        "remove_unused_columns": False,
        "include_num_input_tokens_seen": "non_padding",
        "disable_tqdm": True,
        "logging_first_step": True,
        "save_only_model": False,
        "dataloader_pin_memory": _has_accelerator(),
    }
    if tr.lr_scheduler_kwargs:  # a mapping's JSON text (the loader made it so)
        kwargs["lr_scheduler_kwargs"] = json.loads(tr.lr_scheduler_kwargs)
    if getattr(cfg.data, "streaming", False):  # the one process reads the stream itself: accelerate would dispatch
        # an iterable dataset's batches, slicing every tensor along the rows (padding-free batches' offsets too)
        kwargs["accelerator_config"] = {"dispatch_batches": False}
    if tr.gradient_checkpointing:
        kwargs[_CHECKPOINTING] = True
        kwargs[f"{_CHECKPOINTING}_kwargs"] = {"use_reentrant": False}
    if not _has_accelerator():
        kwargs["use_cpu"] = True  # transformers refuses bf16 mixed precision on the CPU without it
        if int(os.environ.get("WORLD_SIZE", "1")) > 1:  # torchrun on CPUs: DDP/FSDP over gloo
            kwargs.setdefault("ddp_backend", "gloo")
    fsdp_config = resolve_fsdp(tr.fsdp, tr.fsdp_config, tr.fsdp_transformer_layer_cls_to_wrap)  # legacy words folded in: no deprecation warning
    if fsdp_config is not None and int(os.environ.get("WORLD_SIZE", "1")) == 1:
        logger.warning("`fsdp` is set but this is a single process, so nothing is sharded: training unsharded. "
                       "Launch with torchrun (`torchrun --nproc-per-node N -m engine train ...`) to shard.")
    elif fsdp_config is not None:
        kwargs["fsdp"] = True
        kwargs["fsdp_config"] = fsdp_config
    kwargs.update(nd_kwargs(cfg, world_size, "cpu" if not _has_accelerator() else "accelerator"))
    if tr.save_strategy == "best" or cfg.methods.early_stopping_steps:
        kwargs["load_best_model_at_end"] = True
        kwargs["metric_for_best_model"] = "eval_loss"
    kwargs.update(cfg.extra)
    return kwargs


def build_args(cls: type, cfg: RunConfig, *, has_eval: bool, **specific: Any) -> Any:
    """Instantiate ``cls`` (TrainingArguments or a TRL config) from the config plus stage-specific values."""
    kwargs = training_kwargs(cfg, has_eval=has_eval)
    kwargs.update(specific)
    try:
        return cls(**kwargs)
    except (ValueError, TypeError) as err:
        raise UserError(f"The training arguments were refused: {err}") from None
