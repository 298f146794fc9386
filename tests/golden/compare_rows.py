"""By hand: tokenize one config with LLaMA-Factory (installed in its own environment) and with ours, and compare
the training and evaluation rows one by one. Nothing here runs in the test suite.

    python -m tests.golden.compare_rows --incumbent /path/to/lf-venv/bin/python '{"model_name_or_path": ...}'
    python -m tests.golden.compare_rows --incumbent ... my_config.yaml

The config (a YAML file or a JSON mapping) needs ``model_name_or_path`` (a local tokenizer; ``demo`` and
``demo-vlm``, which LLaMA-Factory does not know, are given to both sides as the built demo model's folder),
``stage`` (pt, sft, rm/dpo as pairs, kto), ``dataset``, ``dataset_dir``, ``template`` and anything else both tools
read (``cutoff_len``, ``val_size``, ``mix_strategy``, ``packing``, ``preprocessing_num_workers``, ...); a multimodal
model folder tokenizes the rows' media with its processor on both sides. Per row it compares the input ids and
labels (KTO: the input ids and labels and the KL pair's; packed rows: without the padding LLaMA-Factory adds) and
prints how many rows are identical and the first that is not. KTO and unpacked SFT rows with media also compare their
processed media (each array's shape and sums, for the arrays both sides hold: the KL pair takes the row's own), and
``eval_on_each_dataset: true`` compares each evaluation set apart (``eval_dataset/NAME``). Where the incumbent's
torchvision/torchaudio do not import with its torch, they are hidden there (``compare_stream.HIDE_MEDIA_LIBS``): text
rows and image rows of processors that need neither (LLaVA, Gemma 3) still compare; Qwen2-VL's processor then cannot
be built on that side.
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

THEIRS = HIDE_MEDIA_LIBS + r"""
import json, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
model_args, data_args, training_args, finetuning_args, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
stage = {"dpo": "rm"}.get(args["stage"], args["stage"])
ds = get_dataset(template, model_args, data_args, training_args, stage=stage, **module)
pad = module["tokenizer"].pad_token_id
out = {}

def digest(arrays):
    import numpy as np
    return {k: [list(np.shape(v)), round(float(np.sum(np.asarray(v, dtype=np.float64))), 3),
                round(float(np.sum(np.abs(np.asarray(v, dtype=np.float64)))), 3)]
            for k, v in arrays.items() if hasattr(v, "shape") and np.size(v) and np.asarray(v).dtype.kind in "biuf"}

def add_media(split, d):
    media = []
    for i, ids in enumerate(d["input_ids"]):
        im, vi, au = d["images"][i] or [], d["videos"][i] or [], d["audios"][i] or []
        mm = template.mm_plugin.get_mm_inputs(im, vi, au, [len(im)], [len(vi)], [len(au)], [ids],
                                              module["processor"])
        media.append(digest(mm))
    if any(media):  # a set without media is tokenized as text on our side
        out["media:" + split] = media

splits = []
for split in ("train_dataset", "eval_dataset"):
    d = ds.get(split)
    if isinstance(d, dict):  # eval_on_each_dataset
        splits += [(f"{split}/{name}", part) for name, part in d.items()]
    elif d is not None:
        splits.append((split, d))
for split, d in splits:
    cols = d.column_names
    if "kl_input_ids" in cols:
        out[split] = [list(r) for r in zip(d["input_ids"], d["labels"], d["kl_input_ids"], d["kl_labels"])]
        if module.get("processor") is not None and "images" in cols:
            add_media(split, d)
    elif "chosen_input_ids" in cols:
        out[split] = [[a, b] for a, b in zip(d["chosen_input_ids"], d["rejected_input_ids"])]
    elif "labels" in cols:
        rows = []
        for ids, labels in zip(d["input_ids"], d["labels"]):
            end = len(ids)
            if "position_ids" in cols:  # packed: the padding up to cutoff_len
                while end and ids[end - 1] == pad and labels[end - 1] == -100:
                    end -= 1
            rows.append([ids[:end], labels[:end]])
        out[split] = rows
        if module.get("processor") is not None and "images" in cols and "position_ids" not in cols:
            add_media(split, d)
    else:
        out[split] = [[a] for a in d["input_ids"]]
json.dump(out, open(sys.argv[2], "w"))
"""


def ours(args: dict) -> dict:
    from engine.config import build_config
    from engine.data import get_dataset
    from engine.models.tokenizer_setup import load_text_components
    from engine.multimodal import media_context
    from engine.train.preference import _with_kl_pairs

    os.environ["LF_ENGINE_CACHE"] = "off"
    each = bool(args.get("eval_on_each_dataset"))  # refused here for stages other than sft/pt: its sets built apart
    cfg = build_config({k: v for k, v in args.items() if k != "eval_on_each_dataset"} if each else args)
    tokenizer, template = load_text_components(cfg)
    media = media_context(cfg, tokenizer)  # multimodal models
    bundle = get_dataset(cfg, tokenizer, template, media=media)
    splits = [("train_dataset", bundle.train)]
    if each and cfg.data.eval_dataset:
        from engine.data.each_eval import eval_sets_by_name

        splits += [(f"eval_dataset/{name}", part) for name, part in
                   eval_sets_by_name(cfg, tokenizer, template, media).items()]
    else:
        splits.append(("eval_dataset", bundle.eval))
    out = {}
    for split, data in splits:
        if data is None:
            continue
        if args["stage"] == "kto":
            from engine.multimodal.plugins import unpack_arrays

            d = _with_kl_pairs(data, cfg)
            out[split] = [[p + c, [-100] * len(p) + c, kp + kc, [-100] * len(kp) + kc] for p, c, kp, kc in
                          zip(d["prompt_ids"], d["completion_ids"], d["KL_prompt_ids"], d["KL_completion_ids"])]
            if "mm_inputs" in d.column_names:
                out["media:" + split] = [_digest(unpack_arrays(blob)) for blob in d["mm_inputs"]]
        elif args["stage"] == "dpo":
            out[split] = [[p + c, p + r] for p, c, r in zip(data["prompt_ids"], data["chosen_ids"], data["rejected_ids"])]
        elif args["stage"] == "rm":
            out[split] = [[c, r] for c, r in zip(data["chosen_ids"], data["rejected_ids"])]
        elif args["stage"] == "pt" and not cfg.data.neat_packing:
            out[split] = [[ids] for ids in data["input_ids"]]
        else:
            out[split] = [[ids, labels] for ids, labels in zip(data["input_ids"], data["labels"])]
            if "mm_inputs" in data.column_names and not cfg.data.packing and not cfg.data.neat_packing:
                from engine.multimodal.plugins import unpack_arrays

                out["media:" + split] = [_digest(unpack_arrays(blob)) for blob in data["mm_inputs"]]
    return out


def _digest(arrays: dict) -> dict:
    """Each array's shape, sum and sum of absolute values (as THEIRS gives them)."""
    import numpy as np

    return {k: [list(np.shape(v)), round(float(np.sum(np.asarray(v, dtype=np.float64))), 3),
                round(float(np.sum(np.abs(np.asarray(v, dtype=np.float64)))), 3)]
            for k, v in arrays.items() if hasattr(v, "shape") and np.size(v) and np.asarray(v).dtype.kind in "biuf"}


def _same(split: str, a: object, b: object) -> bool:
    """Rows are equal; media digests on the arrays both sides hold (and at least one where either has any): the same
    shapes, sums within 0.1% of the sum of absolute values (the two image processors' resizing differs in the last
    bits)."""
    if not split.startswith("media:"):
        return a == b
    common = set(a) & set(b)

    def close(x: list, y: list) -> bool:
        scale = 1e-3 * max(x[2], y[2], 1.0)
        return x[0] == y[0] and abs(x[1] - y[1]) <= scale and abs(x[2] - y[2]) <= scale

    return all(close(a[k], b[k]) for k in common) and (bool(common) or not (a or b))


def _in_order(split: str, theirs: list, mine: list) -> int:
    """How many of ``mine`` match rows of ``theirs`` in order (each of theirs used once, greedily)."""
    found, at = 0, 0
    for row in mine:
        while at < len(theirs) and not _same(split, theirs[at], row):
            at += 1
        if at == len(theirs):
            break
        found, at = found + 1, at + 1
    return found


def local_model(args: dict) -> dict:
    """``args`` with a built-in demo model's name (``demo``, ``demo-vlm``) replaced by its folder, built if need be:
    LLaMA-Factory would look the name up on the hub."""
    from engine.demo_names import DEMO_VLM_PATH, is_demo_name

    name = args.get("model_name_or_path")
    if not is_demo_name(name):
        return args
    if name.strip().lower() == DEMO_VLM_PATH:
        from engine.demo_vlm import ensure_demo_vlm as ensure
    else:
        from engine.demo import ensure_demo_model as ensure
    return {**args, "model_name_or_path": str(ensure())}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory installed")
    parser.add_argument("config", help="a YAML file or a JSON mapping")
    opts = parser.parse_args()
    text = Path(opts.config).read_text(encoding="utf-8") if Path(opts.config).is_file() else opts.config
    args = yaml.safe_load(text)
    args = {"do_train": True, "finetuning_type": "lora", "output_dir": tempfile.mkdtemp(), "report_to": "none",
            "overwrite_cache": True, **local_model(args)}
    with tempfile.TemporaryDirectory() as folder:
        target = Path(folder) / "theirs.json"
        proc = subprocess.run([opts.incumbent, "-c", THEIRS, json.dumps(args), str(target)], capture_output=True,
                              text=True)
        if proc.returncode:
            print(proc.stderr[-3000:])
            return 1
        theirs = json.loads(target.read_text(encoding="utf-8"))
    mine = ours(args)
    identical = True
    for split, rows in theirs.items():
        got = mine.get(split, [])
        same = sum(_same(split, a, b) for a, b in zip(rows, got))
        print(f"{split}: LLaMA-Factory {len(rows)} rows, ours {len(got)}, identical {same}")
        if same != len(rows) or len(got) != len(rows):
            identical = False
            first = next((i for i, (a, b) in enumerate(zip(rows, got)) if not _same(split, a, b)),
                         min(len(rows), len(got)))
            print(f"  first difference at row {first}")
            if len(got) < len(rows):  # rows we drop (multimodal rows cut through their media): ours in LF's order
                found = _in_order(split, rows, got)
                print(f"  {found} of our {len(got)} rows are LLaMA-Factory's, in its order, with "
                      f"{len(rows) - found} of its rows between them")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
