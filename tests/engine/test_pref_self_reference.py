"""Evaluation-only DPO/KTO without ``ref_model`` scores against the model itself, adapter on, as LLaMA-Factory 0.9.5
does (train/dpo/workflow.py, train/kto/workflow.py: ``ref_model = model`` when not do_train): the loss is the
neutral value (log 2 for sigmoid DPO, 0.5 for KTO, KL 0) and the ``rewards`` keys are dropped from the evaluation
metrics. Checked against LLaMA-Factory on the demo model with a LoRA adapter (16 rows of demo_dpo / demo_kto):
eval_loss 0.6931471824645996 and 0.5, eval_logps/* equal to ~1e-7, no rewards keys. Before, the adapter was switched
off for the reference (eval_loss 0.7123 / 0.4990, with eval_rewards/*)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, name: str, stage: str, **keys) -> dict:
    from engine.demo import ensure_demo_model

    config = tmp_path / f"{name}.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": stage,
        "finetuning_type": "lora", "lora_target": "all", "pref_beta": 0.1, "dataset_dir": str(REPO / "examples/data"),
        "cutoff_len": 64, "max_samples": 8, "per_device_eval_batch_size": 4, "seed": 42, "save_strategy": "no",
        "plot_loss": False, "report_to": "none", "output_dir": str(tmp_path / name), **keys}))
    assert main(["train", str(config)]) == 0
    return json.loads((tmp_path / name / "all_results.json").read_text())


def test_eval_only_dpo_and_kto_use_the_adapted_model_as_reference(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    _run(tmp_path, "adapter", "dpo", dataset="demo_dpo", do_train=True, max_steps=2,
         per_device_train_batch_size=4, learning_rate=5e-2)
    adapter = str(tmp_path / "adapter")
    dpo = _run(tmp_path, "dpo", "dpo", eval_dataset="demo_dpo", do_train=False, do_eval=True,
               adapter_name_or_path=adapter)
    assert dpo["eval_loss"] == math.log(2) or abs(dpo["eval_loss"] - math.log(2)) < 1e-6
    assert not [key for key in dpo if "rewards" in key]
    assert {"eval_logps/chosen", "eval_logps/rejected"} <= set(dpo)
    kto = _run(tmp_path, "kto", "kto", eval_dataset="demo_kto", do_train=False, do_eval=True,
               adapter_name_or_path=adapter)
    assert kto["eval_loss"] == 0.5 and kto["kl"] == 0.0  # unprefixed, as LLaMA-Factory logs it
    assert not [key for key in kto if "rewards" in key]
    # with training, the reference stays the model before training (the adapter off): rewards are computed
    trained = _run(tmp_path, "trained", "dpo", dataset="demo_dpo", eval_dataset="demo_dpo",
                   do_train=True, do_eval=True, max_steps=1, per_device_train_batch_size=4, learning_rate=5e-2)
    assert "eval_rewards/chosen" in trained and abs(trained["eval_loss"] - math.log(2)) > 1e-4
