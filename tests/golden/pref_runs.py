"""The preference runs recorded in tests/golden/lf_pref_metrics.json, shared by their generator (run with
LLaMA-Factory's environment) and tests/engine/test_pref_metrics_lf.py (ours): one tiny model with weights drawn from a
seeded generator (so both environments build the same numbers, whatever their transformers' own init), the
repository's demo preference data cut into a training set and two evaluation sets, and one config per case.
"""

from __future__ import annotations

import json
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

DPO_SETS = {"dpo_train": slice(0, 8), "pref_one": slice(10, 16), "pref_two": slice(16, 21)}  # eval: 6 and 5 pairs
KTO_SETS = {"kto_train": slice(0, 12), "kto_one": slice(12, 20), "kto_two": slice(20, 27)}  # eval: 8 and 7 rows

COMMON = {
    "template": "qwen", "finetuning_type": "full", "pref_beta": 0.1, "cutoff_len": 64, "do_train": True,
    "do_eval": True, "eval_on_each_dataset": True, "max_steps": 2, "per_device_train_batch_size": 2,
    "per_device_eval_batch_size": 4, "learning_rate": 1e-3, "logging_steps": 1, "eval_strategy": "steps",
    "eval_steps": 2, "seed": 42, "save_strategy": "no", "plot_loss": False, "report_to": "none",
}

CASES = {
    "dpo_sigmoid": {"stage": "dpo", "pref_loss": "sigmoid", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two"},
    "dpo_orpo": {"stage": "dpo", "pref_loss": "orpo", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two"},
    "dpo_simpo": {"stage": "dpo", "pref_loss": "simpo", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two"},
    "kto": {"stage": "kto", "dataset": "kto_train", "eval_dataset": "kto_one,kto_two"},
    "dpo_lora": {"stage": "dpo", "pref_loss": "sigmoid", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two",
                 "finetuning_type": "lora", "lora_target": "all", "learning_rate": 5e-3},
    "kto_lora": {"stage": "kto", "dataset": "kto_train", "eval_dataset": "kto_one,kto_two", "finetuning_type": "lora",
                 "lora_target": "all", "learning_rate": 5e-3},
    "rm": {"stage": "rm", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two"},
    "rm_lora": {"stage": "rm", "dataset": "dpo_train", "eval_dataset": "pref_one,pref_two", "finetuning_type": "lora",
                "lora_target": "all", "learning_rate": 5e-3},
}
"""Each case: its own keys over :data:`COMMON` (two training steps of full fine-tuning, or of a LoRA adapter whose
reference is the model with the adapter off; an evaluation of each set at step 2 and the final one)."""


def build_model(folder: Path) -> Path:
    """A two-layer Llama over the ``special`` test tokenizer, its weights drawn from one seeded generator in name
    order (norms at one), saved as float32 safetensors."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from tests.golden.tokenizers import load

    tokenizer = load("special")
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         tie_word_embeddings=False, bos_token_id=tokenizer.bos_token_id,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config).to(torch.float32)
    generator = torch.Generator().manual_seed(1234)
    with torch.no_grad():
        for name, param in sorted(model.named_parameters()):
            if name.endswith("norm.weight"):
                param.fill_(1.0)
            else:
                param.copy_(torch.randn(param.shape, generator=generator) * 0.2)
    folder.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(folder, safe_serialization=True)
    tokenizer.save_pretrained(folder)
    return folder


def cut_sets(folder: Path, source: str, sets: dict[str, slice]) -> dict[str, dict]:
    """Each slice of the demo dataset ``source`` written to ``folder/NAME.json``; their dataset_info.json entries."""
    info = json.loads((REPO / "examples/data/dataset_info.json").read_text())
    rows = json.loads((REPO / f"examples/data/{source}.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    entries = {}
    for name, part in sets.items():
        (folder / f"{name}.json").write_text(json.dumps(rows[part]))
        entries[name] = {**info[source], "file_name": f"{name}.json"}
    return entries


def write_sets_beside(folder: Path, source: str, sets: dict[str, slice]) -> Path:
    """``folder`` with the sets cut from the demo dataset ``source`` (:func:`cut_sets`) and, beside them, the whole
    of it under its own name, in one ``dataset_info.json``."""
    entries = cut_sets(folder, source, sets)
    info = json.loads((REPO / "examples/data/dataset_info.json").read_text())
    entries[source] = {**info[source], "file_name": str(REPO / f"examples/data/{source}.json")}
    (folder / "dataset_info.json").write_text(json.dumps(entries))
    return folder


def write_data(folder: Path) -> Path:
    """``dataset_info.json`` and the cut demo sets (:data:`DPO_SETS`, :data:`KTO_SETS`) in ``folder``."""
    entries = {**cut_sets(folder, "demo_dpo", DPO_SETS), **cut_sets(folder, "demo_kto", KTO_SETS)}
    (folder / "dataset_info.json").write_text(json.dumps(entries))
    return folder


def config(case: str, model: Path, data: Path, output: Path) -> dict:
    """The full config of ``case`` (the same keys for LLaMA-Factory and for ours)."""
    return {"model_name_or_path": str(model), "dataset_dir": str(data), "output_dir": str(output), **COMMON,
            **CASES[case]}
