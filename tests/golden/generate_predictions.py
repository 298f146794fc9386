"""Regenerate tests/golden/lf_predictions.jsonl and lf_predict_results.json: LLaMA-Factory 0.9.5's
generated_predictions.jsonl and predict_results.json (timings left out) on the demo model.

    python -m tests.golden.generate_predictions /path/to/llamafactory-venv/bin/llamafactory-cli

Runs LLaMA-Factory's own prediction (``do_predict`` with ``predict_with_generate``, greedy) on the built-in demo model
(``lf-engine demo`` builds it, deterministically) with the examples' identity and tool-call rows, at a cutoff_len
that cuts some prompts; tests/engine/test_metrics.py checks that our prediction rows have the same prompts and
labels, and that our predictions file and scores equal its own. LLaMA-Factory needs its ``metrics`` extra
(jieba, nltk, rouge-chinese) to score. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
PATH = Path(__file__).with_name("lf_predictions.jsonl")
RESULTS_PATH = Path(__file__).with_name("lf_predict_results.json")
TIMINGS = ("predict_runtime", "predict_samples_per_second", "predict_steps_per_second", "predict_model_preparation_time")
CONFIG = {"stage": "sft", "do_predict": True, "predict_with_generate": True, "finetuning_type": "lora",
          "eval_dataset": "demo_identity,demo_tools", "dataset_dir": str(REPO / "examples" / "data"), "template": "qwen",
          "cutoff_len": 48, "max_samples": 4, "do_sample": False, "max_new_tokens": 8, "per_device_eval_batch_size": 4,
          "overwrite_cache": True, "report_to": "none"}


def main() -> None:
    from engine.demo import ensure_demo_model

    with tempfile.TemporaryDirectory() as work:
        config = {**CONFIG, "model_name_or_path": str(ensure_demo_model()), "output_dir": str(Path(work) / "out")}
        (Path(work) / "predict.yaml").write_text(yaml.safe_dump(config), encoding="utf-8")
        subprocess.run([sys.argv[1], "train", str(Path(work) / "predict.yaml")], check=True)
        shutil.copyfile(Path(work) / "out" / "generated_predictions.jsonl", PATH)
        results = json.loads((Path(work) / "out" / "predict_results.json").read_text(encoding="utf-8"))
        RESULTS_PATH.write_text(json.dumps({k: v for k, v in results.items() if k not in TIMINGS}, indent=1) + "\n",
                                encoding="utf-8")
    print(f"wrote {PATH} and {RESULTS_PATH}")


if __name__ == "__main__":
    main()
