"""Model families, loading (tokenizer, weights, adapters) and device kernels."""

from engine.models.adapters import count_parameters, find_all_linear_modules
from engine.models.loader import load_model, load_processor, load_tokenizer, resolve_model_path
from engine.models.registry import (
    FAMILIES,
    ModelFamily,
    composite_info,
    default_template,
    family_of,
    list_models,
)

__all__ = [
    "FAMILIES", "ModelFamily", "composite_info", "count_parameters", "default_template", "family_of",
    "find_all_linear_modules", "list_models", "load_model", "load_processor", "load_tokenizer", "resolve_model_path",
]
