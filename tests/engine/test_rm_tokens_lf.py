"""`stage: rm` where the template adds tokens (``llama3`` on the tests' ChatML tokenizer: ``<|eot_id|>`` and
``<|eom_id|>``), against LLaMA-Factory 0.9.5's recorded runs (tests/golden/generate_rm_tokens.py ->
tests/golden/lf_rm_tokens.json): every step's loss and grad_norm and each evaluation.

Every step differed, the first included: LLaMA-Factory resizes the embeddings of its causal LM with transformers'
mean resizing (a new Embedding and lm_head, each with its own init, and a multivariate normal draw for each one's new
rows), then draws noise for the new rows of both, and only then the value head (and the LoRA matrices). Ours resized
without mean resizing, and its reward model (a sequence classifier) has no lm_head, so both draws were taken from
other points of the random stream. It now resizes as LLaMA-Factory does and makes the lm_head's draws (thrown away;
rm never uses that head) where LLaMA-Factory's untied one would be (engine/models/loader.py, _AbsentLMHead).
``sft_full``: the same resize under sft, whose new rows' noise came from another point of the stream as well (step 1
loss 5.7545 against LLaMA-Factory's 5.7506 before).

``lora``: LLaMA-Factory trains the whole embedding and output matrices beside the adapter, ours only the new tokens'
rows (a deliberate speed-up, README: what makes training fast), so only the first step (before any update: the same
weights and draws) is compared; ``lora_embeddings`` (``additional_target: embed_tokens``: the whole matrix trained
in both) is compared at every step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tinymodels

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
RECORD = json.loads((REPO / "tests" / "golden" / "lf_rm_tokens.json").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return tinymodels.build_tiny_model(tmp_path_factory.mktemp("rm-tokens"), max_positions=RECORD["max_positions"])


@pytest.mark.parametrize("case", list(RECORD["cases"]))
def test_added_tokens_follow_llamafactorys_curve(tiny_model, tmp_path, case):
    want = RECORD["cases"][case]
    out = tmp_path / case
    settings = {**RECORD["common"], **want["keys"], "model_name_or_path": str(tiny_model), "output_dir": str(out),
                "dataset_dir": str(REPO / "examples" / "data")}
    config = tmp_path / f"{case}.yaml"
    config.write_text(json.dumps(settings), encoding="utf-8")
    assert main(["train", str(config)]) == 0
    events = [json.loads(line) for line in (out / "events.jsonl").read_text(encoding="utf-8").splitlines()]
    steps = {e["step"]: e for e in events if e.get("event") == "log"}
    evals = {e["step"]: e for e in events if e.get("event") == "eval"}
    assert sorted(steps) == [s["step"] for s in want["steps"]]
    if case == "lora":  # see the module's docstring: other parameters train from step 1 on
        assert steps[1]["loss"] == pytest.approx(want["steps"][0]["loss"], rel=1e-5, abs=2e-6)
        return
    ours = [steps[s["step"]][key] for s in want["steps"] for key in ("loss", "grad_norm")]
    ours += [evals[e["step"]][key] for e in want["evals"] for key in e if key != "step"]
    theirs = [s[key] for s in want["steps"] for key in ("loss", "grad_norm")]
    theirs += [e[key] for e in want["evals"] for key in e if key != "step"]
    assert ours == pytest.approx(theirs, rel=1e-5, abs=2e-6)
