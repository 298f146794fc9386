"""Optimizer methods LLaMA-Factory exposes, each on the library that owns it, and PiSSA's converted save.

- LoRA+ (``loraplus_lr_ratio``): PEFT's ``create_loraplus_optimizer`` (B matrices at ``lr * ratio``).
- GaLore (``use_galore``) and APOLLO (``use_apollo``): transformers' optimizer names (``galore_adamw``,
  ``apollo_adamw`` and their layer-wise variants) over galore-torch / apollo-torch, with the target modules and
  the method's rank, interval, scale and projection passed as ``optim_target_modules`` / ``optim_args``.
- BAdam (``use_badam``): the badam package's ``BlockOptimizer`` (layer mode) or ``BlockOptimizerRatio`` (ratio
  mode) around the Trainer's own optimizer class, with its ``BAdamCallback``.
- Adam-mini (``use_adam_mini``): the adam-mini package's ``Adam_mini`` over the named parameters, told the language
  model's width and head counts (it gives queries and keys one learning rate per head), as LLaMA-Factory builds it.
- PiSSA: the initial adapter is kept so the final adapter is saved converted to plain LoRA (PEFT's
  ``path_initial_model_for_weight_conversion``), which loads correctly on the original base model.

:func:`configure_trainer` applies the first five to any ``transformers.Trainer`` (TRL's included).
"""

from __future__ import annotations

import logging
import types
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

from engine.errors import UserError

logger = logging.getLogger(__name__)

PISSA_INIT_DIR = "pissa_init"
"""Sub-folder of output_dir holding the PiSSA adapter as initialised (needed for the conversion)."""


def _target_modules(model: Any, value: str, finetuning_args: Any) -> list[str]:
    from engine.models.adapters import find_all_linear_modules, split_names

    if value.strip().lower() in ("all", "all-linear", ""):
        return find_all_linear_modules(model, None, finetuning_args)
    return split_names(value)


def low_rank_optimizer_args(cfg: Any, model: Any) -> dict[str, Any] | None:
    """``optim``, ``optim_target_modules`` and ``optim_args`` for GaLore or APOLLO (None when neither is on)."""
    m = cfg.methods
    if m.use_galore:
        name = "galore_adamw_layerwise" if m.galore_layerwise else "galore_adamw"
        targets = _target_modules(model, m.galore_target, cfg.finetuning)
        args = {"rank": m.galore_rank, "update_proj_gap": m.galore_update_interval, "scale": m.galore_scale,
                "proj_type": m.galore_proj_type}
    elif m.use_apollo:
        name = "apollo_adamw_layerwise" if m.apollo_layerwise else "apollo_adamw"
        targets = _target_modules(model, m.apollo_target, cfg.finetuning)
        args = {"rank": m.apollo_rank, "update_proj_gap": m.apollo_update_interval, "scale": m.apollo_scale,
                "proj": m.apollo_proj, "proj_type": m.apollo_proj_type, "scale_type": m.apollo_scale_type}
    else:
        return None
    return {"optim": name, "optim_target_modules": targets,
            "optim_args": ",".join(f"{k}={v}" for k, v in args.items())}


def build_loraplus_optimizer(model: Any, args: Any, cfg: Any):
    """PEFT's LoRA+ optimizer with the Trainer's optimizer class and settings."""
    from peft.optimizers import create_loraplus_optimizer
    from transformers import Trainer

    optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    kwargs = {k: v for k, v in kwargs.items() if k != "lr"}
    return create_loraplus_optimizer(model, optimizer_cls, lr=args.learning_rate,
                                     loraplus_lr_ratio=cfg.methods.loraplus_lr_ratio,
                                     loraplus_lr_embedding=cfg.methods.loraplus_lr_embedding,
                                     loraplus_weight_decay=args.weight_decay, **kwargs)


def build_badam_optimizer(model: Any, args: Any, cfg: Any):
    """badam's block optimizer (layer or ratio mode) around the Trainer's optimizer class."""
    from transformers import Trainer

    m = cfg.methods
    decay_names = set(Trainer.get_decay_parameter_names(None, model))
    decay = [p for n, p in model.named_parameters() if p.requires_grad and n in decay_names]
    no_decay = [p for n, p in model.named_parameters() if p.requires_grad and n not in decay_names]
    groups = [{"params": no_decay, "weight_decay": 0.0}, {"params": decay, "weight_decay": args.weight_decay}]
    optimizer_cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args, model)
    if m.badam_mode == "layer":
        from badam import BlockOptimizer

        return BlockOptimizer(base_optimizer=optimizer_cls(groups, **kwargs),
                              named_parameters_list=list(model.named_parameters()), block_prefix_list=None,
                              switch_block_every=m.badam_switch_interval, start_block=m.badam_start_block,
                              switch_mode=m.badam_switch_mode, verbose=m.badam_verbose)
    from badam import BlockOptimizerRatio

    return BlockOptimizerRatio(param_groups=groups, named_parameters_list=list(model.named_parameters()),
                               update_ratio=m.badam_update_ratio, mask_mode=m.badam_mask_mode,
                               verbose=m.badam_verbose, include_embedding=False, **kwargs)


def build_adam_mini_optimizer(model: Any, args: Any, cfg: Any):
    """Adam-mini with the Trainer's learning rate, betas, epsilon and weight decay; sharded models (FSDP, ZeRO-3)
    are told so. Its own printing is off: one log line says what it found."""
    from adam_mini import Adam_mini
    from transformers.integrations import is_deepspeed_zero3_enabled

    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    shape = {key: getattr(config, name, None) for key, name in (("dim", "hidden_size"), ("n_heads", "num_attention_heads"),
                                                               ("n_kv_heads", "num_key_value_heads"))}
    optimizer = Adam_mini(named_parameters=model.named_parameters(), lr=args.learning_rate,
                          betas=(args.adam_beta1, args.adam_beta2), eps=args.adam_epsilon,
                          weight_decay=args.weight_decay,
                          model_sharding=bool(getattr(args, "fsdp", None)) or is_deepspeed_zero3_enabled(),
                          verbose=False, **{key: value for key, value in shape.items() if value is not None})
    logger.info("Adam-mini optimizer: width %s, %s heads (%s key/value heads), %d parameter blocks.", optimizer.dim,
                optimizer.n_heads, optimizer.n_kv_heads, len(optimizer.param_groups))
    return optimizer


def _own_optimizer(trainer: Any, builder: Any, cfg: Any) -> None:
    """Make ``trainer.create_optimizer`` build its optimizer with ``builder(model, args, cfg)``."""

    def create_optimizer(self, model=None):
        if self.optimizer is None:
            self.optimizer = builder(model or self.model, self.args, cfg)
        return self.optimizer

    trainer.create_optimizer = types.MethodType(create_optimizer, trainer)


def configure_trainer(trainer: Any, cfg: Any) -> None:
    """Apply LoRA+, GaLore, APOLLO, BAdam or Adam-mini, and ``disable_shuffling``, to a built Trainer before
    training."""
    from transformers.training_args import OptimizerNames

    m = cfg.methods
    if m.disable_shuffling:
        trainer.args.train_sampling_strategy = "sequential"
    low_rank = low_rank_optimizer_args(cfg, trainer.model)
    if low_rank is not None:
        trainer.args.optim = OptimizerNames(low_rank["optim"])
        trainer.args.optim_target_modules = low_rank["optim_target_modules"]
        trainer.args.optim_args = low_rank["optim_args"]
        logger.info("%s optimizer on %s (%s).", low_rank["optim"], ", ".join(low_rank["optim_target_modules"]),
                    low_rank["optim_args"])
    elif m.use_badam:
        if getattr(trainer.args, "world_size", 1) > 1 or trainer.is_deepspeed_enabled:
            raise UserError("`use_badam` runs on one process here (no DeepSpeed / distributed); remove it or train "
                            "on one device.")
        from badam import BAdamCallback, clip_grad_norm_old_version

        _own_optimizer(trainer, build_badam_optimizer, cfg)
        trainer.accelerator.clip_grad_norm_ = types.MethodType(clip_grad_norm_old_version, trainer.accelerator)
        trainer.add_callback(BAdamCallback)
        logger.info("BAdam optimizer, %s mode.", m.badam_mode)
    elif m.use_adam_mini:
        _own_optimizer(trainer, build_adam_mini_optimizer, cfg)
    elif m.loraplus_lr_ratio is not None:
        _own_optimizer(trainer, build_loraplus_optimizer, cfg)
        logger.info("LoRA+ optimizer: B matrices at %g x the learning rate.", m.loraplus_lr_ratio)


def is_pissa(model: Any) -> bool:
    config = getattr(model, "peft_config", {}).get("default") if hasattr(model, "peft_config") else None
    init = str(getattr(config, "init_lora_weights", "")) if config is not None else ""
    return init.startswith("pissa")


class PissaInitCallback(TrainerCallback):
    """Save the PiSSA adapter as initialised (before the first step) into ``output_dir/pissa_init``."""

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        folder = Path(args.output_dir) / PISSA_INIT_DIR
        if model is None or not is_pissa(model) or (folder / "adapter_config.json").is_file():
            return  # a resumed run keeps the adapter saved when it started
        if not state.is_world_process_zero:
            return
        from engine.train.save_targets import clear_folder

        clear_folder(folder)  # PEFT opens each file by path: nothing planted there is written through
        config = model.peft_config["default"]
        init, config.init_lora_weights = config.init_lora_weights, True
        try:
            model.save_pretrained(folder)
        finally:
            config.init_lora_weights = init
        logger.info("PiSSA: initial adapter saved to %s for the conversion at the end.", folder)


def save_pissa_converted(model: Any, folder: str | Path, init: str | Path) -> bool:
    """Re-save a trained PiSSA adapter in ``folder`` converted to plain LoRA; False when not a PiSSA model.

    ``init`` is the adapter as initialised (``output_dir/pissa_init``). The converted adapter (rank 2r) applied to
    the original base weights gives the trained weights, so chat, evaluation and export load it like any LoRA
    adapter.
    """
    if not is_pissa(model):
        return False
    out, init = Path(folder), Path(init)
    if not (init / "adapter_config.json").is_file():
        raise UserError(f"PiSSA: the initial adapter `{init}` is missing, so the adapter cannot be converted to "
                        "LoRA; train again from the start (it is written when training begins).")
    model.save_pretrained(out, path_initial_model_for_weight_conversion=str(init))
    _restore_non_lora_entries(model, out)
    logger.info("PiSSA adapter converted to plain LoRA for the final save.")
    return True


def _restore_non_lora_entries(model: Any, out: Path) -> None:
    """Put back what PEFT's PiSSA conversion leaves out of the converted file: it writes only the converted lora_A
    and lora_B matrices, while the adapter's config still names its other parts (the trained rows of new tokens,
    ``trainable_token_indices``, and the resized embeddings beside them; ``modules_to_save``), so loading the
    adapter failed with a KeyError (a LLaMA-Factory llama3 PiSSA example whose template adds a stop token). Those
    parts are not changed by PiSSA's residual, so the trained model's own values are the right ones; a module that
    has LoRA matrices (whose base PiSSA changed) keeps only them."""
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file, save_file

    path = out / "adapter_model.safetensors"
    if not path.is_file():
        return
    converted = load_file(str(path))
    lora_modules = {key.split(".lora_")[0] for key in converted if ".lora_" in key}
    trained = get_peft_model_state_dict(model, save_embedding_layers="auto")
    missing = {key: value.detach().cpu().contiguous().clone() for key, value in trained.items()
               if key not in converted and ".lora_" not in key
               and not any(key.startswith(module + ".") for module in lora_modules)}
    if missing:
        save_file({**converted, **missing}, str(path), metadata={"format": "pt"})


def method_callbacks(cfg: Any, ctx: Any) -> list[Any]:
    """Callbacks the chosen methods need: PiSSA's initial save, early stopping, the per-module profiler."""
    callbacks: list[Any] = []
    if cfg.methods.early_stopping_steps:
        from transformers import EarlyStoppingCallback

        callbacks.append(EarlyStoppingCallback(early_stopping_patience=cfg.methods.early_stopping_steps))
    if cfg.finetuning.finetuning_type == "lora" and cfg.finetuning.pissa_init:
        callbacks.append(PissaInitCallback())
    if cfg.methods.profile_modules:
        from engine.train.profiler import ModuleProfilerCallback

        callbacks.append(ModuleProfilerCallback(cfg.methods.profile_modules, cfg.methods.profiler_warmup_steps,
                                                cfg.methods.profiler_active_steps, event_writer=ctx.events,
                                                folder=cfg.train.output_dir))
    return callbacks
