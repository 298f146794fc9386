"""By hand: stream one ``streaming: true`` config with LLaMA-Factory (installed in its own environment) and with ours,
and compare the training rows in the order each yields them (the stream, then the first rows of epoch 1 after
``set_epoch(1)``, as the Trainer reshuffles) and the evaluation rows. Nothing here runs in the test suite.

    python -m tests.golden.compare_stream --incumbent /path/to/lf-venv/bin/python '{"model_name_or_path": ...}'

The config (a YAML file or a JSON mapping) needs ``model_name_or_path`` (a local tokenizer), ``stage`` (pt, sft, rm,
dpo or kto), ``dataset``, ``dataset_dir``, ``template`` and ``max_steps``; ``dataloader_num_workers: 1`` is added when unset
(with 0, LLaMA-Factory 0.9.5 splits local files into no shards and stops with StopIteration). Both streams are read
through a torch DataLoader with ``dataloader_num_workers`` workers and ``per_device_train_batch_size`` (eval:
``per_device_eval_batch_size``), as the Trainers read them, so several workers' turns are compared too.

What is compared of a row: pt and sft its input ids; dpo LLaMA-Factory's ``chosen_input_ids``, ``chosen_labels``,
``rejected_input_ids`` and ``rejected_labels`` (ours are built from our prompt and answer ids); rm the two input ids
(our reward rows carry no labels, which reward training does not read); kto ``input_ids``, ``labels``,
``kl_input_ids``, ``kl_labels`` and ``kto_tags`` (so the KL pair each row got within its map batch too).
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

HIDE_MEDIA_LIBS = r"""
import sys, types
try:  # a CPU torch without a torchvision/torchaudio that imports: hide them (text rows never use them)
    import torchvision, torchaudio  # noqa
except Exception:
    for name in [key for key in sys.modules if key.split(".")[0] in ("torchvision", "torchaudio")]:
        del sys.modules[name]
    sys.modules["torchvision"] = sys.modules["torchaudio"] = None
    import transformers  # noqa: its availability checks now say no
    sys.modules["torchaudio"] = types.ModuleType("torchaudio")  # LLaMA-Factory's mm_plugin imports it
    import llamafactory.data.mm_plugin  # noqa
    sys.modules["torchaudio"] = None
"""
"""LLaMA-Factory's side starts with this: where the environment's torchvision or torchaudio build does not load with
its torch, they are hidden (the rows compared here have no media)."""

THEIRS = HIDE_MEDIA_LIBS + r"""
import json
import torch
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args, n = json.loads(sys.argv[1]), int(sys.argv[3])
model_args, data_args, training_args, _, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
stage = {"dpo": "rm"}.get(args["stage"], args["stage"])  # its dpo workflow reads the data as rm does
ds = get_dataset(template, model_args, data_args, training_args, stage=stage, **module)
pad = module["tokenizer"].pad_token_id


KEYS = {"rm": ("chosen_input_ids", "rejected_input_ids"),
        "dpo": ("chosen_input_ids", "chosen_labels", "rejected_input_ids", "rejected_labels"),
        "kto": ("input_ids", "labels", "kl_input_ids", "kl_labels", "kto_tags")}.get(args["stage"])


def ids(row):
    if KEYS:
        return {key: row[key] for key in KEYS}
    end = len(row["input_ids"])
    if "position_ids" in row:  # packed: without the padding up to cutoff_len (ours has none)
        while end and row["input_ids"][end - 1] == pad and row["labels"][end - 1] == -100:
            end -= 1
    return row["input_ids"][:end]


def loader(data, batch):
    workers = training_args.dataloader_num_workers
    return (row for rows in torch.utils.data.DataLoader(data, batch_size=batch, num_workers=workers,
                                                        collate_fn=list) for row in rows)


out = {}
for epoch in (0, 1):
    ds["train_dataset"].set_epoch(epoch)
    rows = []
    for row in loader(ds["train_dataset"], training_args.per_device_train_batch_size):
        rows.append(ids(row))
        if epoch and len(rows) >= n:
            break
    out[f"epoch {epoch}"] = rows
if ds.get("eval_dataset") is not None:
    out["eval"] = [ids(row) for row in loader(ds["eval_dataset"], training_args.per_device_eval_batch_size)]
json.dump(out, open(sys.argv[2], "w"))
"""


def _lf_row(row: dict, stage: str) -> object:
    """Our row as LLaMA-Factory's processor writes it (the columns :data:`THEIRS` dumps)."""
    def joined(prompt, answer):
        return list(prompt) + list(answer), [-100] * len(prompt) + list(answer)

    if stage == "rm":
        return {"chosen_input_ids": list(row["chosen_ids"]), "rejected_input_ids": list(row["rejected_ids"])}
    if stage == "dpo":
        (chosen, chosen_labels), (rejected, rejected_labels) = (joined(row["prompt_ids"], row[f"{side}_ids"])
                                                                for side in ("chosen", "rejected"))
        return {"chosen_input_ids": chosen, "chosen_labels": chosen_labels, "rejected_input_ids": rejected,
                "rejected_labels": rejected_labels}
    if stage == "kto":
        (ids, labels), (kl_ids, kl_labels) = (joined(row["prompt_ids"], row["completion_ids"]),
                                              joined(row["KL_prompt_ids"], row["KL_completion_ids"]))
        return {"input_ids": ids, "labels": labels, "kl_input_ids": kl_ids, "kl_labels": kl_labels,
                "kto_tags": bool(row["label"])}
    return list(row["input_ids"])


def ours(args: dict, n: int) -> dict:
    import torch

    from engine.config import build_config
    from engine.data import get_dataset
    from engine.models.tokenizer_setup import load_text_components

    os.environ["LF_ENGINE_CACHE"] = "off"
    cfg = build_config(args)
    tokenizer, template = load_text_components(cfg)
    bundle = get_dataset(cfg, tokenizer, template)
    out = {}
    for epoch in (0, 1):
        bundle.train.set_epoch(epoch)
        rows = []
        for batch in torch.utils.data.DataLoader(bundle.train, batch_size=cfg.train.per_device_train_batch_size,
                                                 num_workers=cfg.train.dataloader_num_workers, collate_fn=list):
            for row in batch:
                rows.append(_lf_row(row, cfg.finetuning.stage))
            if epoch and len(rows) >= n:
                rows = rows[:n]
                break
        out[f"epoch {epoch}"] = rows
    if bundle.eval is not None:
        out["eval"] = [_lf_row(row, cfg.finetuning.stage) for row in bundle.eval]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory installed")
    parser.add_argument("--epoch1-rows", type=int, default=200, help="rows of epoch 1 to compare")
    parser.add_argument("config", help="a YAML file or a JSON mapping")
    opts = parser.parse_args()
    mapping = opts.config.lstrip().startswith("{")
    text = opts.config if mapping or not Path(opts.config).is_file() else Path(opts.config).read_text(encoding="utf-8")
    args = {"do_train": True, "finetuning_type": "lora", "output_dir": tempfile.mkdtemp(), "report_to": "none",
            "overwrite_cache": True, "streaming": True, "dataloader_num_workers": 1, **yaml.safe_load(text)}
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "theirs.json"
        proc = subprocess.run([opts.incumbent, "-c", THEIRS, json.dumps(args), str(target), str(opts.epoch1_rows)],
                              capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:])
            return 1
        theirs = json.loads(target.read_text(encoding="utf-8"))
    mine = ours(args, opts.epoch1_rows)
    identical = True
    for part, rows in theirs.items():
        got = mine.get(part, [])
        same = sum(a == b for a, b in zip(rows, got))
        print(f"{part}: LLaMA-Factory {len(rows)} rows, ours {len(got)}, identical in order {same}")
        if same != len(rows) or len(got) != len(rows):
            identical = False
            first = next((i for i, (a, b) in enumerate(zip(rows, got)) if a != b), min(len(rows), len(got)))
            print(f"  first difference at row {first}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
