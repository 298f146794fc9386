"""A stand-in for ``python -m engine`` for the board's GRPO/RLOO views: ``train`` writes the events and the
completions.jsonl of an RL run whose reward rises; ``rewards CONFIG --out FILE`` writes a "try it" result.

``reward_funcs`` in the config names the rewards; one containing ``broken`` makes ``rewards`` fail as the engine
does on a user error (``error: ...`` and exit 2); one containing ``hang`` starts a program that ignores SIGTERM and never
returns, ``background`` starts that program and scores (its pid goes to the config's ``hang_pid_file``).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import yaml


def names_of(cfg: dict) -> list[str]:
    names = [n.strip().rsplit(":", 1)[-1] for n in str(cfg.get("reward_funcs") or "").split(",") if n.strip()]
    return names + (["reward_model"] if cfg.get("reward_model") else [])


def rewards(cfg: dict, out: Path, prompts: int) -> int:
    if "hang" in str(cfg.get("reward_funcs")) or "background" in str(cfg.get("reward_funcs")):
        import subprocess  # a reward that starts a program ignoring SIGTERM, then never returns (or returns)

        child = subprocess.Popen([sys.executable, "-c", "import signal, time; "
                                  "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(300)"])
        Path(str(cfg["hang_pid_file"])).write_text(str(child.pid))
        if "hang" in str(cfg.get("reward_funcs")):
            time.sleep(300)
    if "broken" in str(cfg.get("reward_funcs")):
        print("error: Reward file `broken.py` does not import: SyntaxError: invalid syntax (broken.py, line 1).")
        return 2
    names = names_of(cfg)
    rows = [{"prompt": f"p{i}", "answer": "42", "completion": f"answer {i}{j}", "tokens": 3,
             "rewards": {n: float((i + j) % 2) for n in names}, "reward": float((i + j) % 2) * len(names)}
            for i in range(prompts) for j in range(2)]
    mean = {n: 0.5 for n in names} | {"reward": 0.5 * len(names)}
    out.write_text(json.dumps({"rewards": names, "weights": [1.0] * len(names), "rows": rows, "mean": mean,
                               "errors": {n: 0 for n in names}, "cwd": os.getcwd()}))
    print("scored", len(rows), flush=True)
    return 0


def train(cfg: dict) -> int:
    run_dir = Path(cfg["output_dir"])
    run_file, events = run_dir / "run.json", run_dir / "events.jsonl"

    def update(**fields):
        data = json.loads(run_file.read_text()) if run_file.exists() else {}
        data.update(fields)
        tmp = run_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, run_file)

    def emit(**event):
        with open(events, "a") as fh:
            fh.write(json.dumps({"time": time.time(), **event}) + "\n")

    update(status="running", pid=os.getpid(), pgid=os.getpgid(0))
    steps, names = int(cfg.get("fake_steps", 4)), names_of(cfg) or ["format"]
    emit(event="start", total_steps=steps, stage=cfg.get("stage", "grpo"))
    for step in range(1, steps + 1):
        values = {f"rewards/{n}/mean": step / steps / (k + 1) for k, n in enumerate(names)}
        emit(event="log", step=step, total_steps=steps, loss=0.1, lr=1e-3, reward=sum(values.values()),
             reward_std=0.1, kl=0.01 * step, **{"completions/mean_length": 20.0 - step,
                                                 "completions/clipped_ratio": 0.0}, **values)
        with open(run_dir / "completions.jsonl", "a") as fh:
            for j in range(2):
                fh.write(json.dumps({"step": step, "prompt": "<|im_start|>user\nHi", "completion": f"c{step}-{j}",
                                     "rewards": {n: float(j) for n in names}, "reward": float(j)}) + "\n")
        time.sleep(float(cfg.get("fake_sleep", 0.01)))
    emit(event="end", status="completed", error=None, metrics={})
    update(status="completed", exit_code=0, finished_at=time.time(), error=None)
    return 0


def main() -> int:
    command, config_path = sys.argv[1], Path(sys.argv[2])
    cfg = yaml.safe_load(config_path.read_text()) or {}
    if command == "rewards":
        args = sys.argv[3:]
        out = Path(args[args.index("--out") + 1])
        prompts = int(args[args.index("--prompts") + 1]) if "--prompts" in args else 3
        return rewards(cfg, out, prompts)
    return train(cfg)


if __name__ == "__main__":
    raise SystemExit(main())
