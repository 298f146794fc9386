"""The multimodal preference runs recorded in tests/golden/lf_pref_vision.json, shared by their generator
(tests/golden/generate_pref_vision.py) and tests/engine/test_pref_vision_lf.py: tiny Qwen2-VL and LLaVA models
(tests/engine/tinyvlms.py) whose weights are redrawn from one seeded generator (the same numbers whatever transformers' own init), preference
sets made from the repository's demo pictures (examples/data/demo_vlm.json: LLaMA-Factory's own multimodal
preference sets, rlhf_v, vlfeedback and rlaif_v, live on the hub only, and its mllm_demo has no preference rows), and
one config per case.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SOURCE = REPO / "examples" / "data"
TRAIN_ROWS, EVAL_ROWS = range(0, 8), range(8, 13)  # of demo_vlm.json: 8 training rows, 5 evaluation rows
OTHER = 4  # a row's rejected (dpo) or undesired (kto) answer: the answer of the row OTHER places on (another picture)

COMMON = {
    "pref_beta": 0.1, "cutoff_len": 256, "do_train": True, "do_eval": True,
    "max_steps": 2, "per_device_train_batch_size": 2, "per_device_eval_batch_size": 4, "logging_steps": 1,
    "eval_strategy": "steps", "eval_steps": 2, "seed": 42, "save_strategy": "no", "plot_loss": False,
    "report_to": "none", "image_max_pixels": 56 * 56 * 4, "image_min_pixels": 28 * 28,
}

QWEN = {"template": "qwen2_vl", "image_max_pixels": 56 * 56 * 4, "image_min_pixels": 28 * 28}
LLAVA = {"template": "llava"}  # CLIP's processor: every picture resized and cropped to 28 x 28
CASES = {
    "dpo_full": {"family": "qwen2_vl", **QWEN, "stage": "dpo", "pref_loss": "sigmoid", "finetuning_type": "full",
                 "learning_rate": 1e-3, "dataset": "vlm_pairs_train", "eval_dataset": "vlm_pairs_eval"},
    "dpo_lora": {"family": "qwen2_vl", **QWEN, "stage": "dpo", "pref_loss": "sigmoid", "finetuning_type": "lora",
                 "lora_target": "all", "learning_rate": 5e-3, "dataset": "vlm_pairs_train",
                 "eval_dataset": "vlm_pairs_eval"},
    "kto_full": {"family": "llava", **LLAVA, "stage": "kto", "finetuning_type": "full", "learning_rate": 1e-3,
                 "dataset": "vlm_kto_train", "eval_dataset": "vlm_kto_eval"},
    "kto_lora": {"family": "llava", **LLAVA, "stage": "kto", "finetuning_type": "lora", "lora_target": "all",
                 "learning_rate": 5e-3, "dataset": "vlm_kto_train", "eval_dataset": "vlm_kto_eval"},
}
"""Each case: its model family and its keys over :data:`COMMON` (two training steps, an evaluation at step 2 and the
final one; the vision tower and projector frozen, LLaMA-Factory's default). KTO runs on LLaVA, not Qwen2-VL:
LLaMA-Factory 0.9.5's KTO forward passes a fixed list of model inputs without ``mm_token_type_ids``, which
transformers 5's Qwen2-VL requires with ``image_grid_thw`` (ValueError: "Multimodal data was passed ... but
`mm_token_type_ids` is missing"), so its kto cannot run a Qwen2-VL at all here; its dpo forward passes them."""


def build_model(folder: Path, family: str) -> Path:
    """The tiny model of ``family`` (tests/engine/tinyvlms.py) with its processor, every weight redrawn from a generator seeded
    1234 in name order (norms at one), saved as float32 safetensors."""
    import torch

    sys.path.insert(0, str(REPO / "tests" / "engine"))
    from tinyvlms import build_tiny_vlm

    from engine.multimodal.processor import save_processor

    model, processor = build_tiny_vlm(family)
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            norm = "norm" in name or "ln_q" in name
            if norm and name.endswith(".weight"):
                param.fill_(1.0)
            elif norm and name.endswith(".bias"):
                param.zero_()
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    model.to(torch.float32).save_pretrained(folder, safe_serialization=True)
    save_processor(processor, folder)
    return folder


def write_data(folder: Path) -> Path:
    """The four sets (pairwise and kto, training and evaluation) and their ``dataset_info.json`` in ``folder``; the
    pictures are read from examples/data (absolute paths)."""
    rows = json.loads((SOURCE / "demo_vlm.json").read_text(encoding="utf-8"))
    folder.mkdir(parents=True, exist_ok=True)

    def other(index: int) -> str:
        return rows[(index + OTHER) % len(rows)]["messages"][1]["content"]

    def pairs(indices: range) -> list[dict]:
        return [{"conversations": [{"from": "human", "value": rows[i]["messages"][0]["content"]}],
                 "chosen": {"from": "gpt", "value": rows[i]["messages"][1]["content"]},
                 "rejected": {"from": "gpt", "value": other(i)},
                 "images": [str(SOURCE / p) for p in rows[i]["images"]]} for i in indices]

    def kto(indices: range) -> list[dict]:
        out = []
        for i in indices:
            for answer, label in ((rows[i]["messages"][1]["content"], True), (other(i), False)):
                out.append({"messages": [rows[i]["messages"][0], {"role": "assistant", "content": answer}],
                            "label": label, "images": [str(SOURCE / p) for p in rows[i]["images"]]})
        return out

    pair_entry = {"formatting": "sharegpt", "ranking": True, "columns": {
        "messages": "conversations", "chosen": "chosen", "rejected": "rejected", "images": "images"}}
    kto_entry = {"formatting": "sharegpt", "columns": {"messages": "messages", "kto_tag": "label", "images": "images"},
                 "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                          "assistant_tag": "assistant"}}
    info = {}
    for name, data, entry in (("vlm_pairs_train", pairs(TRAIN_ROWS), pair_entry),
                              ("vlm_pairs_eval", pairs(EVAL_ROWS), pair_entry),
                              ("vlm_kto_train", kto(TRAIN_ROWS), kto_entry),
                              ("vlm_kto_eval", kto(EVAL_ROWS), kto_entry)):
        (folder / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
        info[name] = {"file_name": f"{name}.json", **entry}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def config(case: str, model: Path, data: Path, output: Path) -> dict:
    """The full config of ``case`` (the same keys for LLaMA-Factory and for ours) with ``model``, a folder of
    :func:`build_model` for the case's family."""
    keys = {key: value for key, value in CASES[case].items() if key != "family"}
    return {"model_name_or_path": str(model), "dataset_dir": str(data), "output_dir": str(output), **COMMON, **keys}
