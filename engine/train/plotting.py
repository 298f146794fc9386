"""loss.png from a run's events, drawn with matplotlib (headless)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

logger = logging.getLogger(__name__)


def smooth(values: list[float], weight: float = 0.6) -> list[float]:
    """Exponential moving average that starts at the first value."""
    out, last = [], None
    for v in values:
        last = v if last is None else last * weight + (1 - weight) * v
        out.append(last)
    return out


def plot_loss(events_path: str | Path, target: str | Path) -> Path | None:
    """Draw training (and evaluation) loss against steps; returns the file written, or None without points."""
    steps, losses, eval_steps, eval_losses = [], [], [], []
    try:
        lines = Path(events_path).read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    for line in lines:
        try:
            ev = json.loads(line)
        except json.JSONDecodeError:
            continue
        if ev.get("event") == "log" and isinstance(ev.get("loss"), (int, float)):
            steps.append(ev["step"])
            losses.append(ev["loss"])
        elif ev.get("event") == "eval" and isinstance(ev.get("eval_loss"), (int, float)):
            eval_steps.append(ev["step"])
            eval_losses.append(ev["eval_loss"])
    if not steps:
        logger.info("No loss points to plot.")
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4), dpi=110)
    ax.plot(steps, losses, color="#9bb7e0", alpha=0.6, label="loss")
    if len(losses) > 3:
        ax.plot(steps, smooth(losses), color="#1f5fbf", label="loss (smoothed)")
    if eval_steps:
        ax.plot(eval_steps, eval_losses, "o-", color="#d9534f", label="eval loss")
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    target = Path(target)
    fig.savefig(target)
    plt.close(fig)
    return target
