"""Regenerate tests/golden/lf_kto_untagged_stream.json: LLaMA-Factory 0.9.5's streamed KTO rows (``streaming: true``)
when a set without a ``kto_tag`` column is mixed with a KTO set.

    python -m tests.golden.generate_kto_untagged_stream /path/to/lf-venv/bin/python

As without streaming (generate_kto_untagged.py), LLaMA-Factory reads the untagged set's rows as plain conversations
and drops them in KTO's preprocessing, after each map batch (``preprocessing_batch_size`` rows of the shuffled stream)
has formed its KL pairs: only the KTO set trains, and the untagged rows lend their replies to the pairs of their
batch. The data is generate_kto_untagged's :func:`write_data`; each case of :data:`CASES` is streamed by
LLaMA-Factory's own ``get_dataset`` through compare_stream's script (kto, the ``special`` test tokenizer, template
``empty``, one data loader worker) and the rows of epoch 0, the first :data:`EPOCH1_ROWS` of epoch 1 (after
``set_epoch(1)`` reshuffles) and the evaluation rows are recorded (``input_ids``, ``labels``, ``kl_input_ids``,
``kl_labels``, ``kto_tags``), for tests/engine/test_kto_untagged_stream.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import THEIRS
from tests.golden.generate_kto_untagged import write_data

JSON_PATH = Path(__file__).with_name("lf_kto_untagged_stream.json")
EPOCH1_ROWS = 6
CASES = {
    "concat": {"dataset": "tagged,plain", "preprocessing_batch_size": 4, "buffer_size": 5},
    "untagged_first": {"dataset": "plain,tagged", "preprocessing_batch_size": 5},
    "interleave_under": {"dataset": "plain,tagged", "mix_strategy": "interleave_under", "seed": 3,
                         "preprocessing_batch_size": 4, "buffer_size": 3},
    "interleave_over": {"dataset": "tagged,plain", "mix_strategy": "interleave_over", "seed": 7,
                        "preprocessing_batch_size": 3, "buffer_size": 6},
    "val_size": {"dataset": "plain,tagged", "val_size": 5, "do_eval": True, "preprocessing_batch_size": 4,
                 "buffer_size": 14},
    "eval_dataset": {"dataset": "tagged", "eval_dataset": "tagged,plain", "do_eval": True,
                     "preprocessing_batch_size": 6},
}
"""Each case: its keys over :data:`COMMON`."""
COMMON = {"stage": "kto", "template": "empty", "cutoff_len": 64, "streaming": True, "max_steps": 4,
          "dataloader_num_workers": 1}
"""The keys every case shares (one data loader worker: with none, LLaMA-Factory 0.9.5 splits local files into no
shards and stops with StopIteration)."""


def main() -> None:
    from tests.golden.tokenizers import load

    python = sys.argv[1]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    record: dict = {"epoch1_rows": EPOCH1_ROWS, "common": COMMON, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp) / "data")
        tokenizer = Path(tmp) / "tok"
        load("special").save_pretrained(tokenizer)
        for case, keys in CASES.items():
            args = {"model_name_or_path": str(tokenizer), "do_train": True, "finetuning_type": "lora",
                    "dataset_dir": str(data), "overwrite_cache": True, "report_to": "none",
                    "output_dir": str(Path(tmp) / "out" / case), **COMMON, **keys}
            target = Path(tmp) / f"{case}.json"
            proc = subprocess.run([python, "-c", THEIRS, json.dumps(args), str(target), str(EPOCH1_ROWS)], env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{case}: LLaMA-Factory failed:\n{proc.stderr[-3000:]}")
            record["cases"][case] = {"config": keys, "rows": json.loads(target.read_text(encoding="utf-8"))}
    JSON_PATH.write_text(json.dumps(record) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
