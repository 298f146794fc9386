"""Regenerate tests/golden/lf_final_eval.json: what LLaMA-Factory 0.9.5 logs and writes for an sft run that
evaluates during training (``val_size``, ``eval_strategy: steps``) and once more at the end.

    python -m tests.golden.generate_final_eval /path/to/lf-venv/bin/python

Two cases on the tiny Llama of :func:`tests.golden.pref_runs.build_model` and 40 rows of examples/data's
demo_alpaca, four steps: ``eval_steps`` 2 and 3 (the last step evaluates, and its workflow's final evaluation scores
the same weights again), and no evaluation during training. Each case keeps every log entry its Trainer hands
to callbacks, the evaluation steps of its trainer_log.jsonl and trainer_state.json, and its all_results.json and
eval_results.json, for tests/engine/test_final_eval_lf.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS
from tests.golden.lf_logs import RECORD_AND_RUN
from tests.golden.pref_runs import build_model

PATH = Path(__file__).with_name("lf_final_eval.json")
REPO = Path(__file__).resolve().parents[2]
CASES = {"divides": {"eval_steps": 2}, "not_dividing": {"eval_steps": 3}, "at_the_end": {"eval_strategy": "no"}}
"""Each case: its keys over :func:`config`'s. With ``eval_strategy: steps`` transformers' Trainer evaluates the last
step whether or not ``eval_steps`` divides it (``not_dividing``: at steps 3 and 4); ``at_the_end`` evaluates only
after training."""


def config(case: str, model: Path, output: Path) -> dict:
    """The full config of ``case`` (the same keys for LLaMA-Factory and for ours)."""
    return {"model_name_or_path": str(model), "stage": "sft", "do_train": True, "do_eval": True,
            "finetuning_type": "lora", "lora_target": "all", "dataset": "demo_alpaca",
            "dataset_dir": str(REPO / "examples" / "data"), "max_samples": 40, "template": "default",
            "cutoff_len": 128, "val_size": 0.2, "per_device_train_batch_size": 4, "per_device_eval_batch_size": 4,
            "max_steps": 4, "eval_strategy": "steps", "logging_steps": 1, "learning_rate": 1e-3, "seed": 42,
            "save_strategy": "no", "report_to": "none", "plot_loss": False, "preprocessing_num_workers": 1,
            "output_dir": str(output), **CASES[case]}


def eval_steps(entries: list[dict]) -> list[int]:
    """The steps of the entries that hold an evaluation's numbers (trainer_log.jsonl's ``current_steps``)."""
    return [entry.get("step", entry.get("current_steps")) for entry in entries if "eval_loss" in entry]


def main() -> None:
    python = sys.argv[1]
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
           "WANDB_DISABLED": "true"}
    out: dict = {"cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        model = build_model(Path(tmp) / "model")
        for case in CASES:
            folder, logs = Path(tmp) / case, Path(tmp) / f"{case}.jsonl"
            cfg = {**config(case, model, folder), "overwrite_output_dir": True}
            script = HIDE_MEDIA_LIBS + "\nimport json, sys\nfrom transformers import TrainerCallback\n" + RECORD_AND_RUN
            subprocess.run([python, "-c", script, json.dumps(cfg), str(logs)], check=True, env=env)
            trainer_log = [json.loads(line) for line in (folder / "trainer_log.jsonl").read_text().splitlines()]
            state = json.loads((folder / "trainer_state.json").read_text())
            out["cases"][case] = {
                "logs": [json.loads(line) for line in logs.read_text().splitlines()],
                "trainer_log_eval_steps": eval_steps(trainer_log),
                "trainer_state_eval_steps": eval_steps(state["log_history"]),
                "all_results": json.loads((folder / "all_results.json").read_text()),
                "eval_results": json.loads((folder / "eval_results.json").read_text()),
            }
    PATH.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
