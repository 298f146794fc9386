"""By hand: train one ``streaming: true`` config (sft, rm, dpo or kto) with LLaMA-Factory's real Trainer and with
ours, record the input ids of every row of every batch each one's training data loader hands over (rm and dpo: the
chosen rows, then the rejected ones; kto: the rows, then their KL rows) (in the main process, in the order
the steps take them; padding removed), and compare them in order (the rows the steps train on, across the stream's
epochs, plus the batches each loader reads ahead). Nothing here runs in the test suite.

    python -m tests.golden.compare_stream_trainer --incumbent /path/to/lf-venv/bin/python config.yaml

The config needs what ``lf-engine train`` and ``llamafactory-cli train`` both read (``model_name_or_path`` a local
model folder, ``stage``, ``dataset``, ``dataset_dir``, ``template``, ``max_steps``, ...); ``dataloader_num_workers:
1`` is set for both when unset (LLaMA-Factory 0.9.5 stops with 0). Runs on the CPU (CUDA_VISIBLE_DEVICES is emptied).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

RECORD = r"""
import json, sys
import torch.utils.data.dataloader as loading


def rows_of(batch):
    ids = batch["input_ids"]
    if "cu_seq_lens_q" in batch:  # ours, padding-free: the rows back to back
        flat, bounds = ids[0].tolist(), batch["cu_seq_lens_q"].tolist()
        return [flat[a:b] for a, b in zip(bounds, bounds[1:])]
    rows = []
    for prefix in ("", "kl_", "KL_"):  # kto: the KL rows after the rows (LLaMA-Factory's kl_, TRL's KL_)
        if prefix + "input_ids" in batch:
            pairs = zip(batch[prefix + "input_ids"], batch[prefix + "attention_mask"])
            rows += [row[keep.bool()].tolist() for row, keep in pairs]
    return rows


def recorder(path):
    for kind in (loading._SingleProcessDataLoaderIter, loading._MultiProcessingDataLoaderIter):
        def record(self, _next=kind._next_data):
            batch = _next(self)  # in the main process, in the order the Trainer takes the batches
            with open(path, "a") as out:
                for row in rows_of(batch):
                    out.write(json.dumps(row) + "\n")
            return batch
        kind._next_data = record
"""
THEIRS = RECORD + HIDE_MEDIA_LIBS + r"""
recorder(sys.argv[2])
from llamafactory.train.tuner import run_exp
run_exp(json.loads(sys.argv[1]))
"""
OURS = RECORD + r"""
recorder(sys.argv[2])
from engine.cli import main
sys.exit(main(["train", sys.argv[3]]))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory installed")
    parser.add_argument("config", help="a YAML file or a JSON mapping")
    opts = parser.parse_args()
    mapping = opts.config.lstrip().startswith("{")
    text = opts.config if mapping or not Path(opts.config).is_file() else Path(opts.config).read_text(encoding="utf-8")
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "LF_ENGINE_CACHE": "off"}
    with tempfile.TemporaryDirectory() as folder:
        seen = {}
        for who, python, script in (("LLaMA-Factory", opts.incumbent, THEIRS), ("ours", sys.executable, OURS)):
            args = {"do_train": True, "finetuning_type": "lora", "report_to": "none", "overwrite_cache": True,
                    "save_strategy": "no", "streaming": True, "dataloader_num_workers": 1, **yaml.safe_load(text),
                    "output_dir": str(Path(folder) / who)}
            config, lines = Path(folder) / f"{who}.yaml", Path(folder) / f"{who}.jsonl"
            config.write_text(yaml.safe_dump(args), encoding="utf-8")
            proc = subprocess.run([python, "-c", script, json.dumps(args), str(lines), str(config)], env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                print(f"{who} failed:\n{proc.stderr[-3000:]}")
                return 1
            seen[who] = lines.read_text(encoding="utf-8").splitlines()
    theirs, mine = seen["LLaMA-Factory"], seen["ours"]
    same = sum(a == b for a, b in zip(theirs, mine))
    print(f"rows collated: LLaMA-Factory {len(theirs)}, ours {len(mine)}, identical in order {same}")
    if same != len(theirs) or len(mine) != len(theirs):
        print(f"  first difference at row {next((i for i, (a, b) in enumerate(zip(theirs, mine)) if a != b), same)}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
