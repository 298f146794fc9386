"""Attention over a batch's rows laid back to back (padding-free batches, see :mod:`engine.data.collator`).

A padding-free batch is one row of ``N`` real tokens: the batch's examples one after another, ``position_ids``
restarting at 0 for each, and ``cu_seq_lens_q``/``cu_seq_lens_k`` (the examples' start offsets, as FlashAttention's
varlen kernels take them) carried to every attention call. Dense sdpa over that row would need an ``N x N``
block-diagonal mask and pay for all of it; :func:`rows_sdpa_attention` runs causal sdpa on each example's slice
instead, so attention costs the sum of the squared example lengths (at most what the padded batch cost), and the
projections, MLPs and head see no padding at all. Batches without those offsets (evaluation with padding,
generation) go to transformers' own sdpa with the mask it builds as usual. Training on the CPU runs all rows as one
autograd node (:class:`RowsFlashAttention`: sdpa's own CPU kernel per row, each output written once into the tensor
``o_proj`` reads).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.nn.attention import SDPBackend

from engine.config.schema import packs_rows

ATTENTION_NAME = "lf_rows_sdpa"


def rows_sdpa_attention(module: Any, query: Any, key: Any, value: Any, attention_mask: Any, dropout: float = 0.0,
                        scaling: float | None = None, **kwargs: Any) -> tuple[Any, None]:
    """transformers' attention-function signature; (batch, heads, length, dim) in, (batch, length, heads, dim) out."""
    from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

    offsets = kwargs.get("cu_seq_lens_q")
    if offsets is None or attention_mask is not None or query.shape[0] != 1:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    groups = getattr(module, "num_key_value_groups", 1)
    if groups > 1:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    bounds = offsets.tolist()
    lengths = [end - start for start, end in zip(bounds[:-1], bounds[1:])]
    if bounds[0] != 0 or bounds[-1] != query.shape[2] or min(lengths) < 0:
        raise ValueError(f"cu_seq_lens_q {bounds} does not split the batch's {query.shape[2]} positions into rows.")
    if _takes_rows_node(query, key, value, dropout if module.training else 0.0, scaling):
        return RowsFlashAttention.apply(query, key, value, lengths, scaling), None
    # one split per tensor, not a slice per row: a slice's backward writes its gradient into a zeroed copy of the
    # whole tensor and autograd adds those copies up, once per row; a split's backward is one concatenation
    rows = zip(query.split(lengths, dim=2), key.split(lengths, dim=2), value.split(lengths, dim=2))
    parts = [torch.nn.functional.scaled_dot_product_attention(
        q, k, v, dropout_p=dropout if module.training else 0.0, scale=scaling, is_causal=True)
        for (q, k, v), length in zip(rows, lengths) if length]
    out = torch.cat(parts, dim=2) if len(parts) > 1 else parts[0]
    return out.transpose(1, 2).contiguous(), None


def _takes_rows_node(query: Any, key: Any, value: Any, dropout: float, scaling: float | None) -> bool:
    """Whether :class:`RowsFlashAttention` computes exactly what per-row sdpa would: a training call on the CPU
    without dropout, where sdpa itself picks the CPU flash kernel for these inputs."""
    if dropout or query.device.type != "cpu" or not torch.is_grad_enabled():
        return False
    if not (query.requires_grad or key.requires_grad or value.requires_grad):
        return False
    choice = torch._fused_sdp_choice(query, key, value, None, 0.0, True, scale=scaling)
    return int(choice) == int(SDPBackend.FLASH_ATTENTION)


def _row_spans(lengths: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each non-empty row laid back to back."""
    spans, start = [], 0
    for length in lengths:
        if length:
            spans.append((start, start + length))
        start += length
    return spans


class RowsFlashAttention(torch.autograd.Function):
    """Causal attention within each row, as one autograd node over the whole batch.

    Per row it runs the kernel sdpa runs on the CPU (``_scaled_dot_product_flash_attention_for_cpu``, and its
    backward), so the values and gradients are those of per-row sdpa. What differs is memory: per-row sdpa keeps
    each row's output for its backward, then the rows are concatenated and transposed into a second copy that
    ``o_proj`` keeps as its input; here each row's output is written straight into one ``(batch, length, heads,
    dim)`` tensor that is both returned (``o_proj``'s input, a view) and kept for the backward, so the attention
    output is held once per layer instead of twice, without the concatenation and the transposing copy.
    """

    @staticmethod
    def forward(ctx, query, key, value, lengths, scaling):
        flash = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu
        batch, heads, total, dim = query.shape
        out = query.new_empty(batch, total, heads, dim)
        lses = []
        for start, end in _row_spans(lengths):
            row_out, lse = flash(query[:, :, start:end], key[:, :, start:end], value[:, :, start:end], 0.0, True,
                                 attn_mask=None, scale=scaling)[:2]
            out[:, start:end].copy_(row_out.transpose(1, 2))
            del row_out
            lses.append(lse)
        ctx.lengths, ctx.scaling = list(lengths), scaling
        ctx.save_for_backward(query, key, value, out, *lses)
        return out

    @staticmethod
    def backward(ctx, grad_out):
        flash_backward = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu_backward
        query, key, value, out, *lses = ctx.saved_tensors
        grads = [torch.empty_like(tensor) if need else None
                 for tensor, need in zip((query, key, value), ctx.needs_input_grad[:3])]
        for (start, end), lse in zip(_row_spans(ctx.lengths), lses):
            parts = flash_backward(grad_out[:, start:end].transpose(1, 2), query[:, :, start:end],
                                   key[:, :, start:end], value[:, :, start:end], out[:, start:end].transpose(1, 2),
                                   lse, 0.0, True, attn_mask=None, scale=ctx.scaling)
            for grad, part in zip(grads, parts):
                if grad is not None:
                    grad[:, :, start:end].copy_(part)
        return grads[0], grads[1], grads[2], None, None


def _rows_mask(*args: Any, **kwargs: Any) -> Any:
    """sdpa's mask for padded batches; none for a padding-free row (its attention splits by the offsets)."""
    from transformers.masking_utils import sdpa_mask

    if kwargs.get("attention_mask") is None:
        return None
    return sdpa_mask(*args, **kwargs)


def register() -> None:
    from transformers.masking_utils import AttentionMaskInterface
    from transformers.modeling_utils import AttentionInterface

    AttentionInterface.register(ATTENTION_NAME, rows_sdpa_attention)
    AttentionMaskInterface.register(ATTENTION_NAME, _rows_mask)


MODEL_TYPES = frozenset({"llama", "mistral", "mixtral", "qwen2", "qwen2_moe", "qwen3", "qwen3_moe", "phi3", "granite"})
"""Decoders whose attention is plain causal with rotary positions from ``position_ids`` (no sliding window by
default, no soft-capping, no image-token masks), where attending within each row is exactly the padded batch."""


def _base(model: Any) -> Any:
    """The transformers model under a PEFT wrapper (or the model itself)."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def why_not_padding_free(cfg: Any, model: Any, packed: bool | None = None) -> str | None:
    """Why this pt/sft run cannot take padding-free batches, or None when it can; ``packed``: whether its rows are
    packed (None: as the config says)."""
    config = getattr(_base(model), "config", None)
    model_type = getattr(config, "model_type", None)
    if model_type not in MODEL_TYPES:
        return f"model type {model_type} is not one of {', '.join(sorted(MODEL_TYPES))}"
    if getattr(config, "_attn_implementation", None) not in ("sdpa", ATTENTION_NAME):
        return f"the model runs {getattr(config, '_attn_implementation', None)} attention (needs sdpa)"
    if getattr(config, "sliding_window", None) and getattr(config, "use_sliding_window", True):
        return "the model uses sliding-window attention"
    if packs_rows(cfg.finetuning.stage, cfg.data) if packed is None else packed:
        return "`packing` lays rows out itself"
    if int(getattr(cfg.parallel, "cp_size", 1) or 1) > 1:
        return "context parallelism splits rows itself"
    if cfg.extra.get("neftune_noise_alpha"):
        return "NEFTune scales its noise by the row length"
    return None


def use_row_attention(model: Any) -> bool:
    """Switch a model that runs transformers' sdpa to :func:`rows_sdpa_attention`; False (unchanged) otherwise."""
    base = _base(model)
    config = getattr(base, "config", None)
    if config is None or getattr(config, "_attn_implementation", None) != "sdpa":
        return False
    register()
    base.set_attn_implementation(ATTENTION_NAME)
    return getattr(base.config, "_attn_implementation", None) == ATTENTION_NAME
