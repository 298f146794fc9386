"""Preference metrics as LLaMA-Factory 0.9.5 logs them, key for key and value for value: dpo (sigmoid, orpo, simpo),
kto and rm (its ``eval_NAME_loss`` and ``eval_NAME_accuracy`` per set), two training steps of full fine-tuning or
LoRA with ``eval_on_each_dataset`` (each set evaluated at step 2 and at the end). The expected log entries were
recorded from LLaMA-Factory's own run of the same configs on the same model and data
(tests/golden/generate_pref_metrics.py -> tests/golden/lf_pref_metrics.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden.lf_logs import as_our_events, close, differences, metrics
from golden.pref_runs import CASES, build_model, config, write_data

from engine.cli import main

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden/lf_pref_metrics.json").read_text())["cases"]

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("pref_lf")
    return build_model(root / "model"), write_data(root / "data"), root


def _ours(setup, case: str) -> list[dict]:
    model, data, root = setup
    path = root / f"{case}.yaml"
    path.write_text(json.dumps(config(case, model, data, root / case)))
    assert main(["train", str(path)]) == 0
    return [json.loads(line) for line in (root / case / "events.jsonl").read_text().splitlines()]



@pytest.mark.parametrize("case", list(CASES))
def test_pref_metrics_equal_llamafactory(setup, case, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    events = _ours(setup, case)
    theirs = as_our_events(GOLDEN[case]["logs"])
    steps = [e for e in events if e.get("event") == "log"]
    evals = [e for e in events if e.get("event") == "eval"]
    lf_steps = [e for e in theirs if "loss" in e]
    lf_evals = [e for e in theirs if any(k.startswith("eval_") and k.endswith("_loss") for k in e)]
    assert [e["step"] for e in steps] == [e["step"] for e in lf_steps]
    assert [(e["step"], sorted(k for k in e if k.endswith("_loss"))) for e in evals] == [
        (e["step"], sorted(k for k in e if k.endswith("_loss"))) for e in lf_evals]  # one eval event per set
    worst, wrong = differences([*zip(steps, lf_steps), *zip(evals, lf_evals)])
    results = json.loads((setup[2] / case / "all_results.json").read_text())  # the final file: the last set's metrics
    for key, value in metrics(GOLDEN[case]["all_results"]).items():
        if key not in results or not close(results[key], value):
            wrong.append(f"all_results.json {key}: ours {results.get(key, 'missing')}, LLaMA-Factory {value}")
    assert not wrong, "\n".join(wrong)
    print(f"{case}: max abs difference {worst:.3g}")


def test_vocab_means_equal_the_mean_of_the_head_logits():
    """The per-position mean over the vocabulary from the hidden states equals the mean of the logits the model
    builds, and with a softcap the mean of the capped logits (Gemma 2's head)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from engine.train.lf_logits import policy_hidden, vocab_means

    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1)).eval()
    ids = torch.randint(0, 50, (3, 7))
    with policy_hidden(model, ids) as seen, torch.no_grad():
        logits = model(input_ids=ids).logits
    assert seen.hidden is not None
    assert torch.allclose(vocab_means(model, seen.hidden), logits.mean(-1), atol=1e-6)
    model.config.final_logit_softcapping = 0.5
    capped = (torch.tanh(logits / 0.5) * 0.5).mean(-1)
    assert torch.allclose(vocab_means(model, seen.hidden), capped, atol=1e-6)
