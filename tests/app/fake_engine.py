"""A stand-in for ``python -m engine`` in job-manager tests: follows the run-folder contract in milliseconds.

Usage: ``python fake_engine.py COMMAND CONFIG.yaml [args]``. Keys in the config steer it:
``fake_steps`` (default 5; the `api` command serves until stopped), ``fake_sleep`` (seconds per step, default 0.01), ``fake_fail`` (exit 1 with a
traceback-like message after the steps), ``fake_ignore_term`` (ignore SIGTERM: tests SIGKILL escalation),
``fake_silent_exit`` (exit 3 without writing a final status), ``fake_disk_full`` (print an ENOSPC error and exit 1
without a final status, as an engine whose disk filled up), ``fake_no_status`` (exit 0 without a final status or
end event, as an engine that could not write them), ``fake_os_exit`` (exit 0 without either and without saying
why, as user code calling ``os._exit(0)``), ``fake_stage`` (a last ``progress`` event in that stage, done/total =
steps, as evaluation and export write).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import yaml


def main() -> int:
    command, config_path = sys.argv[1], Path(sys.argv[2])
    cfg = yaml.safe_load(config_path.read_text()) or {}
    run_dir = Path(cfg["output_dir"])
    run_file = run_dir / "run.json"
    events = run_dir / "events.jsonl"

    def update(**fields):
        data = json.loads(run_file.read_text()) if run_file.exists() else {}
        data.update(fields)
        tmp = run_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(data))
        os.replace(tmp, run_file)

    def emit(**event):
        with open(events, "a") as fh:
            fh.write(json.dumps({"time": time.time(), **event}) + "\n")

    stop = {"now": False}
    if cfg.get("fake_ignore_term"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))

    import psutil

    update(status="running", pid=os.getpid(), pgid=os.getpgid(0), pid_started=psutil.Process().create_time())
    if os.environ.get("HF_TOKEN"):  # test probe: a secret handed over by environment (recorded as a hash only)
        import hashlib

        update(hf_token_sha256=hashlib.sha256(os.environ["HF_TOKEN"].encode()).hexdigest())
    print(f"fake engine: {command} {config_path} {' '.join(sys.argv[3:])}", flush=True)
    if command == "api":
        import hashlib

        key = os.environ.get("LF_ENGINE_API_KEY", "")  # recorded as a hash only, as a test probe
        update(host="127.0.0.1", port=12345, ready=True, key_sha256=hashlib.sha256(key.encode()).hexdigest())
    # a chat server serves until it is unloaded, as the real one does; other commands take 5 quick steps
    steps = int(cfg.get("fake_steps", 100_000 if command == "api" else 5))
    emit(event="start", total_steps=steps, num_examples=steps * 2)
    for step in range(1, steps + 1):
        if stop["now"]:
            emit(event="checkpoint", step=step - 1, path=str(run_dir / f"checkpoint-{step - 1}"))
            emit(event="end", status="aborted", error="stopped by request", metrics={})
            update(status="aborted", exit_code=130, finished_at=time.time(), error="stopped by request")
            print("stopped.", flush=True)
            return 130
        time.sleep(float(cfg.get("fake_sleep", 0.01)))
        loss = 2.0 / step
        emit(
            event="log",
            step=step,
            total_steps=steps,
            loss=loss,
            lr=0.001 * (1 - step / (steps + 1)),
            tokens_per_s=1000.0,
            elapsed=step * 0.01,
            eta=(steps - step) * 0.01,
        )
        print(f"step {step}/{steps} loss={loss:.3f}", flush=True)
    if cfg.get("fake_stage"):
        emit(event="progress", stage=cfg["fake_stage"], done=steps, total=steps, fraction=1.0)
    if cfg.get("fake_disk_full"):
        print("OSError: [Errno 28] No space left on device: 'checkpoint-5/optimizer.pt'", flush=True)
        return 1
    if cfg.get("fake_no_status"):  # the engine's words when it cannot write its outcome
        print(f"ERROR engine.lifecycle: Could not record the outcome in {run_file}: [Errno 28] No space left on "
              "device", flush=True)
        return 0
    if cfg.get("fake_os_exit"):  # user code (a reward) that ended the process with os._exit(0) mid-run
        return 0
    if cfg.get("fake_silent_exit"):
        print("something went badly wrong", flush=True)
        return 3
    if cfg.get("fake_fail"):
        print("Traceback (most recent call last):\nValueError: the fake engine was told to fail", flush=True)
        emit(event="end", status="failed", error="ValueError: the fake engine was told to fail", metrics={})
        update(
            status="failed", exit_code=1, finished_at=time.time(), error="ValueError: the fake engine was told to fail"
        )
        return 1
    if cfg.get("eval_on_each_dataset"):  # one event per evaluation set, as the Trainer logs them
        emit(event="eval", step=steps, eval_first_loss=0.75)
        emit(event="eval", step=steps, eval_second_loss=0.25)
    else:
        emit(event="eval", step=steps, eval_loss=0.5, perplexity=1.65, **({"eval_accuracy": 0.8125}
                                                                          if cfg.get("compute_accuracy") else {}))
    emit(event="end", status="completed", error=None, metrics={"train_loss": 1.0})
    update(status="completed", exit_code=0, finished_at=time.time(), error=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
