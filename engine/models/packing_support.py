"""Which models can train on packed rows (``packing`` / ``neat_packing``) with each row kept to itself.

Packed rows are kept apart by their attention masks (engine.data.collator, engine.multimodal.packed_model). A layer
that is not attention (a linear-attention, state-space or convolution layer: Qwen3-Next, Qwen3.5, Mamba, Jamba,
LFM2, ...) carries its state from one row into the next one instead, so packed rows would read each other; such
models are refused with packing, before the run (``engine.preflight``) and again once the model is loaded.
"""

from __future__ import annotations

from typing import Any

ATTENTION_LAYERS = frozenset({"full_attention", "sliding_attention", "chunked_attention", "attention"})
"""Layer types (``layer_types`` / ``layers_block_type`` of a config) that packed rows' masks keep apart."""
RECURRENT_MODELS = frozenset({"mamba", "mamba2", "falcon_mamba", "falcon_h1", "rwkv", "recurrent_gemma", "xlstm",
                              "zamba", "zamba2", "bamba", "nemotron_h", "lfm2", "lfm2_moe", "lfm2_vl", "jamba"})
"""Model types built of layers that carry state along the sequence, whatever their config lists."""


def _get(config: Any, key: str) -> Any:
    return config.get(key) if isinstance(config, dict) else getattr(config, key, None)


def packing_problem(config: dict[str, Any] | Any) -> str | None:
    """Why packed rows would read each other in the model of ``config`` (a ``config.json`` mapping or a
    transformers config), with the fix; None when packing keeps them apart."""
    if not config:
        return None
    text = _get(config, "text_config") or config
    model_type = _get(text, "model_type") or _get(config, "model_type")
    kinds: set[str] = set()
    for source in (text, config):
        for key in ("layer_types", "layers_block_type"):
            kinds.update(str(kind) for kind in (_get(source, key) or ()) if str(kind) not in ATTENTION_LAYERS)
    if not kinds and model_type not in RECURRENT_MODELS and _get(config, "model_type") not in RECURRENT_MODELS:
        return None
    what = f"its {', '.join(sorted(kinds))} layers carry" if kinds else "its layers carry"
    return (f"`packing` cannot keep packed rows apart in this model ({model_type}): {what} their state from one "
            "row into the next, which attention masks do not stop. Set `packing: false` and `neat_packing: false` "
            "(rows are then padded to the longest of their batch).")
