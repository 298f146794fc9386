"""Finished run folders for the board-at-scale benchmark (and its tests): run.json, config.yaml, events.jsonl and
stdout.log as a completed LoRA training leaves them, so the board lists, summarises and compares them as real runs."""

from __future__ import annotations

import json
import time
from pathlib import Path


def make_finished_runs(runs_dir: str | Path, count: int, steps: int = 100) -> list[str]:
    """Write ``count`` completed training runs under ``runs_dir`` (``steps`` log events each); returns their ids."""
    runs_dir = Path(runs_dir)
    runs_dir.mkdir(parents=True, exist_ok=True)
    now = time.time() - count * 120
    ids = []
    for i in range(count):
        run_id = f"bench-{i:05d}"
        folder = runs_dir / run_id
        folder.mkdir(exist_ok=True)
        created = now + i * 120
        (folder / "config.yaml").write_text(
            f"model_name_or_path: demo\nstage: sft\nfinetuning_type: lora\ndataset: alpaca_en_demo\n"
            f"learning_rate: {1e-4 * (1 + i % 5)}\nlora_rank: {8 * (1 + i % 3)}\noutput_dir: {folder}\n",
            encoding="utf-8")
        events = [{"time": created + 1, "event": "start", "total_steps": steps, "num_examples": 400,
                   "trainable_params": 624640, "total_params": 34318848, "device": "cpu"}]
        for step in range(1, steps + 1):
            events.append({"time": created + 1 + step, "event": "log", "step": step, "total_steps": steps,
                           "loss": round(2.5 - 1.5 * step / steps + (i % 7) * 0.01, 4), "lr": 1e-4,
                           "grad_norm": 1.0, "epoch": step / steps, "tokens_per_s": 1300.0, "tokens_seen": step * 1200,
                           "elapsed": float(step), "eta": float(steps - step), "memory_gb": 1.7})
        events.append({"time": created + steps + 2, "event": "end", "status": "completed", "error": None,
                       "metrics": {"train_loss": 1.7}})
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")
        (folder / "stdout.log").write_text("".join(f"step {s}/{steps}\n" for s in range(1, steps + 1)),
                                           encoding="utf-8")
        (folder / "run.json").write_text(json.dumps({
            "id": run_id, "kind": "train", "status": "completed", "pid": None, "pgid": None,
            "created_at": created, "started_at": created + 1, "finished_at": created + steps + 2, "exit_code": 0,
            "error": None, "command": ["python", "-m", "engine", "train", str(folder / "config.yaml")],
            "versions": {"torch": "2.13.0", "transformers": "5.24.0", "peft": "0.21.2"},
        }), encoding="utf-8")
        ids.append(run_id)
    return ids


def make_live_run(runs_dir: str | Path, run_id: str, pid: int, pid_started: float | None, total_steps: int) -> Path:
    """A training run in progress whose process is ``pid`` (the caller, which then plays the engine by appending
    steps with :func:`append_step`): a board started on the folder re-attaches it as running."""
    folder = Path(runs_dir) / run_id
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    (folder / "config.yaml").write_text(
        f"model_name_or_path: demo\nstage: sft\nfinetuning_type: lora\ndataset: alpaca_en_demo\noutput_dir: {folder}\n",
        encoding="utf-8")
    start = {"time": now, "event": "start", "total_steps": total_steps, "num_examples": 400,
             "trainable_params": 624640, "total_params": 34318848, "device": "cpu"}
    (folder / "events.jsonl").write_text(json.dumps(start) + "\n", encoding="utf-8")
    (folder / "stdout.log").write_text("training started\n", encoding="utf-8")
    (folder / "run.json").write_text(json.dumps({
        "id": run_id, "kind": "train", "status": "running", "pid": pid, "pgid": None, "pid_started": pid_started,
        "created_at": now, "started_at": now, "finished_at": None, "exit_code": None, "error": None,
        "command": ["python", "-m", "engine", "train", str(folder / "config.yaml")], "versions": {},
    }), encoding="utf-8")
    return folder


def _step_event(step: int, total_steps: int, started: float, now: float) -> dict:
    return {"time": now, "event": "log", "step": step, "total_steps": total_steps,
            "loss": round(2.5 - 1.5 * step / total_steps, 4), "lr": 1e-4 * (1 - step / total_steps),
            "grad_norm": 1.0, "epoch": step / total_steps, "tokens_per_s": 1300.0, "tokens_seen": step * 1200,
            "elapsed": now - started, "eta": float(total_steps - step), "memory_gb": 1.7}


def append_step(folder: str | Path, step: int, total_steps: int, started: float) -> None:
    """One more logged step of a live run: a log event and a log line, as the engine appends them."""
    append_steps(folder, step, step, total_steps, started)


def append_steps(folder: str | Path, first: int, last: int, total_steps: int, started: float) -> None:
    """Logged steps ``first``..``last`` of a live run at once (a long run's history, written in one go)."""
    folder = Path(folder)
    now = time.time()
    events = [_step_event(step, total_steps, started, now) for step in range(first, last + 1)]
    with (folder / "events.jsonl").open("a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(event) + "\n" for event in events))
    with (folder / "stdout.log").open("a", encoding="utf-8") as fh:
        fh.write("".join(f"step {e['step']}/{total_steps} loss {e['loss']}\n" for e in events))
