"""Multimodal dpo and kto as LLaMA-Factory 0.9.5 logs them, key for key and value for value: ``loss``, ``grad_norm``,
``rewards/*``, ``logps/*``, ``logits/*`` (and kto's ``kl``) of two training steps and of the evaluations, with
pictures, full and LoRA (dpo on a tiny Qwen2-VL, kto on a tiny LLaVA; why: tests/golden/pref_vision_runs.py). The
expected entries were recorded from LLaMA-Factory's own runs of the same configs on the same models and data
(tests/golden/generate_pref_vision.py -> tests/golden/lf_pref_vision.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden.lf_logs import as_our_events, differences
from golden.pref_vision_runs import CASES, build_model, config, write_data

from engine.cli import main

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden/lf_pref_vision.json").read_text())["cases"]

@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("pref_vision_lf")
    models = {family: build_model(root / family, family) for family in sorted({c["family"] for c in CASES.values()})}
    return models, write_data(root / "data"), root



@pytest.mark.parametrize("case", list(CASES))
def test_vision_pref_metrics_equal_llamafactory(setup, case, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    models, data, root = setup
    path = root / f"{case}.yaml"
    path.write_text(json.dumps(config(case, models[CASES[case]["family"]], data, root / case)))
    assert main(["train", str(path)]) == 0
    events = [json.loads(line) for line in (root / case / "events.jsonl").read_text().splitlines()]
    theirs = as_our_events(GOLDEN[case]["logs"])
    steps = [e for e in events if e.get("event") == "log"]
    evals = [e for e in events if e.get("event") == "eval"]
    lf_steps = [e for e in theirs if "loss" in e]
    lf_evals = [e for e in theirs if "eval_loss" in e]
    assert [e["step"] for e in steps] == [e["step"] for e in lf_steps]
    assert [e["step"] for e in evals] == [e["step"] for e in lf_evals]
    worst, wrong = differences([*zip(steps, lf_steps), *zip(evals, lf_evals)])
    assert not wrong, "\n".join(wrong)
    print(f"{case}: max abs difference {worst:.3g}")
