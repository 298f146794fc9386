"""Follows one run folder incrementally: events.jsonl and stdout.log are read from the last byte offset only.

The job manager keeps one :class:`RunMonitor` per run, so that every page polling the same run shares the
readers instead of re-parsing the files on each tick.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.curves import Curve
from engine.runs import FINAL_STATUSES, EventReader, RunFolder, TextFollower, read_regular

LOG_LINES_KEPT = 400
ERROR_LINES = 25


@dataclass
class RunMonitor:
    """Accumulates what a run has reported so far."""

    folder: RunFolder
    start: dict[str, Any] | None = None
    last_log: dict[str, Any] | None = None
    last_eval: dict[str, Any] | None = None
    end: dict[str, Any] | None = None
    last_progress: dict[str, Any] | None = None
    loss: Curve = field(default_factory=Curve)
    eval_loss: Curve = field(default_factory=Curve)
    lr: Curve = field(default_factory=Curve)
    """The curves, bounded (app.curves): memory and what a chart is sent stay flat however long the run is."""
    checkpoints: list[dict[str, Any]] = field(default_factory=list)
    version: int = 0
    """Grows whenever something new was read; pages skip redrawing when it has not changed."""

    def __post_init__(self) -> None:
        self._events = EventReader(self.folder.events_path)
        self._log = TextFollower(self.folder.log_path)
        self._lines: deque[str] = deque(maxlen=LOG_LINES_KEPT)
        self._partial = ""
        self._lock = threading.Lock()
        self._info: dict[str, Any] = {}
        self._info_mtime = -1.0

    # -- reading ------------------------------------------------------------------------------------------
    def refresh(self) -> RunMonitor:
        """Read what was appended since the last call (cheap when nothing changed)."""
        with self._lock:
            changed = self._read_info()
            for event in self._events.iter_new():  # a long run's first read: 1 MB at a time
                self._apply(event)
                changed = True
            text = self._log.read_new()
            if text:
                changed = True
                text = self._partial + text.replace("\r\n", "\n")
                parts = text.split("\n")
                self._partial = parts.pop()
                for line in parts:
                    # progress bars rewrite their line with \r: keep the last state only
                    self._lines.append(line.rsplit("\r", 1)[-1])
            if changed:
                self.version += 1
        return self

    def _read_info(self) -> bool:
        try:
            mtime = self.folder.run_path.stat().st_mtime
        except OSError:
            return False
        if mtime == self._info_mtime:
            return False
        self._info_mtime = mtime
        self._info = self.folder.info()
        return True

    def _apply(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        step = event.get("step")
        if kind == "start":
            self.start = event
        elif kind == "log":
            # the trainer's closing summary (train_loss over the whole run) is not a point of the curve
            if "train_loss" in event:
                return
            self.last_log = event
            if isinstance(step, int):
                if isinstance(event.get("loss"), (int, float)):
                    self.loss.append(step, float(event["loss"]))
                if isinstance(event.get("lr"), (int, float)):
                    self.lr.append(step, float(event["lr"]))
        elif kind == "eval":
            earlier = self.last_eval or {}
            same_step = bool(earlier) and earlier.get("step") == step
            self.last_eval = {**earlier, **event} if same_step else event  # eval_on_each_dataset: one event per set
            if isinstance(step, int) and isinstance(event.get("eval_loss"), (int, float)):
                self.eval_loss.append(step, float(event["eval_loss"]))
        elif kind == "checkpoint":
            self.checkpoints.append(event)
        elif kind == "progress":
            self.last_progress = event
        elif kind == "end":
            self.end = event

    # -- views --------------------------------------------------------------------------------------------
    @property
    def info(self) -> dict[str, Any]:
        return self._info

    @property
    def status(self) -> str:
        return str(self._info.get("status", "unknown"))

    def log_text(self, lines: int = 200) -> str:
        with self._lock:
            kept = list(self._lines)[-lines:]
            if self._partial:
                kept.append(self._partial.rsplit("\r", 1)[-1])
        return "\n".join(kept)

    def error_lines(self, error: str | None = None) -> str:
        """Why a failed run failed: the engine's error (``error``: it as the page shows it, app.run_errors), its
        traceback tail, and the last lines of its log."""
        if self.status not in ("failed",):
            return ""
        parts = []
        error = error or self._info.get("error") or (self.end or {}).get("error")
        if error:
            parts.append(str(error).strip())
        log_tail = self.log_text(ERROR_LINES).strip()
        traceback_tail = ((self.end or {}).get("metrics") or {}).get("traceback_tail")
        detail = log_tail or (str(traceback_tail).strip() if traceback_tail else "")
        if detail and all(detail not in p for p in parts):
            parts.append(detail)
        return "\n\n".join(parts)

    @property
    def error_code(self) -> str | None:
        """The stable code of why the run failed or was aborted (run.json's, else the end event's; None: not told)."""
        return self._info.get("error_code") or (self.end or {}).get("error_code")

    @property
    def error_params(self) -> dict[str, Any] | None:
        """The error's words as data, where recorded (run.json's ``error_params``, else the end event's)."""
        params = self._info.get("error_params") or (self.end or {}).get("error_params")
        return params if isinstance(params, dict) else None

    def local_error(self, lang: str | None) -> str | None:
        """The error in ``lang`` where run.json records it as data (app.run_errors), else None."""
        from app.run_errors import local_error

        return local_error(lang, self.error_code, self.error_params,
                           self._info.get("error") or (self.end or {}).get("error"))

    def progress(self) -> dict[str, Any]:
        """Step, total, fraction, loss, learning rate, tokens/s, elapsed and ETA as far as known."""
        info = self._info
        last = self.last_log or {}
        step = last.get("step")
        total = last.get("total_steps") or (self.start or {}).get("total_steps")
        if self.last_eval and (step is None or (self.last_eval.get("step") or 0) > step):
            step = self.last_eval.get("step")
        fraction = None
        if isinstance(step, (int, float)) and isinstance(total, (int, float)) and total > 0:
            fraction = min(1.0, step / total)
        elif self.last_progress and isinstance(self.last_progress.get("fraction"), (int, float)):
            fraction = float(self.last_progress["fraction"])
        status = self.status
        if status == "completed":
            fraction = 1.0
        started = info.get("launched_at") or info.get("started_at")
        finished = info.get("finished_at")
        elapsed = None
        if isinstance(started, (int, float)):
            elapsed = (finished if isinstance(finished, (int, float)) else time.time()) - started
        eta = last.get("eta") if status == "running" else None
        if eta is None and status == "running" and fraction and elapsed and self.last_progress and fraction < 1:
            eta = elapsed / fraction * (1 - fraction)
        return {
            "status": status,
            "step": step,
            "total": total,
            "fraction": fraction,
            "loss": last.get("loss"),
            "lr": last.get("lr"),
            "epoch": last.get("epoch"),
            "tokens_per_s": last.get("tokens_per_s"),
            "memory_gb": last.get("memory_gb"),
            "eval_loss": (self.last_eval or {}).get("eval_loss"),
            "perplexity": (self.last_eval or {}).get("perplexity"),
            "eval_accuracy": (self.last_eval or {}).get("eval_accuracy"),
            "eval_scores": eval_scores(self.last_eval or {}),
            "stage": (self.last_progress or {}).get("stage"),
            "elapsed": elapsed,
            "eta": eta,
            "checkpoints": len(self.checkpoints),
            "final": status in FINAL_STATUSES,
            "error": info.get("error") or (self.end or {}).get("error"),
            "metrics": (self.end or {}).get("metrics") or {},
        }

    def curves(self) -> dict[str, list[tuple[int, float]]]:
        """The loss, eval-loss and learning-rate points a chart shows: at most ``app.curves.LIMIT`` per curve (all of
        them while there are that few; else the first, the last and each stretch's low and high points)."""
        with self._lock:
            return {"loss": self.loss.points(), "eval_loss": self.eval_loss.points(), "lr": self.lr.points()}

    def last_loss(self) -> float | None:
        """The latest training loss logged (exact)."""
        with self._lock:
            last = self.loss.last
        return None if last is None else last[1]


_FINAL_LOSS: dict[str, tuple[tuple[int, int, int], float | None]] = {}
TAIL_BYTES = 64 * 1024


def _is_loss_event(event: Any) -> bool:
    return (isinstance(event, dict) and event.get("event") == "log" and "train_loss" not in event
            and isinstance(event.get("loss"), (int, float)))


def final_loss(folder: Path) -> float | None:
    """The last logged training loss of a run (for the history table).

    Read from the end of events.jsonl (the last 64 KB, the whole file only when no loss is there), and remembered
    until the file changes: a History page over a thousand finished runs neither re-reads their logs on every
    refresh nor keeps a monitor per run in memory.
    """
    path = Path(folder) / "events.jsonl"
    try:
        st = path.stat()
    except OSError:
        return None
    stamp = (st.st_ino, st.st_size, st.st_mtime_ns)
    hit = _FINAL_LOSS.get(str(path))
    if hit and hit[0] == stamp:
        return hit[1]
    loss = _tail_loss(path, st.st_size)
    _FINAL_LOSS[str(path)] = (stamp, loss)
    return loss


def _tail_loss(path: Path, size: int) -> float | None:
    import json

    try:
        tail = read_regular(path, max(0, size - TAIL_BYTES))
    except OSError:
        return None
    lines = tail.split(b"\n")
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first line may be cut
    for line in reversed(lines):
        try:
            event = json.loads(line)
        except (ValueError, RecursionError):
            continue
        if _is_loss_event(event):
            return float(event["loss"])
    if size <= TAIL_BYTES:
        return None
    loss = None
    for event in EventReader(path).read_new():
        if _is_loss_event(event):
            loss = float(event["loss"])
    return loss


def eval_scores(event: dict[str, Any]) -> list[tuple[str, float]]:
    """What an evaluation reported besides one eval_loss: each dataset's loss (``eval_on_each_dataset``:
    ``eval_NAME_loss``) and the scores of an evaluation that generates (``eval_bleu-4``, ``eval_rouge-l``)."""
    scores = [(key[len("eval_"):-len("_loss")], float(value)) for key, value in event.items()
              if key.startswith("eval_") and key.endswith("_loss") and key != "eval_loss"
              and isinstance(value, (int, float))]
    scores += [(key[len("eval_"):].upper(), float(event[key])) for key in ("eval_bleu-4", "eval_rouge-l")
               if isinstance(event.get(key), (int, float))]
    return scores
