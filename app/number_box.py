"""The board's number boxes: gradio's, except that an out-of-range value reaches the handlers."""

from __future__ import annotations

import gradio as gr

from engine.config.limits import MAX_WHOLE_NUMBER


class NumberBox(gr.Number):
    """gradio's number box whose out-of-range values reach the handlers. gradio's own refused such a value before any
    handler ran, with one untranslated toast naming neither the field nor the other problems ("Value 0 is less than
    minimum value 8."); the engine's check names every out-of-range key at once, in the board's message. The box
    still carries its minimum and maximum for the browser's arrows.

    A module of its own: gradio keeps a stub of every component class beside its module (``number_box.pyi``)."""

    def get_block_name(self) -> str:  # the page's own Number component draws it
        return "number"

    def preprocess(self, payload: float | None) -> float | int | None:
        return None if payload is None else self.round_to_precision(payload, self.precision)

    def postprocess(self, value: float | int | None) -> float | int | None:
        """As gradio's, except that a whole number past 64 bits (an old config's ``max_samples: 1e21``) goes to the
        page as a float: the page's JSON cannot carry such an int, and the whole page failed to render."""
        shown = super().postprocess(value)
        if isinstance(shown, int) and abs(shown) > MAX_WHOLE_NUMBER:
            try:
                return float(shown)
            except OverflowError:
                return None
        return shown
