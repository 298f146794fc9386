"""transformers' own TrainingArguments keys in a config (LLaMA-Factory configs pass them through): which keys they
are, and the values transformers would take but fail on later, after the model has loaded."""

from __future__ import annotations

import dataclasses
import functools
import json
import types
import typing
from typing import Any

from engine.config.limits import shorten


def hf_training_keys() -> set[str]:
    return set(hf_training_fields())


@functools.lru_cache(maxsize=1)
def hf_training_fields() -> dict[str, Any]:
    """transformers' TrainingArguments fields and their declared types."""
    from transformers.training_args import TrainingArguments  # the module: the lazy top level can race in threads

    return {f.name: f.type for f in dataclasses.fields(TrainingArguments)}


_KIND_WORDS = {bool: "true or false", int: "a whole number", float: "a number", str: "text", dict: "a mapping",
               list: "a list", type(None): "null"}

# ranges transformers leaves to the optimizer or the loss, which fail only after the model has loaded
_HF_RANGES = {"adam_beta1": (0.0, 1.0), "adam_beta2": (0.0, 1.0), "adam_epsilon": (0.0, None),
              "label_smoothing_factor": (0.0, 1.0), "neftune_noise_alpha": (0.0, None)}


def _accepts(kind: Any, value: Any) -> bool | None:
    """Whether ``value`` fits the declared type ``kind`` (None: a type this check does not know, so allowed)."""
    import enum

    origin = typing.get_origin(kind)
    if origin in (typing.Union, types.UnionType):
        verdicts = [_accepts(member, value) for member in typing.get_args(kind)]
        return True if True in verdicts else (None if None in verdicts else False)
    if origin is typing.Literal:
        return value in typing.get_args(kind)
    kind = origin or kind
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind in (str, dict, list, type(None)):
        return isinstance(value, kind)
    if isinstance(kind, type) and issubclass(kind, enum.Enum):
        return isinstance(value, str)
    return None


def hf_value_problem(key: str, value: Any) -> str | None:
    """A TrainingArguments key passed through (LLaMA-Factory configs do) whose value transformers would take but
    fail on later, after the model has loaded: a wrong type, a JSON text that is not an object, or out of range."""
    kind = hf_training_fields().get(key)
    if kind is None:
        return None
    members = [typing.get_origin(m) or m for m in (typing.get_args(kind) if typing.get_origin(kind) else (kind,))]
    if _accepts(kind, value) is False:
        wanted = " or ".join(dict.fromkeys(w for w in map(_KIND_WORDS.get, members) if w)) or "another type"
        return f"`{key}: {shorten(repr(value), 60)}` must be {wanted} (a transformers TrainingArguments key)."
    if isinstance(value, str) and dict in members:  # transformers reads a text given for a mapping as JSON
        try:
            parsed = json.loads(value)
        except ValueError:
            parsed = None
        if not isinstance(parsed, dict):
            return f"`{key}: {shorten(value, 60)}` must be a mapping (or its JSON text, like `{{\"key\": 1}}`)."
    low, high = _HF_RANGES.get(key, (None, None))
    if low is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < low or (high is not None and value >= high):
            where = f"at least {low:g}" + (f" and below {high:g}" if high is not None else "")
            return f"`{key}: {value}` must be {where}."
    return None
