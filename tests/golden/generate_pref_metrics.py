"""Regenerate tests/golden/lf_pref_metrics.json: what LLaMA-Factory 0.9.5 logs for dpo (sigmoid, orpo, simpo), kto
and rm with ``eval_on_each_dataset``.

    DISABLE_VERSION_CHECK=1 HF_HUB_OFFLINE=1 /path/to/llamafactory-venv/bin/python \
        -m tests.golden.generate_pref_metrics [CASE ...]

Named cases are run again and replace their entries in the file (the others are kept); with none, every case is run.
Builds the model and data of :mod:`tests.golden.pref_runs`, runs each case with LLaMA-Factory's own ``run_exp`` on
the CPU, and keeps every log entry its Trainer hands to callbacks (training steps, each set's evaluation at step 2
and the final one, in order), its ``all_results.json`` and the keys of its ``trainer_log.jsonl`` lines, for
tests/engine/test_pref_metrics_lf.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

from tests.golden.lf_logs import RECORD_AND_RUN
from tests.golden.pref_runs import CASES, build_model, config, write_data

PATH = Path(__file__).with_name("lf_pref_metrics.json")

RUN = r"""
import json, sys
import importlib.machinery, types
# torchvision 0.28 and torchaudio 2.11 beside torch 2.13 fail to import; no case here reads media, and LLaMA-Factory's
# mm_plugin imports torchaudio unconditionally: an empty module stands in for it
sys.modules["torchvision"] = None
sys.modules["torchaudio"] = types.ModuleType("torchaudio")
sys.modules["torchaudio"].__spec__ = importlib.machinery.ModuleSpec("torchaudio", None)
from transformers import TrainerCallback
""" + RECORD_AND_RUN


def main() -> None:
    import subprocess

    sys.modules.setdefault("torchvision", None)  # see RUN
    work = Path(tempfile.mkdtemp(prefix="lf-pref-"))
    model, data = build_model(work / "model"), write_data(work / "data")
    env = {**os.environ, "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1", "CUDA_VISIBLE_DEVICES": "",
           "WANDB_DISABLED": "true"}
    chosen = sys.argv[1:] or list(CASES)
    unknown = sorted(set(chosen) - set(CASES))
    if unknown:
        raise SystemExit(f"unknown case(s) {unknown}; the cases are {sorted(CASES)}")
    out: dict = json.loads(PATH.read_text(encoding="utf-8")) if sys.argv[1:] and PATH.exists() else {"cases": {}}
    for case in chosen:
        output = work / case
        logs = work / f"{case}.jsonl"
        cfg = config(case, model, data, output)
        subprocess.run([sys.executable, "-c", RUN, json.dumps(cfg), str(logs)], check=True, env=env)
        lines = [json.loads(line) for line in (output / "trainer_log.jsonl").read_text().splitlines()]
        out["cases"][case] = {
            "logs": [json.loads(line) for line in logs.read_text().splitlines()],
            "all_results": json.loads((output / "all_results.json").read_text()),
            "trainer_log_keys": sorted({key for line in lines for key in line}),
        }
        print(f"{case}: {len(out['cases'][case]['logs'])} log entries")
    PATH.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
