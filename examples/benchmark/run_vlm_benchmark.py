"""The demo VLM's training speed: one epoch of `examples/sft_vlm_demo.yaml` on the built-in `demo-vlm`.

    python examples/benchmark/run_vlm_benchmark.py [key=value ...]

Runs `python -m engine train` as a subprocess (building `demo-vlm` first, offline) and prints images/s and real
(non-pad) tokens/s over the epoch, the time spent preparing the data (images decoded and processed once, in the
dataset map) and the child's peak memory. A benchmark, not a test: nothing here asserts a time.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def images_trained(images_per_epoch: int, last_log: dict) -> float:
    """The images the run trained on up to its last logged step: one epoch's images times the epochs it covered (an
    override such as `max_steps=2` stops it early; `num_train_epochs=2` goes through them twice)."""
    return images_per_epoch * float(last_log.get("epoch") or 1.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("overrides", nargs="*", metavar="key=value",
                        help="extra config keys for the training job, e.g. per_device_train_batch_size=8")
    args = parser.parse_args(argv)
    here = Path(__file__).resolve()
    repo = here.parents[2]
    out = Path(tempfile.mkdtemp(prefix="lfboard-vlm-bench-"))
    env = {**os.environ, "PYTHONPATH": str(repo)}
    subprocess.run([sys.executable, "-c", "from engine.demo_vlm import ensure_demo_vlm; ensure_demo_vlm()"],
                   env=env, check=True, cwd=repo)
    cmd = [sys.executable, "-m", "engine", "train", "examples/sft_vlm_demo.yaml", f"output_dir={out}",
           "num_train_epochs=1", "logging_steps=1", "plot_loss=false", "save_strategy=no", *args.overrides]
    t0 = time.time()
    proc = subprocess.run(cmd, env=env, cwd=repo, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    wall = time.time() - t0
    if proc.returncode != 0:
        print(proc.stdout[-4000:])
        print(f"error: the job failed with exit code {proc.returncode}", file=sys.stderr)
        return 1
    events = [json.loads(x) for x in (out / "events.jsonl").read_text().splitlines() if x.strip()]
    start = next(e for e in events if e["event"] == "start")
    logs = [e for e in events if e["event"] == "log"]
    rows_per_epoch = start["num_examples"]
    images = sum(len(r["images"]) for r in json.loads((repo / "examples/data/demo_vlm.json").read_text()))
    seconds = logs[-1]["time"] - start["time"]
    rows = [
        ("rows (1 image each) / optimizer steps", f"{rows_per_epoch} / {logs[-1]['step']}"),
        ("images/s over the epoch", f"{images_trained(images, logs[-1]) / max(seconds, 1e-9):.2f}"),
        ("real (non-pad) tokens/s over the epoch", f"{logs[-1]['tokens_seen'] / max(seconds, 1e-9):.0f}"),
        ("seconds before the first step (load + data)", f"{start['time'] - t0:.1f}"),
        ("wall seconds, whole command", f"{wall:.1f}"),
        ("peak RSS of the job", f"{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 2**20:.2f} GiB"),
        ("final loss", f"{logs[-1].get('loss')}"),
    ]
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        print(f"{name:<{width}}  {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
