"""TRL's DPO, KTO, GRPO and RLOO trainers score tokens through a fused output head: it runs the model's body, then
multiplies the hidden states by the head's ``weight`` (and adds its ``bias``) in chunks, without calling the head's
own forward. A LoRA adapter on the output head lives in that forward only (PEFT's LoRA layer reports the frozen
``weight``), so such a run would train and save the head's LoRA while every score ignored it. It is refused before
training, with the fix. Heads that train rows of their own matrix (the trainable-token rows of added tokens, see
``engine.models.token_rows.expose_head_bias``) or a full copy (``modules_to_save``) report their trained weight,
and are scored right."""

from __future__ import annotations

from typing import Any

from engine.errors import UserError


def refuse_adapted_head(model: Any, stage: str) -> None:
    """Raise :class:`UserError` when ``model``'s output head carries a LoRA-style adapter (see the module docstring)."""
    try:
        from peft.tuners.tuners_utils import BaseTunerLayer
    except ImportError:
        return
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    getter = getattr(base, "get_output_embeddings", None)
    head = getter() if callable(getter) else None
    if isinstance(head, BaseTunerLayer):
        name = next((key for key, module in base.named_modules() if module is head), "the output head")
        raise UserError(
            f"`stage: {stage}` scores tokens through TRL's fused output head, which reads the head's frozen weight, "
            f"so a LoRA adapter on `{name}` would be trained and saved but never used. Remove `{name}` from "
            f"`lora_target`, or train the whole head with `additional_target: {name}`."
        )
