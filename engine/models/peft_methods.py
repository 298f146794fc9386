"""PEFT methods besides LoRA that LLaMA-Factory exposes through ``finetuning_type``: OFT (orthogonal fine-tuning).

OFT multiplies each target weight by a learned block-diagonal orthogonal matrix (PEFT's ``OFTConfig``); its
adapters load, merge and export like LoRA ones (``PeftModel``).
"""

from __future__ import annotations

from typing import Any

from torch import nn

from engine.errors import ModelError
from engine.models import adapters
from engine.models.registry import ModelFamily


def oft_config(model: nn.Module, finetuning_args: Any, methods: Any, composite: ModelFamily | None = None):
    """A PEFT ``OFTConfig`` from ``oft_rank`` / ``oft_block_size`` / ``oft_target`` / ``module_dropout``."""
    from peft import OFTConfig, TaskType

    target = (methods.oft_target or "all").strip()
    if target.lower() in ("all", "all-linear", ""):
        targets = adapters.find_all_linear_modules(model, composite, finetuning_args)
    else:
        targets = adapters.split_names(target)
        adapters._check_module_names(model, targets, "oft_target")
    to_save = adapters.split_names(finetuning_args.additional_target)
    if to_save:
        adapters._check_module_names(model, to_save, "additional_target")
    is_reward = type(model).__name__.endswith("ForSequenceClassification")
    if is_reward:
        to_save += [key for key in adapters.HEAD_KEYS if hasattr(model, key) and key not in to_save]
    _check_block_size(model, targets, methods)
    return OFTConfig(
        task_type=TaskType.SEQ_CLS if is_reward else TaskType.CAUSAL_LM,
        r=methods.oft_rank,
        oft_block_size=methods.oft_block_size,
        module_dropout=methods.module_dropout,
        target_modules=targets,
        modules_to_save=to_save or None,
    )


def _check_block_size(model: nn.Module, targets: list[str], methods: Any) -> None:
    """OFT splits each target's input features into blocks: the size must divide them."""
    sizes = {m.in_features for n, m in model.named_modules()
             if isinstance(m, nn.Linear) and any(adapters.key_matches(n, t) or n.endswith("." + t) for t in targets)}
    block, rank = methods.oft_block_size, methods.oft_rank
    bad = sorted(s for s in sizes if (block and s % block) or (rank and s % rank))
    if bad:
        what = f"oft_block_size: {block}" if block else f"oft_rank: {rank}"
        raise ModelError(f"`{what}` does not divide the input size of the OFT target layers ({', '.join(map(str, bad))}"
                         "); choose a divisor of every layer's input size.")


def setup_oft(model: nn.Module, model_args: Any, finetuning_args: Any, methods: Any,
              composite: ModelFamily | None = None, *, is_trainable: bool, merge_adapters: bool = True,
              quantized: bool = False) -> nn.Module:
    """Load saved adapters (any PEFT method) and, for training, add or resume an OFT adapter."""
    return adapters.setup_lora(model, model_args, finetuning_args, composite, is_trainable=is_trainable,
                               merge_adapters=merge_adapters, quantized=quantized,
                               new_adapter_config=lambda m: oft_config(m, finetuning_args, methods, composite))
