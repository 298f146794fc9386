"""Regenerate tests/golden/lf_rm.json and tests/golden/lf_rm_lora/: a real LLaMA-Factory 0.9.5 reward-model run.

    python -m tests.golden.generate_rm /path/to/lf-venv/bin/python

Builds the tests' tiny model (tests/engine/tinymodels.py), trains it with ``stage: rm`` (LoRA) through LLaMA-Factory's
own ``run_exp`` in the environment given, on the repository's demo_dpo pairs with the config below, and keeps:

- ``lf_rm.json``: the config, each logged step's ``loss`` and ``grad_norm`` and each evaluation's ``eval_loss`` and
  ``eval_accuracy`` (from its trainer_state.json), a few texts and the scores LLaMA-Factory's ``ChatModel.get_scores``
  gives them with the run's output (its value at each text's last token);
- ``lf_rm_lora/``: that output as LLaMA-Factory saved it (its CAUSAL_LM adapter, value_head.safetensors and
  tokenizer), for ``reward_model``.

tests/engine/test_rm_lf_parity.py trains ours with the same config and compares, and scores with the folder. Runs on
the CPU. Where the environment's torchvision or torchaudio build does not load with its torch (their ops fail to
register), they are hidden from the LLaMA-Factory process (text-only runs do not use them). Nothing of
LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
JSON_PATH = HERE / "lf_rm.json"
FOLDER = HERE / "lf_rm_lora"
KEPT = ("adapter_config.json", "adapter_model.safetensors", "value_head.safetensors", "tokenizer.json",
        "tokenizer_config.json")
MAX_POSITIONS = 256

CONFIG = {
    "stage": "rm", "do_train": True, "finetuning_type": "lora", "lora_rank": 2, "lora_target": "all",
    "lora_dropout": 0.1, "dataset": "demo_dpo", "template": "qwen3_nothink", "cutoff_len": 128,
    "max_samples": 24, "val_size": 0.25, "eval_strategy": "steps", "eval_steps": 6, "per_device_eval_batch_size": 4,
    "per_device_train_batch_size": 3, "gradient_accumulation_steps": 1, "learning_rate": 5.0e-3,
    "num_train_epochs": 2.0, "lr_scheduler_type": "cosine", "warmup_ratio": 0.1, "logging_steps": 1,
    "save_strategy": "no", "report_to": "none", "plot_loss": False, "overwrite_output_dir": True, "bf16": False,
    "seed": 42,
}
TEXTS = [
    "<|im_start|>user\nWhat is 16 plus 29?<|im_end|>\n<|im_start|>assistant\n16 plus 29 is 45.<|im_end|>",
    "<|im_start|>user\nWhat is 16 plus 29?<|im_end|>\n<|im_start|>assistant\n16 plus 29 is 47.<|im_end|>",
    "<|im_start|>user\nName a colour.<|im_end|>\n<|im_start|>assistant\nBlue.<|im_end|>",
    "Hello, how are you?<|im_end|>",
    "x<|im_end|>",
]

HIDE_BROKEN = r"""
import importlib.machinery, subprocess, sys, types
for name in ("torchvision", "torchaudio"):
    if subprocess.run([sys.executable, "-c", f"import {name}"], capture_output=True).returncode:
        stub = types.ModuleType(name)  # LLaMA-Factory imports torchaudio unconditionally; transformers checks the spec
        stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
        sys.modules[name] = stub if name == "torchaudio" else None
"""
TRAIN = HIDE_BROKEN + r"""
import json
from llamafactory.train.tuner import run_exp
run_exp(json.loads(sys.argv[1]))
"""
SCORE = HIDE_BROKEN + r"""
import json
from llamafactory.chat import ChatModel
chat = ChatModel(json.loads(sys.argv[1]))
print("SCORES " + json.dumps([float(x) for x in chat.get_scores(json.loads(sys.argv[2]))]))
"""


def main() -> None:
    python = sys.argv[1]
    sys.path.insert(0, str(REPO / "tests" / "engine"))
    import tinymodels

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    with tempfile.TemporaryDirectory() as tmp:
        model = tinymodels.build_tiny_model(Path(tmp) / "tiny", max_positions=MAX_POSITIONS)
        out = Path(tmp) / "out"
        args = {**CONFIG, "model_name_or_path": str(model), "dataset_dir": str(REPO / "examples" / "data"),
                "output_dir": str(out)}
        subprocess.run([python, "-c", TRAIN, json.dumps(args)], check=True, env=env)
        history = json.loads((out / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]
        steps = [{"step": h["step"], "loss": h["loss"], "grad_norm": h["grad_norm"]} for h in history if "loss" in h]
        evals = [{"step": h["step"], "eval_loss": h["eval_loss"], "eval_accuracy": h["eval_accuracy"]}
                 for h in history if "eval_loss" in h]
        chat = {"model_name_or_path": str(model), "adapter_name_or_path": str(out), "finetuning_type": "lora",
                "template": CONFIG["template"], "stage": "rm", "infer_dtype": "float32"}
        done = subprocess.run([python, "-c", SCORE, json.dumps(chat), json.dumps(TEXTS)], check=True, env=env,
                              capture_output=True, text=True)
        scores = json.loads(done.stdout.split("SCORES ", 1)[1])
        shutil.rmtree(FOLDER, ignore_errors=True)
        FOLDER.mkdir()
        for name in KEPT:
            shutil.copy(out / name, FOLDER / name)
    record = {"config": CONFIG, "max_positions": MAX_POSITIONS, "steps": steps, "evals": evals, "texts": TEXTS,
              "scores": scores}
    JSON_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {JSON_PATH} ({len(steps)} steps, {len(evals)} evaluations) and {FOLDER}")


if __name__ == "__main__":
    main()
