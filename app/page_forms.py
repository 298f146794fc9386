"""The Evaluate and Export forms as a browser tab last started them, back after a reload or a board restart.

The Train form comes back as it was last started (the workspace's ``last-used`` config); the Evaluate and Export
forms started over from the values of the board's start, so a reloaded page watched an evaluation (its run is kept
in the browser) beside a form that no longer said how it was run. Each tab's Start now keeps its form's values in the
tab's page file (:mod:`app.page_memory`, by the tab's id), and the page load sets them again. A kept value that the
widget cannot take now (a choice gone, a number out of range, a value of another type) is left at the page's own.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import gradio as gr

from app.context import Board
from app.page_memory import PageSlots, TooBig, memory, valid_page_id

logger = logging.getLogger(__name__)


def choice_values(widget: Any) -> list[Any]:
    return [c[1] if isinstance(c, (tuple, list)) else c for c in getattr(widget, "choices", None) or []]


def usable(widget: Any, value: Any) -> bool:
    """Whether ``widget`` can show a kept ``value`` as it is now."""
    if isinstance(widget, gr.Checkbox):
        return isinstance(value, bool)
    if isinstance(widget, (gr.Number, gr.Slider)):
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
            return False
        low, high = getattr(widget, "minimum", None), getattr(widget, "maximum", None)
        return (low is None or value >= low) and (high is None or value <= high)
    if isinstance(widget, (gr.Radio, gr.Dropdown)):
        custom, many = bool(getattr(widget, "allow_custom_value", False)), bool(getattr(widget, "multiselect", False))
        if many != isinstance(value, list):
            return False
        values = value if many else [value]
        return all(isinstance(v, str) and (custom or v in choice_values(widget)) for v in values)
    if isinstance(widget, gr.Textbox):
        return isinstance(value, str)
    return False


def save_form(board: Board, name: str, page_id: Any, keys: list[str], values: tuple) -> None:
    """Keep a form's values (as its Start sent them) for the tab."""
    if not valid_page_id(page_id):
        return
    try:
        memory(board).save(page_id, f"form_{name}", dict(zip(keys, values, strict=True)))
    except TooBig as err:
        logger.warning("not keeping the %s form: %s", name, err)


def restore_form(board: Board, name: str, page_id: Any, widgets: dict[str, Any]) -> tuple[Any, ...]:
    """The kept values of a form, in ``widgets`` order (skip where none is kept or the widget cannot take it)."""
    kept = memory(board).read(page_id).get(f"form_{name}") if valid_page_id(page_id) else None
    kept = kept if isinstance(kept, dict) else {}
    return tuple(kept[key] if key in kept and usable(widget, kept[key]) else gr.skip() for key, widget in widgets.items())


def wire(slots: PageSlots, board: Board, forms: dict[str, tuple[gr.Button, dict[str, Any]]]) -> None:
    """``forms``: name -> (its Start button, {key: widget}): each Start keeps its form, the page load sets it again."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden", "queue": False}
    for name, (start, widgets) in forms.items():
        keys = list(widgets)
        start.click(lambda page_id, *values, name=name, keys=keys: save_form(board, name, page_id, keys, values),
                    [slots.page_id, *widgets.values()], None, **private)
        slots.page_id.change(lambda page_id, name=name, widgets=widgets: restore_form(board, name, page_id, widgets),
                             slots.page_id, list(widgets.values()), **private)


def tab_forms(eval_tab: Any, export_tab: Any) -> dict[str, tuple[gr.Button, dict[str, Any]]]:
    """The forms kept: Evaluate's (mode, dataset folder and datasets, its settings) and Export's (folder, settings)."""
    return {
        "evaluate": (eval_tab.start_btn, {"mode": eval_tab.mode, "dataset_dir": eval_tab.dataset_dir,
                                          "dataset": eval_tab.dataset, **eval_tab.fields}),
        "export": (export_tab.start_btn, {"export_dir": export_tab.export_dir, **export_tab.fields}),
    }
