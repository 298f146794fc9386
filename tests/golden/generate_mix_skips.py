"""Regenerate tests/golden/lf_mix_skips.json: which rows LLaMA-Factory 0.9.5 trains and evaluates, in its order, when
mixed datasets hold rows it cannot use (sharegpt turns out of order, alpaca rows without a reply).

    python -m tests.golden.generate_mix_skips /path/to/lf-venv/bin/python

LLaMA-Factory mixes the datasets (``interleave_datasets``) and splits off ``val_size`` with every row, and drops the
unusable ones only inside its preprocessing batches, so a skipped row still takes its draw, its place in the split and
its place in a batch (where packed rows are joined). The data is :func:`write_data`'s (tests build the same); each
case of :data:`CASES` is tokenized by LLaMA-Factory's own ``get_dataset`` (sft, the ``special`` test tokenizer,
template ``empty``) and each training and evaluation row is recorded by the tags its prompts carry (``c3``: row 3 of
``chat``; a packed row ``c3+p1``), for tests/engine/test_data_mix_skips.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

JSON_PATH = Path(__file__).with_name("lf_mix_skips.json")
CASES = {
    "under": {"dataset": "chat,plain", "mix_strategy": "interleave_under"},
    "over_probs": {"dataset": "chat,plain", "mix_strategy": "interleave_over", "interleave_probs": "0.3,0.7"},
    "under_sampled": {"dataset": "chat,plain,sampled", "mix_strategy": "interleave_under",
                      "interleave_probs": "0.5,0.25,0.25", "seed": 7},
    "val_fraction": {"dataset": "chat,plain", "val_size": 0.25, "do_eval": True},
    "val_count_interleave": {"dataset": "chat,plain,sampled", "mix_strategy": "interleave_under", "val_size": 5,
                             "do_eval": True, "seed": 3},
    "packing_batches": {"dataset": "chat,plain", "packing": True, "preprocessing_batch_size": 4},
    "packing_workers_val": {"dataset": "plain,chat", "packing": True, "preprocessing_num_workers": 2,
                            "val_size": 0.2, "do_eval": True},
}
"""Each case: its keys over the common sft config (cutoff_len 64, one preprocessing worker)."""

CHAT_BROKEN = {1: "starts", 5: "twice", 6: "starts", 10: "twice"}  # sharegpt rows whose turns LLaMA-Factory drops
PLAIN_NO_REPLY = (2, 9, 10)  # alpaca rows with a null output
SAMPLED_NO_REPLY = (0, 4)


def write_data(folder: Path) -> Path:
    """``chat`` (12 sharegpt rows, 4 unusable), ``plain`` (15 alpaca rows, 3 unusable) and ``sampled`` (6 alpaca
    rows, 2 unusable, drawn to 9 by dataset_info's ``num_samples``) with their dataset_info.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    chat = []
    for i in range(12):
        turns = [{"from": "human", "value": f"q c{i}"}, {"from": "gpt", "value": f"a c{i}"}]
        if CHAT_BROKEN.get(i) == "starts":
            turns = turns[::-1]
        elif CHAT_BROKEN.get(i) == "twice":
            turns.insert(1, {"from": "human", "value": "again"})
        chat.append({"conversations": turns})
    plain = [{"instruction": f"q p{i}", "input": "", "output": None if i in PLAIN_NO_REPLY else f"a p{i}"}
             for i in range(15)]
    sampled = [{"instruction": f"q s{i}", "input": "", "output": None if i in SAMPLED_NO_REPLY else f"a s{i}"}
               for i in range(6)]
    for name, rows in (("chat", chat), ("plain", plain), ("sampled", sampled)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    info = {"chat": {"file_name": "chat.json", "formatting": "sharegpt"}, "plain": {"file_name": "plain.json"},
            "sampled": {"file_name": "sampled.json", "num_samples": 9}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


THEIRS = HIDE_MEDIA_LIBS + r"""
import json, re, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
model_args, data_args, training_args, _, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
ds = get_dataset(template, model_args, data_args, training_args, stage="sft", **module)
rows = {}
for split in ("train", "eval"):
    part = ds.get(split + "_dataset")
    if part is not None:
        texts = [module["tokenizer"].decode(list(ids)) for ids in part["input_ids"]]
        rows[split] = ["+".join(re.findall(r"q ([cps][0-9]+)", text)) for text in texts]
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
            args = {"model_name_or_path": str(tokenizer), "stage": "sft", "do_train": True, "template": "empty",
                    "finetuning_type": "lora", "dataset_dir": str(data), "cutoff_len": 64,
                    "preprocessing_num_workers": 1, "overwrite_cache": True, "report_to": "none",
                    "output_dir": str(Path(tmp) / "out" / case), **keys}
            proc = subprocess.run([python, "-c", THEIRS, json.dumps(args)], env=env, capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{case}: LLaMA-Factory failed:\n{proc.stderr[-3000:]}")
            record["cases"][case] = {"config": keys, "rows": json.loads(proc.stdout.strip().splitlines()[-1])}
    JSON_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
