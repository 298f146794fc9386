"""The optional HyperParallel backend (the seeds' FSDP2-based one), behind an availability check.

HyperParallel is not on PyPI; when its package ``hyper_parallel`` is importable and ``use_hyper_parallel: true``,
accelerate's FSDP2 model preparation is replaced by HyperParallel's (context-parallel hooks first when
``hyper_parallel_cp_size > 1``). The seed's refusals (full fine-tuning of pt/sft only; no LoRA, quantization,
Unsloth, mixture-of-depths or reference models) are config checks in ``engine.config.parallel.check_parallel``.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
from types import SimpleNamespace
from typing import Any

from engine.errors import UserError

logger = logging.getLogger(__name__)

PACKAGE = "hyper_parallel"
INTEGRATION = "hyper_parallel.integration.llamafactory"


def is_available() -> bool:
    try:
        return importlib.util.find_spec(PACKAGE) is not None
    except (ImportError, ValueError):
        return False


def load_args(cfg: Any) -> Any:
    """HyperParallel's own argument object, built from our keys (its ``cp_size`` follows hyper_parallel_cp_size)."""
    if not is_available():
        raise UserError("`use_hyper_parallel: true` but the `hyper_parallel` package is not installed; install "
                        "HyperParallel, or remove `use_hyper_parallel` to use FSDP2 (`fsdp: full_shard auto_wrap`).")
    module = importlib.import_module(INTEGRATION)
    par = cfg.parallel
    view = SimpleNamespace(use_hyper_parallel=True, hyper_parallel_args=par.hyper_parallel_args,
                           hyper_parallel_cp_size=par.hyper_parallel_cp_size, finetuning_type=cfg.finetuning.finetuning_type,
                           stage=cfg.finetuning.stage)
    hp_args = module.HyperParallelArguments.from_finetuning_args(view)
    if getattr(hp_args, "cp_size", None) != par.hyper_parallel_cp_size:
        hp_args.cp_size = par.hyper_parallel_cp_size
    return hp_args


def install(trainer: Any, cfg: Any) -> Any:
    """Route the trainer's FSDP2 model preparation through HyperParallel. Returns HyperParallel's arguments."""
    hp_args = load_args(cfg)
    if not getattr(trainer.accelerator, "is_fsdp2", False):
        raise UserError("HyperParallel runs on FSDP2: set `fsdp: full_shard auto_wrap` with an FSDP2 `fsdp_config` and "
                        "launch with torchrun (several processes).")
    module = importlib.import_module(INTEGRATION)
    import accelerate.accelerator as acc_module

    original = acc_module.fsdp2_prepare_model

    def prepare(accelerator: Any, model: Any) -> Any:
        if getattr(hp_args, "cp_size", 1) > 1:
            context = importlib.import_module(INTEGRATION + ".context_parallel")
            model = context.cp_prepare_model(model, accelerator, hp_args)
        return module.fsdp2_prepare_model(accelerator, model, hp_args)

    prepare.original = original  # type: ignore[attr-defined]
    acc_module.fsdp2_prepare_model = prepare
    trainer.hyper_parallel_args = hp_args
    logger.info("HyperParallel prepares the model (cp_size %s).", getattr(hp_args, "cp_size", 1))
    return hp_args


def uninstall() -> None:
    import accelerate.accelerator as acc_module

    original = getattr(acc_module.fsdp2_prepare_model, "original", None)
    if original is not None:
        acc_module.fsdp2_prepare_model = original
