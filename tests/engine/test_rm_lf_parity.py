"""`stage: rm` against a recorded LLaMA-Factory 0.9.5 run (tests/golden/generate_rm.py), and LLaMA-Factory's rm
outputs as GRPO/RLOO's `reward_model`.

Its value head (dropout, then ``nn.Linear(hidden, 1)`` drawn after the adapters) started here from other weights
(transformers' ``normal(0, 0.02)`` head, drawn before the LoRA matrices, which were then drawn from another point of
the random stream) and trained without the dropout, so every step's loss differed; its rm output (a CAUSAL_LM adapter
with value_head.safetensors) was refused as `reward_model`."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import tinymodels
import torch

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
GOLDEN = REPO / "tests" / "golden"
RECORD = json.loads((GOLDEN / "lf_rm.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return tinymodels.build_tiny_model(tmp_path_factory.mktemp("rm-tiny"), max_positions=RECORD["max_positions"])


def _lf_output(tiny_model: Path, where: Path) -> Path:
    """LLaMA-Factory's recorded rm output, its adapter pointing at this session's tiny model."""
    folder = where / "lf-rm"
    shutil.copytree(GOLDEN / "lf_rm_lora", folder)
    config = json.loads((folder / "adapter_config.json").read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = str(tiny_model)
    (folder / "adapter_config.json").write_text(json.dumps(config), encoding="utf-8")
    return folder


def test_rm_training_follows_llamafactorys_curve(tiny_model, tmp_path):
    out = tmp_path / "rm"
    config = tmp_path / "rm.yaml"
    settings = {**RECORD["config"], "model_name_or_path": str(tiny_model), "output_dir": str(out),
                "dataset_dir": str(REPO / "examples" / "data")}
    config.write_text("".join(f"{key}: {json.dumps(value)}\n" for key, value in settings.items()), encoding="utf-8")
    assert main(["train", str(config)]) == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = {e["step"]: e for e in events if e.get("event") == "log"}
    assert sorted(steps) == [s["step"] for s in RECORD["steps"]]
    for want in RECORD["steps"]:
        got = steps[want["step"]]
        assert got["loss"] == pytest.approx(want["loss"], abs=2e-6), want["step"]
        assert got["grad_norm"] == pytest.approx(want["grad_norm"], rel=1e-5), want["step"]
    evals = {e["step"]: e for e in events if e.get("event") == "eval"}
    for want in RECORD["evals"]:
        assert evals[want["step"]]["eval_loss"] == pytest.approx(want["eval_loss"], abs=2e-6)
        assert evals[want["step"]]["eval_accuracy"] == pytest.approx(want["eval_accuracy"])
    # still this project's reward model: a SEQ_CLS adapter with its score head, usable as reward_model
    adapter = json.loads((out / "adapter_config.json").read_text(encoding="utf-8"))
    assert adapter["task_type"] == "SEQ_CLS" and "score" in adapter["modules_to_save"]
    assert not (out / "value_head.safetensors").exists()
    from engine.train.rl_checks import check_reward_model

    assert check_reward_model(str(out)) == []


def _scorer(tiny_model: Path, folder: Path):
    from engine.config import build_config
    from engine.models.tokenizer_setup import load_text_components
    from engine.train.reward_model import load_reward_model

    cfg = build_config({"model_name_or_path": str(tiny_model), "template": RECORD["config"]["template"],
                        "stage": "grpo", "reward_model": str(folder), "dataset": "demo_dpo", "cutoff_len": 256})
    _, template = load_text_components(cfg)
    suffix = template.stop_words[0]
    assert all(text.endswith(suffix) for text in RECORD["texts"])
    score = load_reward_model(cfg, template)
    return lambda texts: score([t[: -len(suffix)] for t in texts], [""] * len(texts))  # it appends the suffix


def test_an_llamafactory_rm_adapter_scores_as_llamafactory_does(tiny_model, tmp_path):
    from engine.train.rl_checks import check_reward_model

    folder = _lf_output(tiny_model, tmp_path)
    assert check_reward_model(str(folder)) == []
    scores = _scorer(tiny_model, folder)(RECORD["texts"])
    assert scores == pytest.approx(RECORD["scores"], abs=1e-5)


def test_an_llamafactory_full_rm_output_scores_as_llamafactory_does(tiny_model, tmp_path):
    """LLaMA-Factory's full-tuning rm output: the causal LM (config.json says ...ForCausalLM) with
    value_head.safetensors beside it; made here by merging the recorded adapter."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from engine.train.rl_checks import check_reward_model

    adapter = _lf_output(tiny_model, tmp_path)
    full = tmp_path / "lf-rm-full"
    merged = PeftModel.from_pretrained(AutoModelForCausalLM.from_pretrained(tiny_model), adapter).merge_and_unload()
    merged.save_pretrained(full)
    AutoTokenizer.from_pretrained(adapter).save_pretrained(full)
    shutil.copy(adapter / "value_head.safetensors", full)
    assert json.loads((full / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    assert check_reward_model(str(full)) == []
    assert _scorer(tiny_model, full)(RECORD["texts"]) == pytest.approx(RECORD["scores"], abs=1e-5)


def test_a_causal_lm_adapter_without_a_value_head_is_still_refused(tiny_model, tmp_path):
    from engine.train.rl_checks import check_reward_model

    folder = _lf_output(tiny_model, tmp_path)
    (folder / "value_head.safetensors").unlink()
    problems = check_reward_model(str(folder))
    assert len(problems) == 1 and "CAUSAL_LM adapter without a value head" in problems[0]
    assert "value_head.safetensors" in problems[0]


def test_a_value_head_file_of_another_shape_is_named(tiny_model, tmp_path):
    from safetensors.torch import save_file

    from engine.errors import UserError
    from engine.train.rl_checks import check_reward_model

    folder = _lf_output(tiny_model, tmp_path)
    save_file({"v_head.summary.weight": torch.zeros(2, 32)}, str(folder / "value_head.safetensors"))
    assert "holds v_head.summary.weight (2, 32), not LLaMA-Factory's" in check_reward_model(str(folder))[0]
    with pytest.raises(UserError, match=r"holds v_head.summary.weight \(2, 32\), not LLaMA-Factory's"):
        _scorer(tiny_model, folder)


def test_each_row_is_scored_at_its_last_attended_token_when_pad_is_eos(tiny_model):
    """transformers' pooling takes the last token that is not PAD: the token before a closing EOS where PAD is
    that EOS (Llama 3); LLaMA-Factory scores the EOS itself, its last attended token."""
    from transformers import AutoModelForSequenceClassification

    from engine.models.value_head import score_last_attended

    model = AutoModelForSequenceClassification.from_pretrained(tiny_model, num_labels=1).eval()
    eos = 3
    model.config.pad_token_id = eos
    ids = torch.tensor([[5, 17, 42, eos, eos, eos], [7, 8, 9, 10, 11, eos]])
    mask = torch.tensor([[1, 1, 1, 1, 0, 0], [1, 1, 1, 1, 1, 1]])
    with torch.inference_mode():
        per_position = model.score(model.model(input_ids=ids, attention_mask=mask).last_hidden_state)[..., 0]
        plain = model(input_ids=ids, attention_mask=mask).logits[:, 0]
        score_last_attended(model)
        pooled = model(input_ids=ids, attention_mask=mask).logits[:, 0]
    assert torch.allclose(pooled, per_position[[0, 1], [3, 5]])
    assert torch.allclose(plain, per_position[[0, 1], [2, 4]])  # the token before the EOS
