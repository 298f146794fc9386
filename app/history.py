"""Run summaries for the History tab and the checkpoint picker (pure logic over run folders)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from app.curves import curve_of
from app.monitor import final_loss
from app.run_outcome import LOG_TAIL
from engine.checkpoints import weights_problem
from engine.runs import FINAL_STATUSES, RunFolder, list_runs, read_regular

ADAPTER_FILES = ("adapter_config.json", "config.json")
MAX_RUN_CONFIG_BYTES = 2_000_000
"""The largest config.yaml of a run folder read (twice the most a config file or /submit_run may be: the resolved
config adds the defaults)."""
SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it (about 10x faster: History reads a thousand configs)."""


def _holds_weights(path: Path) -> bool:
    return any((path / name).is_file() for name in ADAPTER_FILES)


def checkpoints(runs_dir: Path) -> list[tuple[str, str]]:
    """(label, path) of every trained output and checkpoint in the workspace, newest run first.

    A run's own folder counts once training saved its final adapter or model there; its ``checkpoint-N``
    folders appear as soon as they are written. A finished run's answer is remembered until its run.json or its
    folder changes (a checkpoint added or removed), so the top bar's refresh over a thousand runs does not list a
    thousand folders each time.
    """
    return scan_checkpoints(runs_dir)[0]


def scan_checkpoints(runs_dir: Path) -> tuple[list[tuple[str, str]], bool]:
    """:func:`checkpoints`, and whether a run of the workspace is queued or running (one that can still add some)."""
    out: list[tuple[str, str]] = []
    live = False
    folders = list_runs(runs_dir)
    for folder in folders:
        found, running = _run_checkpoints(folder)
        out += found
        live = live or running
    if len(_CHECKPOINTS) > len(folders):  # deleted runs
        alive = {str(f.path) for f in folders}
        for key in [k for k in _CHECKPOINTS if k not in alive and Path(k).parent == Path(runs_dir)]:
            _CHECKPOINTS.pop(key, None)
    return out, live


_CHECKPOINTS: dict[str, tuple[tuple[int, int, int], list[tuple[str, str]]]] = {}


def _run_checkpoints(folder: RunFolder) -> tuple[list[tuple[str, str]], bool]:
    """One run's part of :func:`checkpoints` (remembered while a finished run's run.json and folder are unchanged),
    and whether the run is queued or running."""
    try:
        run_st, dir_st = folder.run_path.stat(), folder.path.stat()
    except OSError:
        return [], False
    stamp = (run_st.st_ino, run_st.st_mtime_ns, dir_st.st_mtime_ns)
    hit = _CHECKPOINTS.get(str(folder.path))
    if hit and hit[0] == stamp:
        return hit[1], False
    info = folder.info()
    out: list[tuple[str, str]] = []
    if info.get("kind") == "train":
        if _holds_weights(folder.path) and info.get("status") == "completed":
            out.append((folder.id, str(folder.path)))
        found = []
        for sub in folder.path.glob("checkpoint-*"):
            if sub.is_dir() and _holds_weights(sub) and weights_problem(sub) is None:  # torn saves are left out
                try:
                    found.append((int(sub.name.split("-")[-1]), sub))
                except ValueError:
                    continue
        for step, sub in sorted(found, reverse=True):
            out.append((f"{folder.id} / checkpoint-{step}", str(sub)))
    if info.get("status") in FINAL_STATUSES:  # a live run's checkpoints are looked at every time
        _CHECKPOINTS[str(folder.path)] = (stamp, out)
    return out, info.get("status") in ("queued", "running")


_CONFIGS: dict[Path, tuple[float, dict[str, Any]]] = {}


def read_config(folder: RunFolder) -> dict[str, Any]:
    """A run's config.yaml (parsed once per version of the file)."""
    try:
        mtime = folder.config_path.stat().st_mtime
    except OSError:
        return {}
    cached = _CONFIGS.get(folder.config_path)
    if cached and cached[0] == mtime:
        return cached[1]
    try:
        data = load_run_config(folder.config_path)
    except RunConfigError:
        data = {}
    _CONFIGS[folder.config_path] = (mtime, data)
    return data


class RunConfigError(ValueError):
    """A run folder's config.yaml that cannot be read as a config; the message says why."""


class RunConfigNotMapping(RunConfigError):
    """A run folder's config.yaml that is YAML, but not ``key: value`` lines."""


def load_run_config(path: Path) -> dict[str, Any]:
    """A run folder's config.yaml as a mapping, read as a folder copied in from elsewhere may hold it.

    Raises:
        RunConfigError: not readable, not UTF-8, not YAML (a whole number past Python's 4,300 digits included),
            nested past the parser's depth, not a mapping, or an alias bomb (more values than a config may hold
            once its aliases are expanded: History showed the model cell of one such file as a 5 GB text).
    """
    from engine.config.limits import expansion_problem

    try:
        raw = read_regular(path, max_bytes=MAX_RUN_CONFIG_BYTES + 1)
        if len(raw) > MAX_RUN_CONFIG_BYTES:  # read at about 0.2-0.5 MB a second: an 11 MB one held History a minute
            raise RunConfigError(f"{path} is larger than {MAX_RUN_CONFIG_BYTES:,} bytes, more than a run's config "
                                 "holds (one the board or lf-engine starts is a few KB)")
        data = yaml.load(raw.decode("utf-8"), Loader=SAFE_LOADER)
    except UnicodeDecodeError as err:
        raise RunConfigError(f"{path} is not UTF-8 text (byte 0x{err.object[err.start]:02x} at position "
                             f"{err.start:,})") from None
    except OSError as err:
        raise RunConfigError(f"{path} cannot be read ({err.strerror or err})") from None
    except (ValueError, yaml.YAMLError) as err:
        raise RunConfigError(f"{path} is not valid YAML ({' '.join(str(err).split())[:300]})") from None
    except RecursionError:
        raise RunConfigError(f"{path} nests lists or mappings too deeply to be read") from None
    if not isinstance(data, dict):
        raise RunConfigNotMapping(f"{path} does not hold `key: value` lines")
    too_large = expansion_problem(data, str(path))
    if too_large:
        raise RunConfigError(too_large)
    return data


def _cell(value: Any) -> str:
    """A config value as History's table shows it: text as it is, a list of names joined, anything else left out."""
    if isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(item, str) for item in value):
        return ", ".join(value)
    return ""


def duration(info: dict[str, Any]) -> float | None:
    start = info.get("launched_at") or info.get("started_at")  # the engine resets started_at once it is up
    if not isinstance(start, (int, float)):
        return None
    end = info.get("finished_at")
    return (end if isinstance(end, (int, float)) else time.time()) - start


def format_seconds(seconds: float | None) -> str:
    if seconds is None:
        return ""
    seconds = int(max(0, seconds))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m}:{s:02d}"


def shown_in_history(info: dict[str, Any]) -> bool:
    """Whether a run gets a row in History (and its picker): every job except chat servers that have ended (each
    Load of the Chat tab starts one; they hold no results). A running chat server is listed, so it can be seen."""
    return info.get("kind") != "chat" or info.get("status") in ("queued", "running")


REASON_CHARS = 160


def reason(info: dict[str, Any]) -> str:
    """Why a failed or aborted run ended, in one line for the History table (the full text is in the run view):
    the error's first line, and where the error quotes the end of the run's log, its last line too."""
    if info.get("status") not in ("failed", "aborted"):
        return ""
    error = info.get("error")
    if not isinstance(error, str) or not error.strip():
        return ""
    lines = [line.strip() for line in error.strip().splitlines() if line.strip()]
    text = lines[0]
    if len(lines) > 1:
        text = text.replace(LOG_TAIL, "").rstrip() + " … " + lines[-1]
    return text if len(text) <= REASON_CHARS else text[: REASON_CHARS - 1].rstrip() + "…"


def summaries(
    runs: list[dict[str, Any]], runs_dir: Path, last_loss: Callable[[str], float | None] | None = None
) -> list[dict[str, Any]]:
    """One row per run: id, kind, status, stage, model, dataset, started, duration, final loss, queue position and,
    for a failed or aborted run, why it ended.

    ``last_loss(run_id)`` gives a run's latest training loss (the job manager's incremental monitors); without it
    the events file is read.
    """
    rows = []
    for info in runs:
        folder = RunFolder(runs_dir / info["id"])
        cfg = read_config(folder)
        loss = None
        if info.get("kind") == "train":
            loss = last_loss(info["id"]) if last_loss else final_loss(folder.path)
        started = info.get("started_at") or info.get("created_at")
        rows.append(
            {
                "id": info["id"],
                "kind": info.get("kind", ""),
                "status": info.get("status", ""),
                "queue": info.get("queue_position"),
                "stage": _cell(cfg.get("stage")) if info.get("kind") == "train" else "",
                "model": _cell(cfg.get("model_name_or_path")),
                "dataset": _cell(cfg.get("dataset")) or _cell(cfg.get("eval_dataset")),
                "started": time.strftime("%Y-%m-%d %H:%M", time.localtime(started)) if started else "",
                "duration": format_seconds(duration(info)),
                "final_loss": round(loss, 4) if loss is not None else None,
                "reason": reason(info),
            }
        )
    return rows


def _loss_point(event: dict[str, Any]) -> tuple[int, float] | None:
    if event.get("event") == "log" and "train_loss" not in event:
        step, loss = event.get("step"), event.get("loss")
        if isinstance(step, int) and isinstance(loss, (int, float)):
            return step, float(loss)
    return None


def loss_points(folder: Path) -> list[tuple[int, float]]:
    """(step, loss) of a run's training log, bounded for a chart (``app.curves``: at most ``LIMIT`` points, the
    first, the last and every stretch's low and high kept), read line by line."""
    return curve_of(Path(folder) / "events.jsonl", _loss_point)
