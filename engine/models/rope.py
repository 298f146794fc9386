"""RoPE scaling (``rope_scaling``): stretch the rotary position embeddings to train beyond the model's length.

The factor follows LLaMA-Factory: when training, ``ceil(cutoff_len / original length)`` (no scaling when
cutoff_len fits); for inference, 2.0. The original length is the config's
``original_max_position_embeddings`` when it has one, else ``max_position_embeddings``, which grows by the factor.
dynamic and yarn also record the original length; llama3 adds low/high frequency factors 1.0 and 4.0.
The result goes into transformers' ``rope_parameters`` (``rope_scaling`` on older configs).
"""

from __future__ import annotations

import logging
import math
from typing import Any

logger = logging.getLogger(__name__)


def _current(config: Any) -> tuple[str | None, dict[str, Any] | None]:
    for attr in ("rope_parameters", "rope_scaling"):
        value = getattr(config, attr, None)
        if isinstance(value, dict):
            return attr, value
    if hasattr(config, "rope_parameters"):
        return "rope_parameters", None
    if hasattr(config, "rope_scaling"):
        return "rope_scaling", None
    return None, None


def configure_rope(config: Any, rope_scaling: str | None, max_length: int | None) -> dict[str, Any] | None:
    """Set RoPE scaling on a model config; returns the new parameters (None when nothing changed).

    Args:
        config: The model's ``PretrainedConfig`` (changed in place).
        rope_scaling: ``linear``, ``dynamic``, ``yarn``, ``llama3`` or None.
        max_length: ``cutoff_len`` when training; None for inference (factor 2.0).
    """
    if not rope_scaling:
        return None
    attr, current = _current(config)
    if attr is None:
        logger.warning("This model has no RoPE settings; `rope_scaling: %s` is not applied.", rope_scaling)
        return None
    if current and "original_max_position_embeddings" in current:
        old_length = current["original_max_position_embeddings"]
    elif getattr(config, "max_position_embeddings", None):
        old_length = config.max_position_embeddings
    else:
        logger.warning("The model config has no max_position_embeddings; `rope_scaling` is not applied.")
        return None
    if max_length is not None:
        if max_length <= old_length:
            logger.warning("cutoff_len %d fits the model's length %d; `rope_scaling: %s` is not applied.",
                           max_length, old_length, rope_scaling)
            return None
        if rope_scaling == "dynamic":
            logger.warning("Dynamic NTK scaling may not work well with fine-tuning "
                           "(https://github.com/huggingface/transformers/pull/24653).")
        factor = float(math.ceil(max_length / old_length))
    else:
        factor = 2.0
    params: dict[str, Any] = {"rope_type": rope_scaling, "factor": factor}
    if rope_scaling in ("dynamic", "yarn"):
        params["original_max_position_embeddings"] = old_length
    elif rope_scaling == "llama3":
        params.update(original_max_position_embeddings=old_length, low_freq_factor=1.0, high_freq_factor=4.0)
    keep = {k: v for k, v in (current or {}).items() if k in ("rope_theta", "partial_rotary_factor")}
    setattr(config, attr, {**keep, **params})
    config.max_position_embeddings = int(old_length * factor)
    logger.info("RoPE %s scaling, factor %g: max length %d -> %d.", rope_scaling, factor, old_length,
                config.max_position_embeddings)
    return params
