"""Regenerate tests/golden/lf_rm_tokens.json: LLaMA-Factory 0.9.5's ``stage: rm`` where the template adds tokens.

    python -m tests.golden.generate_rm_tokens /path/to/lf-venv/bin/python [CASE ...]

The tests' tiny model (tests/engine/tinymodels.py, a ChatML tokenizer) with the ``llama3`` template, whose
``<|eot_id|>`` (its eos) and ``<|eom_id|>`` (a stop word) the tokenizer lacks: LLaMA-Factory adds both as special
tokens and, with ``resize_vocab: true``, grows the embeddings (new rows from its noise_init) before it draws the value
head. (Without ``resize_vocab`` LLaMA-Factory 0.9.5 only warns "make sure `resize_vocab` is True" and then fails in
the first forward pass, IndexError: index out of range, the new ids having no rows; ours turns it on by itself, so
the config sets it for both.) Each case of :data:`CASES` is trained through LLaMA-Factory's own ``run_exp`` on the CPU (as
tests/golden/generate_rm.py does) and its logged steps and evaluations are kept, for
tests/engine/test_rm_tokens_lf.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.generate_rm import CONFIG, MAX_POSITIONS, REPO, TRAIN

JSON_PATH = Path(__file__).with_name("lf_rm_tokens.json")
COMMON = {**CONFIG, "template": "llama3", "resize_vocab": True, "max_samples": 16, "num_train_epochs": 1.0, "eval_steps": 2}
CASES = {
    "lora": {},
    "full": {"finetuning_type": "full", "learning_rate": 1.0e-3},
    "lora_embeddings": {"additional_target": "embed_tokens"},
    "sft_full": {"stage": "sft", "dataset": "demo_alpaca", "finetuning_type": "full", "learning_rate": 1.0e-3},
}
"""Each case: its keys over :data:`COMMON` (demo_dpo, 12 training pairs in batches of 3, 4 held out). With LoRA,
LLaMA-Factory trains the whole embedding and output matrices beside the adapter (``modules_to_save``) where the
template added tokens, ours only the new tokens' rows (README: what makes training fast), so ``lora`` starts from the
same weights but trains other parameters; ``lora_embeddings`` names the embedding matrix in ``additional_target``, so
that both train all of it. ``sft_full``: the same resize under supervised fine-tuning (its new rows' noise drawn
after transformers' mean-resizing draws, as for rm)."""


def main() -> None:
    python, chosen = sys.argv[1], sys.argv[2:] or list(CASES)
    sys.path.insert(0, str(REPO / "tests" / "engine"))
    import tinymodels

    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    record: dict = {"max_positions": MAX_POSITIONS, "common": COMMON, "cases": {}}
    if sys.argv[2:] and JSON_PATH.exists():  # named cases only: the others are kept
        record["cases"] = json.loads(JSON_PATH.read_text(encoding="utf-8"))["cases"]
    with tempfile.TemporaryDirectory() as tmp:
        model = tinymodels.build_tiny_model(Path(tmp) / "tiny", max_positions=MAX_POSITIONS)
        for case in chosen:
            keys = CASES[case]
            out = Path(tmp) / case
            args = {**COMMON, **keys, "model_name_or_path": str(model), "output_dir": str(out),
                    "dataset_dir": str(REPO / "examples" / "data")}
            subprocess.run([python, "-c", TRAIN, json.dumps(args)], check=True, env=env)
            history = json.loads((out / "trainer_state.json").read_text(encoding="utf-8"))["log_history"]
            record["cases"][case] = {
                "keys": keys,
                "steps": [{"step": h["step"], "loss": h["loss"], "grad_norm": h["grad_norm"]}
                          for h in history if "loss" in h],
                "evals": [{key: h[key] for key in ("step", "eval_loss", "eval_accuracy") if key in h}
                          for h in history if "eval_loss" in h],
            }
    JSON_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {JSON_PATH}")


if __name__ == "__main__":
    main()
