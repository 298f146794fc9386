"""loss.png from a run's events, drawn with matplotlib (headless)."""

from __future__ import annotations

import logging
from pathlib import Path

logger = logging.getLogger(__name__)

SMOOTH_WEIGHT = 0.6
"""The smoothed line's exponential moving average keeps this share of the previous value."""

PLOT_LIMIT = 4000
"""The most points per line of loss.png (its plot is 770 pixels wide): a longer run's line keeps each stretch's lowest
and highest point (:class:`engine.curves.Curve`), so spikes stay; the smoothed line is computed over every point."""


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def plot_loss(events_path: str | Path, target: str | Path) -> Path | None:
    """Draw training (and evaluation) loss against steps; returns the file written, or None without points.

    The events are read one line at a time (:func:`engine.curves.iter_events`: only a regular file, a line past
    4 MB passed over) into bounded curves, so a run of any length is drawn in bounded memory; a named pipe or a
    device in the events file's place is not waited on."""
    from engine.curves import Curve, iter_events

    losses, smoothed, evals = Curve(PLOT_LIMIT), Curve(PLOT_LIMIT), Curve(PLOT_LIMIT)
    last = None
    for ev in iter_events(events_path):
        step = ev.get("step")
        if not _number(step):
            continue
        if ev.get("event") == "log" and _number(ev.get("loss")):
            losses.append(step, ev["loss"])
            last = ev["loss"] if last is None else last * SMOOTH_WEIGHT + (1 - SMOOTH_WEIGHT) * ev["loss"]
            smoothed.append(step, last)
        elif ev.get("event") == "eval" and _number(ev.get("eval_loss")):
            evals.append(step, ev["eval_loss"])
    if not losses:
        logger.info("No loss points to plot.")
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(*zip(*losses.points()), color="#9bb7e0", alpha=0.6, label="loss")
    if len(losses) > 3:
        ax.plot(*zip(*smoothed.points()), color="#1f5fbf", label="loss (smoothed)")
    if evals:
        ax.plot(*zip(*evals.points()), "o-", color="#d9534f", label="eval loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    target = Path(target)
    import io

    from engine.runs import write_text_atomic

    png = io.BytesIO()
    fig.savefig(png, format="png")
    plt.close(fig)
    write_text_atomic(target, png.getvalue())  # a link planted as loss.png (a resumed folder) is replaced, not written through
    return target
