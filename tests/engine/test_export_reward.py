"""Exporting a `stage: rm` run's adapter (SEQ_CLS, with its trained score head in modules_to_save) merged it into a
causal LM: the head was dropped without a word, the reload check passed, and the folder was no reward model (GRPO's
`reward_model` refuses a ...ForCausalLM). It exports a ...ForSequenceClassification that scores as the adapter does."""

import json
from pathlib import Path

import torch

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]


def test_a_reward_adapter_exports_a_reward_model_with_its_head(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rm = tmp_path / "rm"
    assert main(["train", str(REPO / "examples" / "rm_lora_demo.yaml"), f"output_dir={rm}", "max_steps=2",
                 "learning_rate=0.05", "max_samples=8", "save_strategy=no", "plot_loss=false",
                 f"dataset_dir={REPO / 'examples' / 'data'}"]) == 0
    out = tmp_path / "merged"
    config = tmp_path / "export.yaml"
    config.write_text(f"model_name_or_path: demo\ntemplate: chatml\nadapter_name_or_path: {rm}\nexport_dir: {out}\n")
    assert main(["export", str(config)]) == 0
    assert "Reload check: passed" in capsys.readouterr().out
    assert json.loads((out / "config.json").read_text())["architectures"] == ["LlamaForSequenceClassification"]

    from transformers import AutoModelForSequenceClassification

    from engine.config import build_config
    from engine.models import load_model

    cfg = build_config({"model_name_or_path": "demo", "adapter_name_or_path": str(rm), "template": "chatml"})
    adapter = load_model(cfg.model, cfg.finetuning, is_trainable=False, task="reward", merge_adapters=False)
    exported = AutoModelForSequenceClassification.from_pretrained(out).eval()
    ids = torch.tensor([[5, 17, 42, 99, 7]])
    with torch.inference_mode():
        want, got = adapter(input_ids=ids).logits, exported(input_ids=ids).logits
    assert want.shape == got.shape == (1, 1)
    assert torch.allclose(want, got, atol=1e-4), (want, got)
    from engine.train.rl_checks import check_reward_model

    assert check_reward_model(str(out)) == []  # usable as GRPO's reward_model
