"""Regenerate tests/golden/lf_kto_untagged.json: LLaMA-Factory 0.9.5's KTO rows when a set without a ``kto_tag``
column is mixed with a KTO set.

    python -m tests.golden.generate_kto_untagged /path/to/lf-venv/bin/python

LLaMA-Factory reads every row of the untagged set as a plain conversation and drops it in KTO's preprocessing
("Dropped invalid example"), after the KL pairs of its batch are formed: the KTO set trains, and the untagged rows
still lend their replies to the KL pairs. The data is :func:`write_data`'s (tests build the same); each case of
:data:`CASES` is tokenized by LLaMA-Factory's own ``get_dataset`` (kto, the ``special`` test tokenizer, template
``empty``) and each row's ``input_ids``, ``labels``, ``kl_input_ids``, ``kl_labels`` and ``kto_tags`` are recorded,
for tests/engine/test_kto_untagged_mix.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

JSON_PATH = Path(__file__).with_name("lf_kto_untagged.json")
CASES = {
    "concat": {"dataset": "tagged,plain"},
    "untagged_first": {"dataset": "plain,tagged"},
    "interleave_under": {"dataset": "plain,tagged", "mix_strategy": "interleave_under", "seed": 3},
    "val_size": {"dataset": "tagged,plain", "val_size": 0.25, "do_eval": True},
    "eval_dataset": {"dataset": "tagged", "eval_dataset": "tagged,plain", "do_eval": True},
}
"""Each case: its keys over the common kto config (cutoff_len 64, one preprocessing worker)."""


def write_data(folder: Path) -> Path:
    """``tagged`` (8 sharegpt KTO rows, desirable and undesirable in turn) and ``plain`` (6 alpaca rows, no
    kto_tag) with their dataset_info.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    tagged = [{"messages": [{"role": "user", "content": f"q t{i}"}, {"role": "assistant", "content": f"a t{i}"}],
               "label": i % 2 == 0} for i in range(8)]
    plain = [{"instruction": f"q p{i}", "input": "", "output": f"a p{i}"} for i in range(6)]
    for name, rows in (("tagged", tagged), ("plain", plain)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    info = {"tagged": {"file_name": "tagged.json", "formatting": "sharegpt",
                       "columns": {"messages": "messages", "kto_tag": "label"},
                       "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                "assistant_tag": "assistant"}},
            "plain": {"file_name": "plain.json"}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


THEIRS = HIDE_MEDIA_LIBS + r"""
import json, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
model_args, data_args, training_args, _, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
ds = get_dataset(template, model_args, data_args, training_args, stage="kto", **module)
rows = {}
for split in ("train", "eval"):
    part = ds.get(split + "_dataset")
    if part is not None:
        rows[split] = [[list(a), list(b), list(c), list(d), bool(e)] for a, b, c, d, e in
                       zip(part["input_ids"], part["labels"], part["kl_input_ids"], part["kl_labels"],
                           part["kto_tags"])]
print(json.dumps(rows))
"""


def main() -> None:
    from tests.golden.tokenizers import load

    python = sys.argv[1]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    record: dict = {"cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp) / "data")
        tokenizer = Path(tmp) / "tok"
        load("special").save_pretrained(tokenizer)
        for case, keys in CASES.items():
            args = {"model_name_or_path": str(tokenizer), "stage": "kto", "do_train": True, "template": "empty",
                    "finetuning_type": "lora", "dataset_dir": str(data), "cutoff_len": 64,
                    "preprocessing_num_workers": 1, "overwrite_cache": True, "report_to": "none",
                    "output_dir": str(Path(tmp) / "out" / case), **keys}
            proc = subprocess.run([python, "-c", THEIRS, json.dumps(args)], env=env, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{case}: LLaMA-Factory failed:\n{proc.stderr[-3000:]}")
            record["cases"][case] = {"config": keys, "rows": json.loads(proc.stdout.strip().splitlines()[-1])}
    JSON_PATH.write_text(json.dumps(record) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
