"""What the board shows of GRPO/RLOO runs: reward, KL and completion-length curves, recent completions with their
rewards, reward curves of several runs for History, and the "try it" scoring (in a subprocess).

The board never imports user reward code: saving a reward from the code box only writes the file and reads it
back as text (``engine.rewards.check_user_reward``); scoring runs ``lf-engine rewards`` as a child process.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import os
import shutil
import signal
import subprocess
import threading
from collections import deque
from pathlib import Path
from typing import Any

import pandas as pd

from app.context import Board
from app.curves import Curve, curve_of
from app.forms import yaml_text
from app.jobs import JobError, child_env
from app.progress_view import typed_frame
from engine.runs import EventReader, write_text_atomic

logger = logging.getLogger(__name__)

RL_STAGES = ("grpo", "rloo")
TRY_TIMEOUT = 300
RECENT_COMPLETIONS = 24
CURVE_KEYS = ("reward", "kl", "completions/mean_length", "completions/clipped_ratio")
REWARD_TYPES = {"step": "int64", "reward": "float64", "series": "str"}
REWARD_CODE = '''import re


def my_reward(prompts, completions, answer=None, **kwargs):
    """One number per completion; `answer` is the reference reply of each row."""
    return [1.0 if re.search(r"\\d", completion) else 0.0 for completion in completions]
'''


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


class RLFollower:
    """Reads a run's events.jsonl and completions.jsonl incrementally (byte offsets), keeping the RL curves and
    the latest completions."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        self._events = EventReader(self.folder / "events.jsonl")
        self._samples = EventReader(self.folder / "completions.jsonl")
        self.curves: dict[str, Curve] = {}  # bounded (app.curves): flat however long the run
        self.recent: deque[dict[str, Any]] = deque(maxlen=RECENT_COMPLETIONS)
        self.stage: str | None = None
        self.version = 0
        self._lock = threading.Lock()

    def refresh(self) -> RLFollower:
        with self._lock:
            changed = False
            for event in self._events.iter_new():
                changed = True
                if event.get("event") == "start":
                    self.stage = event.get("stage") or self.stage
                step = event.get("step")
                if event.get("event") != "log" or "train_loss" in event or not isinstance(step, int):
                    continue
                for key, value in event.items():
                    value = _number(value)
                    if value is not None and (key in CURVE_KEYS or (key.startswith("rewards/") and
                                                                     key.endswith("/mean"))):
                        if key not in self.curves:
                            self.curves[key] = Curve()
                        self.curves[key].append(step, value)
            for sample in self._samples.iter_new():
                changed = True
                self.recent.append(sample)
            if changed:
                self.version += 1
        return self

    def is_rl(self) -> bool:
        return self.stage in RL_STAGES or "reward" in self.curves


_FOLLOWERS: dict[str, RLFollower] = {}
_FOLLOWERS_LOCK = threading.Lock()


def follower(board: Board, run_id: str) -> RLFollower:
    """The shared follower of a run (one per run folder, like the job manager's monitors)."""
    folder = board.jobs.runs_dir / run_id
    with _FOLLOWERS_LOCK:
        found = _FOLLOWERS.get(str(folder))
        if found is None:
            if len(_FOLLOWERS) > 64:
                _FOLLOWERS.clear()
            found = _FOLLOWERS[str(folder)] = RLFollower(folder)
    return found.refresh()


def reward_frame(curves: dict[str, list[tuple[int, float]]], total_label: str) -> pd.DataFrame | None:
    """step / reward / series: the weighted total and each function's mean; None before the first point."""
    rows = [{"step": s, "reward": v, "series": total_label} for s, v in curves.get("reward", [])]
    for key, points in sorted(curves.items()):
        if key.startswith("rewards/"):
            name = key[len("rewards/"):-len("/mean")]
            rows += [{"step": s, "reward": v, "series": name} for s, v in points]
    return typed_frame(rows, REWARD_TYPES) if rows else None


def metric_frame(curves: dict[str, list[tuple[int, float]]], key: str, column: str) -> pd.DataFrame | None:
    rows = [{"step": s, column: v} for s, v in curves.get(key, [])]
    return typed_frame(rows, {"step": "int64", column: "float64"}) if rows else None


MAX_REWARD_COLUMNS = 32
"""Reward functions shown as columns of the completions table at most (a run has a few; a completions.jsonl from
elsewhere may name thousands)."""


def _per_function(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample's ``rewards`` as the engine writes them (name -> number or None); {} for anything else (a
    completions.jsonl from elsewhere)."""
    per = sample.get("rewards")
    return per if isinstance(per, dict) else {}


def function_columns(names: list[str], fixed: tuple[str, ...]) -> dict[str, str]:
    """name -> column label of each reward function in a table whose other columns are ``fixed``: the name, or
    ``name()`` where it is one of them (a user's function called ``reward`` or ``step`` took that column's place)."""
    return {name: f"{name}()" if name in fixed else name for name in names}


COMPLETION_COLUMNS = ("step", "reward", "completion", "prompt")
TRY_COLUMNS = ("reward", "tokens", "completion", "answer")


def completions_frame(samples: list[dict[str, Any]]) -> pd.DataFrame:
    """Newest first: step, total reward, each function's reward, the completion and the end of its prompt. What is
    not the engine's kind of value (a run folder from elsewhere) is left empty: a step that is no whole number, a
    reward that is no finite number, ``rewards`` that are no table of them."""
    names: list[str] = []
    for sample in samples:
        names += [n for n in _per_function(sample) if n not in names][:MAX_REWARD_COLUMNS - len(names)]
    labels = function_columns(names, COMPLETION_COLUMNS)
    rows = []
    for sample in reversed(samples):
        per = _per_function(sample)
        step = sample.get("step")
        row = {"step": step if isinstance(step, int) and not isinstance(step, bool) else None,
               "reward": _number(sample.get("reward"))}
        row.update({label: _number(per.get(n)) for n, label in labels.items()})
        row["completion"] = str(sample.get("completion", ""))[:400]
        row["prompt"] = str(sample.get("prompt", ""))[-160:]
        rows.append(row)
    return pd.DataFrame(rows, columns=["step", "reward", *labels.values(), "completion", "prompt"])


def live_view(board: Board, run_id: str | None, total_label: str) -> dict[str, Any] | None:
    """Charts and table of a watched RL run (None when the run is not an RL run or does not exist)."""
    if not run_id:
        return None
    try:
        board.jobs.monitor(run_id)
    except JobError:
        return None
    watched = follower(board, run_id)
    if not watched.is_rl():
        return None
    with watched._lock:
        curves = {k: v.points() for k, v in watched.curves.items()}
        recent = list(watched.recent)
    return {
        "version": watched.version,
        "reward": reward_frame(curves, total_label),
        "kl": metric_frame(curves, "kl", "kl"),
        "length": metric_frame(curves, "completions/mean_length", "tokens"),
        "completions": completions_frame(recent),
    }


def _reward_point(event: dict[str, Any]) -> tuple[int, float] | None:
    value = _number(event.get("reward"))
    if event.get("event") == "log" and isinstance(event.get("step"), int) and value is not None:
        return event["step"], value
    return None


def reward_points(folder: Path) -> list[tuple[int, float]]:
    """(step, mean total reward) of a run, read once, line by line, and bounded for a chart (History)."""
    return curve_of(Path(folder) / "events.jsonl", _reward_point)


def reward_overlay(board: Board, run_ids: list[str]) -> pd.DataFrame | None:
    """step / reward / run for the RL runs among ``run_ids``; None when none of them logged a reward."""
    rows = [{"step": s, "reward": v, "run": run_id}
            for run_id in run_ids for s, v in reward_points(board.jobs.runs_dir / run_id)]
    return typed_frame(rows, {"step": "int64", "reward": "float64", "run": "str"}) if rows else None


# -- writing a reward from the code box ------------------------------------------------------------------
def reward_function_name(code: str) -> str | None:
    """The name of the first top-level function in ``code`` (read, never run); None when there is none."""
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return None
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node.name
    return None


def save_reward_code(rewards_dir: Path, code: str) -> tuple[str | None, list[str]]:
    """Write ``code`` as ``rewards_dir/<function>.py`` and check it as text; (spec or None, problems)."""
    from engine.rewards import check_user_reward

    try:
        ast.parse(code)
    except SyntaxError as err:
        return None, [f"line {err.lineno}: {err.msg}"]
    name = reward_function_name(code)
    if name is None:
        return None, ["no function: write `def my_reward(prompts, completions, **kwargs)`"]
    rewards_dir.mkdir(parents=True, exist_ok=True)
    path = rewards_dir / f"{name}.py"
    write_text_atomic(path, code)  # whole, and never through a link planted under a temp name
    spec = f"{path}:{name}"
    problems = check_user_reward(spec)
    return (None if problems else spec), problems


def add_reward(current: str | None, spec: str) -> str:
    """``reward_funcs`` text with ``spec`` added (an older version of the same file's function replaced)."""
    items = [x.strip() for x in (current or "").split(",") if x.strip()]
    path = spec.rsplit(":", 1)[0]
    items = [x for x in items if x.rsplit(":", 1)[0] != path]
    return ", ".join([*items, spec])


def with_builtins(current: str | None, chosen: list[str], builtins: list[str]) -> str:
    """``reward_funcs`` text with the built-ins set to ``chosen`` (user functions kept, in place after them)."""
    items = [x.strip() for x in (current or "").split(",") if x.strip()]
    others = [x for x in items if x not in builtins]
    ordered = [b for b in builtins if b in chosen]
    return ", ".join([*ordered, *others])


# -- "try it" --------------------------------------------------------------------------------------------
_SCORERS_LOCK = threading.Lock()
STOP_FIRST = "stop"
"""``board.scorers``' value for a session whose Stop came before its scoring process started."""


class TryError(RuntimeError):
    """Scoring could not run; the message says why."""


class TryStopped(TryError):
    """Scoring was stopped from the page (:func:`stop_try`)."""


def run_try(board: Board, mapping: dict[str, Any], prompts: int = 3, samples: int = 4,
            session: str = "") -> dict[str, Any]:
    """Run ``lf-engine rewards`` on ``mapping`` in a child process and return its result (TryError on failure).

    The process is registered under ``session`` (the browser session) in ``board.scorers`` while it runs, so that
    :func:`stop_try` can end it (a Stop that came before the process started ends it as soon as it starts); a
    session's new "try it" ends its earlier one.
    """
    scratch = board.workspace.scratch_call("rewards-")  # private: no name in it can be planted in advance
    stem = scratch / "rewards"
    config, out, log = stem.with_suffix(".yaml"), stem.with_suffix(".json"), stem.with_suffix(".log")
    mapping = {**mapping, "output_dir": str(scratch / "try")}
    try:
        config.write_text(yaml_text(mapping), encoding="utf-8")
    except BaseException:
        shutil.rmtree(scratch, ignore_errors=True)
        raise
    command = [*board.jobs.engine_command, "rewards", str(config), "--out", str(out), "--prompts", str(prompts),
               "--samples", str(samples)]
    try:
        stop_try(board, session)
        with open(log, "wb") as fh:
            proc = subprocess.Popen(command, stdout=fh, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    cwd=board.jobs.cwd, env=child_env(), start_new_session=True)
        with _SCORERS_LOCK:
            stop_first = board.scorers.get(session) == STOP_FIRST
            board.scorers[session] = proc
        if stop_first:
            stop_try(board, session)
        try:
            proc.wait(timeout=TRY_TIMEOUT)
        except subprocess.TimeoutExpired:
            _end(proc)
            raise
        finally:
            with _SCORERS_LOCK:
                if board.scorers.get(session) is proc:
                    del board.scorers[session]
            _kill_group(proc)  # what a reward left running in the background ends with the scoring
        if getattr(proc, "lf_stopped", False):
            raise TryStopped("stopped")
        if proc.returncode == 0 and out.is_file():
            return json.loads(out.read_text(encoding="utf-8"))
        lines = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
        errors = [line.removeprefix("error: ") for line in lines if line.startswith("error: ")]
        if errors:  # a user error: its message and the lines that follow it
            start = lines.index("error: " + errors[0])
            raise TryError("\n".join([errors[0], *lines[start + 1:start + 12]]))
        raise TryError("\n".join(lines[-12:]) or f"the scoring process exited with code {proc.returncode}")
    except subprocess.TimeoutExpired:
        raise TryError(f"scoring took longer than {TRY_TIMEOUT} s") from None
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def stop_try(board: Board, session: str = "", *, before_start: bool = False) -> bool:
    """End ``session``'s running "try it" process (and what it started); False when none is running.

    With ``before_start`` (the page's Stop), a Stop that comes while the process is still being started is kept
    and ends it as soon as it is registered.
    """
    with _SCORERS_LOCK:
        proc = board.scorers.get(session)
        if not isinstance(proc, subprocess.Popen) or proc.poll() is not None:
            if before_start:
                board.scorers[session] = STOP_FIRST
            return False
        proc.lf_stopped = True  # type: ignore[attr-defined]
    _end(proc)
    return True


def forget_stop(board: Board, session: str = "") -> None:
    """Drop a Stop kept for ``session`` (a new "try it" begins)."""
    with _SCORERS_LOCK:
        if board.scorers.get(session) == STOP_FIRST:
            del board.scorers[session]


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM to the process's session (the scorer and whatever a reward started), SIGKILL to what is left of it
    after 5 s, or once the scorer itself has ended (a child that ignores SIGTERM goes too)."""
    _signal_group(proc, signal.SIGTERM)
    _kill_group(proc)


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL to what is left of the scorer's process session (a reward's background program), and reap it."""
    if not _signal_group(proc, signal.SIGKILL):  # pragma: no cover - SIGKILL is not ignored
        logger.warning("The scoring process %d did not end.", proc.pid)


def _signal_group(proc: subprocess.Popen, sig: int) -> bool:
    """Send ``sig`` to the scorer's process session and wait up to 5 s for the scorer; True once it has ended."""
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        return False
    return True


def try_frame(result: dict[str, Any]) -> pd.DataFrame:
    """The scored samples as a table: total reward, each function's reward, tokens, completion, answer."""
    labels = function_columns(list(result.get("rewards") or []), TRY_COLUMNS)
    rows = []
    for row in result.get("rows") or []:
        out = {"reward": row.get("reward")}
        out.update({label: (row.get("rewards") or {}).get(n) for n, label in labels.items()})
        out.update({"tokens": row.get("tokens"), "completion": row.get("completion"), "answer": row.get("answer")})
        rows.append(out)
    return pd.DataFrame(rows, columns=["reward", *labels.values(), "tokens", "completion", "answer"])


def try_summary(result: dict[str, Any]) -> tuple[str, str]:
    """(the mean of each reward, the functions that raised on some completions with their counts) as short text:
    two parts, so that a reward function named ``errors`` is not taken for the count of errors."""
    means = result.get("mean") or {}
    mean_text = ", ".join(f"{name} {value:.3f}" for name, value in means.items() if isinstance(value, (int, float)))
    errors = {k: v for k, v in (result.get("errors") or {}).items() if v}
    return mean_text, ", ".join(f"{k} {v}" for k, v in errors.items())
