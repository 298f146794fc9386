"""The Evaluate and Export forms as a browser tab last started them, back after a reload or a board restart.

The Train form comes back as it was last started (the workspace's ``last-used`` config); the Evaluate and Export
forms started over from the values of the board's start, so a reloaded page watched an evaluation (its run is kept
in the browser) beside a form that no longer said how it was run. Each tab's Start now keeps its form's values in the
tab's page file (:mod:`app.page_memory`, by the tab's id), and the page load sets them again. A kept value that the
widget cannot take now (a choice gone, a number out of range, a value of another type) is left at the page's own.
A picker whose choices can grow while the board runs (Evaluate's datasets: a dataset registered after the board
started) is checked against its choices as they are at the reload, and gets them with the kept pick.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

import gradio as gr

from app.context import Board
from app.page_memory import PageSlots, TooBig, memory, valid_page_id

logger = logging.getLogger(__name__)


def choice_values(widget: Any) -> list[Any]:
    return [c[1] if isinstance(c, (tuple, list)) else c for c in getattr(widget, "choices", None) or []]


Fresh = Callable[[dict[str, Any], dict[str, Any]], list[Any]]
"""(the kept form, the form's widgets) -> a picker's choices as they are now."""


def usable(widget: Any, value: Any, choices: list[Any] | None = None) -> bool:
    """Whether ``widget`` can show a kept ``value`` as it is now (``choices``: a picker's, where they changed since
    the page was built)."""
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
        known = choice_values(widget if choices is None else gr.Dropdown(choices=choices))
        return all(isinstance(v, str) and (custom or v in known) for v in values)
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


def restore_form(board: Board, name: str, page_id: Any, widgets: dict[str, Any],
                 fresh: dict[str, Fresh] | None = None, origin: Any = "") -> tuple[Any, ...]:
    """The kept values of a form, in ``widgets`` order (skip where none is kept or the widget cannot take it).
    ``fresh``: key -> its picker's choices now, sent with the kept pick; ``origin``: the tab this one is a
    duplicate of (:meth:`app.page_memory.PageMemory.fork`)."""
    if valid_page_id(page_id):
        memory(board).fork(page_id, origin)
    kept = memory(board).read(page_id).get(f"form_{name}") if valid_page_id(page_id) else None
    kept = kept if isinstance(kept, dict) else {}
    out: list[Any] = []
    for key, widget in widgets.items():
        if key not in kept:
            out.append(gr.skip())
        elif fresh and key in fresh:
            choices = fresh[key](kept, widgets)
            out.append(gr.update(choices=choices, value=kept[key]) if usable(widget, kept[key], choices)
                       else gr.skip())
        else:
            out.append(kept[key] if usable(widget, kept[key]) else gr.skip())
    return tuple(out)


def wire(slots: PageSlots, board: Board, forms: dict[str, tuple[gr.Button, dict[str, Any]]]) -> None:
    """``forms``: name -> (its Start button, {key: widget}): each Start keeps its form, the page load sets them all
    again (in one event: each event costs the page's bookkeeping a round of its own)."""
    private: dict[str, Any] = {"api_visibility": "private", "show_progress": "hidden", "queue": False}
    for name, (start, widgets) in forms.items():
        keys = list(widgets)
        start.click(lambda page_id, *values, name=name, keys=keys: save_form(board, name, page_id, keys, values),
                    [slots.page_id, *widgets.values()], None, **private)

    def restore_all(page_id: Any, origin: Any) -> tuple[Any, ...]:
        return tuple(value for name, (_, widgets) in forms.items()
                     for value in restore_form(board, name, page_id, widgets, FRESH.get(name), origin))

    slots.page_id.change(restore_all, [slots.page_id, slots.origin],
                         [widget for _, widgets in forms.values() for widget in widgets.values()], **private)


def eval_datasets(kept: dict[str, Any], widgets: dict[str, Any]) -> list[Any]:
    """Evaluate's dataset choices now, in the folder the form comes back with (the kept one, else the page's)."""
    from app.tabs.train import dataset_choices

    folder = kept.get("dataset_dir")
    if not usable(widgets["dataset_dir"], folder):
        folder = widgets["dataset_dir"].value
    return dataset_choices(folder)[0]


FRESH: dict[str, dict[str, Fresh]] = {"evaluate": {"dataset": eval_datasets}}
"""form -> its pickers whose choices are read again at a reload."""


def tab_forms(eval_tab: Any, export_tab: Any) -> dict[str, tuple[gr.Button, dict[str, Any]]]:
    """The forms kept: Evaluate's (mode, dataset folder and datasets, its settings) and Export's (folder, settings)."""
    return {
        "evaluate": (eval_tab.start_btn, {"mode": eval_tab.mode, "dataset_dir": eval_tab.dataset_dir,
                                          "dataset": eval_tab.dataset, **eval_tab.fields}),
        "export": (export_tab.start_btn, {"export_dir": export_tab.export_dir, **export_tab.fields}),
    }
