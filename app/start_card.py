"""The status card between a Start click and the run it starts.

Train's, Evaluate's and Export's status cards follow the run a tab watches on the tab's timer. Start's handler checks
the form and queues the run, which takes a moment (more on a busy machine), and the card went on showing what it showed
before:
"No run yet" (or the previous run, as if it were the new one) until the first tick after that handler. Now a click
shows a "starting" card at once, the tab's ticks leave it alone meanwhile (the tab keeps :data:`STARTING` as the
marker of what it shows), and the card of the run started (or, when Start started nothing, of the run watched
before) replaces it as soon as Start's handler has answered.
"""

from __future__ import annotations

import html
from typing import Any

from app.i18n import t

STARTING = "starting"


def starting(lang: str) -> tuple[str, list[str]]:
    """(the card, the marker the tab keeps) as Start is pressed."""
    text = html.escape(t(lang, "progress_start_pressed"))
    return f'<div class="lf-status lf-empty">{text}</div>', [STARTING, lang]


def is_starting(seen: Any) -> bool:
    """Whether the tab's card is :func:`starting`'s: its ticks leave it alone until Start's handler has answered."""
    return isinstance(seen, list) and seen[:1] == [STARTING]
