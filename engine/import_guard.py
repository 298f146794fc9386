"""Keep bitsandbytes out of an engine process whose config cannot use it.

PEFT imports bitsandbytes whenever it is installed, and bitsandbytes' import pulls in torch's inductor compiler
(about 1.3 s of every engine start on the reference machine, a quarter of the import phase) and, on CPUs with
AVX512-BF16 where the ``kernels`` package is installed (transformers >= 5.25 requires it), asks the Hugging Face
Hub for a 4-bit CPU kernel. A run that quantizes nothing and uses a plain torch optimizer needs none of that, so
:func:`skip_bitsandbytes_unless_needed` makes the process behave as if bitsandbytes were not installed, a setup
PEFT and transformers support (the `bitsandbytes` extra is optional).

The rule is conservative: bitsandbytes is left importable whenever the config might reach it: ``quantization_bit``,
an optimizer other than the plain torch ones (bitsandbytes' 8-bit and paged optimizers, GaLore, APOLLO, ...), or a
model whose ``config.json`` carries a ``quantization_config`` (a pre-quantized checkpoint) or cannot be read
before loading (a hub id not yet in the local cache).
"""

from __future__ import annotations

import json
import logging
import sys
from pathlib import Path
from typing import Any

logger = logging.getLogger(__name__)

PLAIN_OPTIMIZERS = frozenset({"adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused",
                              "adafactor", "sgd", "adagrad", "rmsprop"})
"""Hugging Face optimizer names that are torch's own (none of them touches bitsandbytes)."""

OPTIMIZER_METHODS = ("use_galore", "use_apollo")
"""Method switches whose optimizer packages import bitsandbytes (their 8-bit variants)."""


def bitsandbytes_reason(cfg: Any) -> str | None:
    """Why this config may need bitsandbytes, or None when it cannot."""
    if cfg.model.quantization_bit:
        return f"quantization_bit: {cfg.model.quantization_bit}"
    if cfg.train.optim not in PLAIN_OPTIMIZERS:
        return f"optim: {cfg.train.optim}"
    for key in OPTIMIZER_METHODS:
        if getattr(cfg.methods, key, False):
            return f"{key}: true"
    models = [cfg.model.model_name_or_path, getattr(cfg.finetuning, "ref_model", None),
              getattr(cfg.finetuning, "reward_model", None)]
    for name in filter(None, models):
        if not _config_is_unquantized(cfg, name):
            return f"model {name} may be quantized"
    return None


def _config_is_unquantized(cfg: Any, name: str) -> bool:
    """True when the model's config.json can be read here and has no ``quantization_config``."""
    from engine.preflight import _is_demo

    if _is_demo(name):
        return True
    folder = Path(name).expanduser()
    if folder.is_dir():
        config: Path | str | None = folder / "config.json"
    else:
        config = _cached_hub_config(cfg, name)
    if config is None:
        return False
    try:
        from engine.models.registry import read_config_text

        data = json.loads(read_config_text(config))  # a regular file of at most a config's size
    except (OSError, ValueError, RecursionError):
        return False  # the preflight check or the loader reports it
    return isinstance(data, dict) and not _quantized(data)


def _quantized(config: dict[str, Any]) -> bool:
    """A ``quantization_config`` at the top or in a composite model's sub-configs (``text_config`` ...)."""
    if config.get("quantization_config"):
        return True
    return any(isinstance(value, dict) and value.get("quantization_config") for value in config.values())


def _cached_hub_config(cfg: Any, name: str) -> str | None:
    if getattr(cfg.methods, "use_modelscope_hub", False) or getattr(cfg.methods, "use_openmind_hub", False):
        return None
    from engine.preflight import cached_hub_config

    try:
        return cached_hub_config(cfg, name)
    except Exception:  # not a valid repo id, an unreadable cache: leave bitsandbytes importable
        return None


def skip_bitsandbytes_unless_needed(cfg: Any) -> bool:
    """Make ``import bitsandbytes`` fail in this process (as if it were not installed) when ``cfg`` cannot use it.

    Returns True when it was hidden. Must run before anything imports PEFT; a process that already imported
    bitsandbytes keeps it.
    """
    if "bitsandbytes" in sys.modules:
        if sys.modules["bitsandbytes"] is None and bitsandbytes_reason(cfg) is not None:
            del sys.modules["bitsandbytes"]  # hidden by an earlier run in this process, and needed by this one
        return False
    reason = bitsandbytes_reason(cfg)
    if reason is not None:
        logger.debug("bitsandbytes stays importable (%s).", reason)
        return False
    sys.modules["bitsandbytes"] = None  # type: ignore[assignment]  # Python's documented "not importable" marker
    return True
