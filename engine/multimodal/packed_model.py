"""Packed media rows through models whose positions or masks are more than plain 1D positions.

A packed batch (:mod:`engine.multimodal.packing`) carries ``position_ids`` that restart at 0 for each row and no
attention mask; transformers then keeps each row to itself for models with plain rotary positions (LLaVA,
Gemma 4 without two-way image attention). Two kinds of model need more, added here by a forward pre-hook on the
module that builds positions and masks (the ``...Model`` under ``...ForConditionalGeneration``):

- **3D rotary positions** (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, GLM-4V: any model with ``get_rope_index``): given 2D
  positions, the model would use them for the image tokens too, and build no per-row mask (so even packed
  text-only rows would attend to each other). The hook computes the
  3D positions with the model's own ``get_rope_index`` over the packed sequence, moves each row's back to start at
  0 (they are built by counting on from the row before, so a row's own positions are its packed ones less the
  value at its first token), and puts the restarting 1D positions in front, the 4-row form the model reads as
  "packed" (its per-row mask comes from that first row).
- **Two-way attention within an image** (Gemma 3, and Gemma 4 with ``use_bidirectional_attention: vision``):
  transformers 5.25 applies that overlay to per-row positions instead of indices in its sliding-window layers,
  so rows would see each other's images. The hook builds the masks itself with transformers' own mask functions,
  all on indices: (causal or the same image) and the same row, and within the sliding window on those layers.

Checked by tests/engine/test_multimodal_packing.py: a packed sequence gives each row the logits it gets alone.
"""

from __future__ import annotations

import inspect
from typing import Any

ROPE_INPUTS = ("mm_token_type_ids", "image_grid_thw", "video_grid_thw", "second_per_grid_ts")


def _row_starts(position_ids: Any) -> Any:
    """Where a packed row starts: the position does not follow the one before it."""
    import torch

    starts = torch.ones_like(position_ids, dtype=torch.bool)
    starts[:, 1:] = position_ids[:, 1:] != position_ids[:, :-1] + 1
    return starts


def _packed_positions(kwargs: dict[str, Any]) -> Any:
    """The batch's 2D restarting positions when this forward is a packed training or evaluation pass, else None."""
    position_ids, input_ids = kwargs.get("position_ids"), kwargs.get("input_ids")
    if position_ids is None or input_ids is None or position_ids.ndim != 2 or position_ids.shape != input_ids.shape:
        return None
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    if cache is not None and cache.get_seq_length() > 0:
        return None
    return position_ids


def rope_positions(module: Any, kwargs: dict[str, Any], position_ids: Any) -> Any:
    """``(4, batch, length)`` positions of a packed batch: the restarting 1D positions, then each row's own 3D
    rotary positions (see the module docstring)."""
    import torch

    accepted = inspect.signature(module.get_rope_index).parameters
    extra = {key: kwargs[key] for key in ROPE_INPUTS if key in accepted and kwargs.get(key) is not None}
    if "mm_token_type_ids" not in extra:  # text only: the three axes are the text positions
        return torch.cat([position_ids[None]] * 4, dim=0)
    positions, _ = module.get_rope_index(kwargs["input_ids"], attention_mask=None, **extra)
    index = torch.arange(position_ids.shape[1], device=position_ids.device).expand_as(position_ids)
    first = torch.where(_row_starts(position_ids), index, 0).cummax(dim=1).values  # each token's row start
    positions = positions - positions[0].gather(1, first.to(positions.device))[None]
    return torch.cat([position_ids[None].to(positions.device), positions], dim=0)


def _image_blocks(module: Any, kwargs: dict[str, Any]) -> tuple[Any, bool] | None:
    """(block ids of two-way attention, whether full-attention layers use them too) of a Gemma model's batch, or
    None when the model attends causally only."""
    name = type(module).__module__
    if name.endswith("modeling_gemma3") and kwargs.get("token_type_ids") is not None:
        from transformers.models.gemma3.modeling_gemma3 import get_block_sequence_ids_for_mask

        return get_block_sequence_ids_for_mask(kwargs["token_type_ids"], device=kwargs["input_ids"].device), True
    text = module.config.get_text_config()
    if (name.endswith("modeling_gemma4") and kwargs.get("mm_token_type_ids") is not None
            and getattr(text, "use_bidirectional_attention", None) == "vision"):
        from transformers.models.gemma4.modeling_gemma4 import get_block_sequence_ids_for_mask

        return get_block_sequence_ids_for_mask(kwargs["mm_token_type_ids"], device=kwargs["input_ids"].device), False
    return None


def image_masks(module: Any, position_ids: Any, blocks: Any, on_full_layers: bool) -> dict[str, Any]:
    """The per-layer-type masks of a packed Gemma batch, on indices (see the module docstring)."""
    import torch
    from transformers.masking_utils import and_masks, blockwise_overlay, create_causal_mask, sliding_window_overlay

    config = module.config.get_text_config()
    rows = torch.cumsum(_row_starts(position_ids).long(), dim=1)

    def same_row(batch_idx: Any, head_idx: Any, q_idx: Any, kv_idx: Any) -> Any:
        return rows[batch_idx, q_idx] == rows[batch_idx, kv_idx]

    dtype = next(module.parameters()).dtype
    embeds = torch.empty((*position_ids.shape, 0), dtype=dtype, device=position_ids.device)
    common = {"config": config, "inputs_embeds": embeds, "attention_mask": None, "cache": None, "position_ids": None}
    overlay = blockwise_overlay(blocks)
    masks = {"full_attention": create_causal_mask(**common, or_mask_function=overlay if on_full_layers else None,
                                                  and_mask_function=same_row)}
    if "sliding_attention" in (getattr(config, "layer_types", None) or ()):
        masks["sliding_attention"] = create_causal_mask(
            **common, or_mask_function=overlay,
            and_mask_function=and_masks(sliding_window_overlay(config.sliding_window), same_row))
    return masks


def _hook(module: Any, args: tuple, kwargs: dict[str, Any]) -> tuple[tuple, dict[str, Any]] | None:
    position_ids = _packed_positions(kwargs)
    if position_ids is None:
        return None
    if hasattr(module, "get_rope_index"):  # even a sequence of one row: 2D positions would be wrong for its media
        return args, {**kwargs, "position_ids": rope_positions(module, kwargs, position_ids)}
    if bool(_row_starts(position_ids).sum(dim=1).le(1).all()):
        return None  # no row restarts: the model's own masks are right
    blocks = _image_blocks(module, kwargs)
    if blocks is not None and kwargs.get("attention_mask") is None:
        return args, {**kwargs, "attention_mask": image_masks(module, position_ids, *blocks)}
    return None


def _owner(model: Any) -> Any:
    """The module that builds positions and masks: the one holding the language model and the vision tower."""
    for module in model.modules():
        if "language_model" in module._modules and (hasattr(module, "get_rope_index")
                                                    or hasattr(module, "get_image_features")):
            return module
    return None


def attach(model: Any) -> bool:
    """Make packed media batches keep each row to itself in ``model`` (a no-op for models that need nothing);
    whether a hook was added."""
    owner = _owner(model)
    if owner is None or getattr(owner, "_lf_packed_hook", False):
        return False
    owner.register_forward_pre_hook(_hook, with_kwargs=True)
    owner._lf_packed_hook = True
    return True
