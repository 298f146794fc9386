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
    wrong_choice = hf_choice_problem(key, value)
    if wrong_choice:
        return wrong_choice
    low, high = _HF_RANGES.get(key, (None, None))
    if low is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < low or (high is not None and value >= high):
            where = f"at least {low:g}" + (f" and below {high:g}" if high is not None else "")
            return f"`{key}: {value}` must be {where}."
    return None


def hf_choices(key: str) -> tuple[list[str], bool] | None:
    """The values transformers takes for a TrainingArguments key that has a fixed set of them (an enum such as
    ``OptimizerNames``, or the field's declared ``choices``), and whether a text may list several (``debug``); None
    for a key that takes any value."""
    import dataclasses
    import enum

    from transformers.training_args import TrainingArguments

    field = next((f for f in dataclasses.fields(TrainingArguments) if f.name == key), None)
    if field is None:
        return None
    if field.metadata.get("choices"):
        return [str(c) for c in field.metadata["choices"]], False
    members = typing.get_args(field.type) if typing.get_origin(field.type) else (field.type,)
    for member in members:
        several = typing.get_origin(member) is list
        inner = typing.get_args(member)[0] if several and typing.get_args(member) else member
        if isinstance(inner, type) and issubclass(inner, enum.Enum):
            return [str(m.value) for m in inner], several
    return None


OPTIMIZER_NAMES = frozenset({
    "adamw_torch", "adamw_torch_fused", "adamw_torch_xla", "adamw_torch_npu_fused", "adafactor", "adamw_anyprecision",
    "adamw_torch_4bit", "adamw_torch_8bit", "ademamix", "sgd", "adagrad", "adamw_bnb_8bit", "adamw_8bit",
    "ademamix_8bit", "lion_8bit", "lion_32bit", "paged_adamw_32bit", "paged_adamw_8bit", "paged_ademamix_32bit",
    "paged_ademamix_8bit", "paged_lion_32bit", "paged_lion_8bit", "rmsprop", "rmsprop_bnb", "rmsprop_bnb_8bit",
    "rmsprop_bnb_32bit", "galore_adamw", "galore_adamw_8bit", "galore_adafactor", "galore_adamw_layerwise",
    "galore_adamw_8bit_layerwise", "galore_adafactor_layerwise", "lomo", "adalomo", "grokadamw", "schedule_free_radam",
    "schedule_free_adamw", "schedule_free_sgd", "apollo_adamw", "apollo_adamw_layerwise", "stable_adamw",
})
"""transformers' ``OptimizerNames`` values (5.24-5.25; tests/engine/test_config_value_kinds.py asserts they are
equal): an ``optim`` among them is taken without importing transformers, which imports torch, so the board that
checks its form with :func:`engine.config.build_config` on every change stays without torch. Any other name is
looked up in transformers itself (:func:`hf_choice_problem`)."""


def optim_problem(value: Any) -> str | None:
    """A refusal for an ``optim`` transformers does not know (the common names answered without importing it)."""
    return None if value in OPTIMIZER_NAMES else hf_choice_problem("optim", value)


def hf_choice_problem(key: str, value: Any) -> str | None:
    """A refusal for a TrainingArguments key with a fixed set of values (``optim``, ``logging_strategy``,
    ``hub_strategy``, ``log_level``, ...) given one transformers does not know: it refuses it only when the
    training arguments are built, after the model has loaded."""
    import difflib

    known = hf_choices(key)
    if known is None or value is None or isinstance(value, bool):
        return None
    choices, several = known
    given = value if isinstance(value, list) else (str(value).split() if several else [str(value)])
    for word in given:
        if str(word) not in choices:
            close = difflib.get_close_matches(str(word)[:100], choices, n=1)
            hint = f" Did you mean `{close[0]}`?" if close else ""
            return (f"`{key}: {shorten(str(word), 60)}` is not a value transformers knows; use one of "
                    f"{', '.join(choices)}.{hint}")
    return None


def hf_yaml_no(key: str, value: Any) -> Any:
    """``no`` for a YAML ``no`` (which YAML 1.1 reads as false) given to a key whose values include it
    (``logging_strategy: no``), as the typed keys take it (``save_strategy: no``); any other value as given."""
    known = hf_choices(key) if value is False else None
    return "no" if known is not None and "no" in known[0] else value
