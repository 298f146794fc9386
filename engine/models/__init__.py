"""Model families, loading (tokenizer, weights, adapters) and device kernels.

The registry is light (no torch); the loader and adapters import torch, so they are loaded on first use. The
board can read the model list without paying for torch.
"""

from importlib import import_module
from typing import Any

from engine.models.registry import (
    FAMILIES,
    ModelFamily,
    composite_info,
    default_template,
    family_of,
    list_models,
)

_LAZY = {
    "count_parameters": "engine.models.adapters",
    "find_all_linear_modules": "engine.models.adapters",
    "load_model": "engine.models.loader",
    "load_processor": "engine.models.loader",
    "load_tokenizer": "engine.models.loader",
    "resolve_model_path": "engine.models.loader",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine.models' has no attribute {name!r}")


__all__ = [
    "FAMILIES", "ModelFamily", "composite_info", "count_parameters", "default_template", "family_of",
    "find_all_linear_modules", "list_models", "load_model", "load_processor", "load_tokenizer", "resolve_model_path",
]
