"""Widgets built from the engine's config types, and the conversions between widget values and config values.

A ``Literal`` becomes a dropdown, a ``bool`` a checkbox, a number bounded on both sides a slider (or a number
box with minimum and maximum when the range is too wide for a slider), text a textbox. Labels and help come
from the locale files (``f_<key>`` and ``h_<key>``); the YAML key is shown beside the help.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from typing import Any, get_args, get_origin

import gradio as gr

from app.i18n import L, t
from app.number_box import NumberBox
from engine.config import all_keys, field_type, literal_choices
from engine.config.limits import MAX_WHOLE_NUMBER

AUTO = "auto"
NONE = "none"
SLIDER_MAX_SPAN = 1024


_KEYS: dict[str, tuple[str, dataclasses.Field]] = {}


def key_field(key: str) -> tuple[str, dataclasses.Field]:
    """(section, field) of a config key (the key table is built once: the page asks for hundreds of keys)."""
    if not _KEYS:
        _KEYS.update(all_keys())
    return _KEYS[key]


def _plain(tp: Any) -> tuple[Any, bool]:
    """(inner type, optional?)."""
    if get_origin(tp) in (typing.Union, types.UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        return (args[0] if len(args) == 1 else tp), len(args) != len(get_args(tp))
    return tp, False


def default_value(key: str) -> Any:
    """The dataclass default of a config key."""
    _, f = key_field(key)
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:  # type: ignore[misc]
        return f.default_factory()  # type: ignore[misc]
    return None


def _low(meta: Any) -> Any:
    """Where a number widget starts: the field's ``board_min`` where it has one (a config may go lower), else its
    ``min``."""
    return meta.get("board_min", meta.get("min"))


def widget_kind(key: str) -> str:
    """dropdown, checkbox, tristate, slider, number or text."""
    section, f = key_field(key)
    tp = field_type(section, key)
    if literal_choices(tp) is not None:
        return "dropdown"
    inner, optional = _plain(tp)
    if inner is bool:
        return "tristate" if optional else "checkbox"
    if inner in (int, float):
        lo, hi = _low(f.metadata), f.metadata.get("max")
        if lo is not None and hi is not None and not optional:
            if inner is float and f.metadata.get("step") is not None:
                return "slider"
            if inner is int and hi - lo <= SLIDER_MAX_SPAN:
                return "slider"
        return "number"
    return "text"


def choices_of(key: str) -> list[str]:
    section, _ = key_field(key)
    return [NONE if c is None else str(c) for c in literal_choices(field_type(section, key)) or []]


def to_widget(key: str, value: Any) -> Any:
    """A config value as the widget shows it."""
    kind = widget_kind(key)
    if kind == "dropdown":
        return NONE if value is None else str(value)
    if kind == "tristate":
        return AUTO if value is None else ("true" if value else "false")
    if kind == "number" and value is None:
        return 0  # an optional number that is not set
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) > MAX_WHOLE_NUMBER:
        # a whole number past 64 bits (an old config's) cannot travel to the page, which would not render at all;
        # shown as a float, it stays visible and Start refuses it with the reason
        try:
            return float(value)
        except OverflowError:
            return None
    if kind == "checkbox":
        return bool(value)
    if kind == "text":
        if value is None:
            return ""
        if isinstance(value, (list, tuple)):
            return ",".join(str(v) for v in value)
        if isinstance(value, dict):  # settings given inline (fsdp_config): JSON, which the engine reads back
            return json.dumps(value, ensure_ascii=False)
        return str(value)
    return value


def from_widget(key: str, value: Any) -> Any:
    """A widget's value as the config wants it (validation happens in ``engine.config.build_config``)."""
    kind = widget_kind(key)
    section, _ = key_field(key)
    _, optional = _plain(field_type(section, key))
    if kind == "dropdown":
        return None if value in (NONE, None) else value
    if kind == "tristate":
        return None if value in (AUTO, None, "") else value == "true"
    if kind == "text":
        text = "" if value is None else str(value).strip()
        return None if (optional and text == "") else text
    if kind == "number":
        if value is None or value == "":
            return None if optional else default_value(key)  # a required one: the handlers refuse it first
        if optional and value == 0:
            return None  # optional numbers show "not set" as 0 (see make_widget)
        inner, _ = _plain(field_type(section, key))
        if key == "val_size" and float(value) >= 1 and float(value).is_integer():
            return int(value)  # a row count: LLaMA-Factory reads 1.0 as the fraction "every row" (refused)
        return int(value) if inner is int else float(value)
    if kind == "slider":
        if value is None or value == "":
            return default_value(key)  # the handlers refuse it first, by name (empty_problems)
        inner, _ = _plain(field_type(section, key))
        return int(round(value)) if inner is int else float(value)
    return bool(value)


def label(key: str) -> Any:
    return L(f"f_{key}")


def info(key: str) -> Any:
    return L(f"h_{key}") + f" · {key}"


def elem_id(key: str, tab: str = "") -> str:
    """A config widget's element id: ``cfg-<key>`` on the Train tab (and the top bar), ``cfg-<tab>-<key>`` on the
    other tabs, which repeat some of its keys (cutoff_len, max_samples, temperature...): ids are unique in a page."""
    return f"cfg-{tab}-{key}" if tab else f"cfg-{key}"


def make_widget(key: str, value: Any = None, *, tab: str = "", **kwargs: Any) -> gr.components.Component:
    """The gradio component for a config key, showing ``value`` (the field default when None is given); ``tab``
    names the tab it is on where that is not Train (see :func:`elem_id`)."""
    _, f = key_field(key)
    kind = widget_kind(key)
    shown = to_widget(key, default_value(key) if value is None else value)
    common: dict[str, Any] = {"label": label(key), "info": info(key), "elem_id": elem_id(key, tab), **kwargs}
    meta = f.metadata
    if kind == "dropdown":
        return gr.Dropdown(choices=choices_of(key), value=shown, **common)
    if kind == "tristate":
        return gr.Dropdown(choices=[AUTO, "true", "false"], value=shown, **common)
    if kind == "checkbox":
        return gr.Checkbox(value=shown, **common)
    section, _ = key_field(key)
    inner, _ = _plain(field_type(section, key))
    if kind == "slider":
        step = meta.get("step") or (1 if inner is int else 0.01)
        return gr.Slider(minimum=_low(meta), maximum=meta["max"], step=step, value=shown, **common)
    if kind == "number":
        step = meta.get("step") or (1 if inner is int else 1e-6)
        _, optional = _plain(field_type(section, key))
        # an optional number (max_samples, eval_steps...) is "not set" at 0, so its box starts at 0
        low = min(0, meta["min"]) if optional and meta.get("min") is not None else _low(meta)
        return NumberBox(
            value=shown,
            minimum=low,
            maximum=meta.get("max"),
            step=step,
            precision=0 if inner is int else None,
            **common,
        )
    return gr.Textbox(value=shown, **common)


def is_empty(key: str, value: Any) -> bool:
    """A required number's box the browser sent nothing for: emptied, or holding what the browser cannot keep as a
    number (5,000 digits read as infinity, sent as nothing). The two cannot be told apart, and neither is a value:
    :func:`from_widget` would put the field's default in its place unseen. An optional number's empty box means
    "not set" and is no problem."""
    if widget_kind(key) not in ("number", "slider") or (value is not None and value != ""):
        return False
    section, _ = key_field(key)
    return not _plain(field_type(section, key))[1]


def empty_problems(keys: list[str], values: list[Any] | tuple[Any, ...], lang: str | None) -> list[Any]:
    """A problem in ``lang`` for each required number box (``keys`` in ``values``' order) that is empty, naming it
    by its label and key, with the number it would otherwise have run with."""
    from engine.errors import Problem

    return [Problem(t(lang, "form_empty_number", label=t(lang, f"f_{key}"), name=key, default=default_value(key)),
                    "config") for key, value in zip(keys, values) if is_empty(key, value)]


def collect(keys: list[str], values: list[Any] | tuple[Any, ...]) -> dict[str, Any]:
    """Widget values (in ``keys`` order) to a flat config mapping."""
    return {key: from_widget(key, value) for key, value in zip(keys, values)}


def fill(keys: list[str], mapping: dict[str, Any]) -> list[Any]:
    """Widget values for ``keys`` from a config mapping (field defaults for keys it lacks)."""
    return [to_widget(key, mapping[key] if key in mapping else default_value(key)) for key in keys]


def advanced_keys(sections: tuple[str, ...], exclude: set[str] | frozenset[str] = frozenset()) -> list[str]:
    """The keys marked ``advanced`` in the given config sections."""
    return [
        key
        for key, (section, f) in all_keys().items()
        if section in sections and f.metadata.get("advanced") and key not in exclude
    ]


def skip_unchanged(widgets: list[Any], values: list[Any]) -> list[Any]:
    """``values`` for ``widgets`` (plain values or ``gr.update`` dicts) with each one the page already shows as it
    was built replaced by ``gr.skip()``: a value sent again, equal or not, makes several gradio widgets fire their
    ``change`` (and whatever listens to it) as if the user had changed it."""
    out = []
    for widget, value in zip(widgets, values, strict=True):
        if isinstance(value, dict):
            same = value.get("value") == widget.value and set(value) <= {"__type__", "value", "choices"}
            if same and "choices" in value:
                same = gr.Dropdown(choices=value["choices"]).choices == getattr(widget, "choices", None)
        else:
            same = value == widget.value
        out.append(gr.skip() if same else value)
    return out
