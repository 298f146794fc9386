"""Typed configuration with LLaMA-Factory's flat keys."""

from engine.config.loader import (
    ConfigError,
    RunConfig,
    all_keys,
    build_config,
    coerce_value,
    field_type,
    literal_choices,
    load_config,
    parse_overrides,
    read_yaml,
)
from engine.config.schema import (
    SECTIONS,
    DataArgs,
    ExportArgs,
    FinetuningArgs,
    GenerationArgs,
    ModelArgs,
    TrainArgs,
    packs_rows,
)

__all__ = [
    "SECTIONS", "ConfigError", "DataArgs", "ExportArgs", "FinetuningArgs", "GenerationArgs", "ModelArgs",
    "RunConfig", "TrainArgs", "all_keys", "build_config", "coerce_value", "field_type", "literal_choices",
    "load_config", "packs_rows", "parse_overrides", "read_yaml",
]
