"""The evaluation after training as LLaMA-Factory 0.9.5 reports it, without running it twice: where training's last
step evaluated, LLaMA-Factory's workflow scores the same weights once more, which its trainer_log.jsonl and
trainer_state.json do not show and its all_results.json / eval_results.json hold; ours keeps the last step's
metrics for those files (engine/train/final_eval.py). Expected: LLaMA-Factory's own runs of the same configs on the
same model and data (tests/golden/generate_final_eval.py -> tests/golden/lf_final_eval.json)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.cli import main
from engine.train.final_eval import final_evaluation, remember_evaluations
from tests.golden.generate_final_eval import CASES, config
from tests.golden.lf_logs import as_our_events, close
from tests.golden.pref_runs import build_model

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden/lf_final_eval.json").read_text())["cases"]
OURS_ONLY = {"num_input_tokens_seen", "perplexity"}
"""Keys our results add (README: transformers' token count, and perplexity for sft)."""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return build_model(tmp_path_factory.mktemp("final_eval") / "model")


@pytest.mark.parametrize("case", list(CASES))
def test_final_evaluation_equals_llamafactorys_files(model, case, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    path, out = tmp_path / "run.yaml", tmp_path / "out"
    path.write_text(json.dumps(config(case, model, out)))
    assert main(["train", str(path)]) == 0
    theirs = GOLDEN[case]
    evals = [e for e in (json.loads(line) for line in (out / "events.jsonl").read_text().splitlines())
             if e.get("event") == "eval"]
    lf_evals = [e for e in as_our_events(theirs["logs"]) if "eval_loss" in e]
    assert [e["step"] for e in evals] == [e["step"] for e in lf_evals]  # one evaluation at the last step
    if case != "at_the_end":
        assert [e["step"] for e in evals] == theirs["trainer_log_eval_steps"]
    state = json.loads((out / "trainer_state.json").read_text())
    assert [e["step"] for e in state["log_history"] if "eval_loss" in e] == theirs["trainer_state_eval_steps"]
    for ours_e, lf_e in zip(evals, lf_evals):
        assert close(ours_e["eval_loss"], lf_e["eval_loss"]), (ours_e, lf_e)
    for name in ("all_results", "eval_results"):
        results = json.loads((out / f"{name}.json").read_text())
        assert set(results) - OURS_ONLY == set(theirs[name]), name
        assert close(results["eval_loss"], theirs[name]["eval_loss"])
        assert results["eval_loss"] == evals[-1]["eval_loss"]  # the last step's evaluation (or the final one)
    # transformers' estimate over LLaMA-Factory's padded batches (ours run back to back: 188.6M against 247.3M)
    assert json.loads((out / "all_results.json").read_text())["total_flos"] == theirs["all_results"]["total_flos"]
    assert state["total_flos"] == theirs["all_results"]["total_flos"]


class _Trainer:
    """Stands in for a Trainer: counts its evaluations; ``step`` is its global step."""

    def __init__(self, load_best: bool = False) -> None:
        self.calls, self.state = 0, SimpleNamespace(global_step=0)
        self.args = SimpleNamespace(load_best_model_at_end=load_best)
        self.eval_dataset = {"one": [1], "two": [2]}

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        self.calls += 1
        if eval_dataset is None:  # as transformers does for a dict: one call per set, merged
            merged = {}
            for name in self.eval_dataset:
                merged.update(self.evaluate(eval_dataset=name, metric_key_prefix=f"eval_{name}"))
            return merged
        return {f"{metric_key_prefix}_loss": float(self.calls + self.state.global_step)}


def test_an_evaluation_is_kept_only_for_the_weights_it_scored():
    trainer = _Trainer()
    remember_evaluations(trainer)
    trainer.state.global_step = 4
    during = trainer.evaluate(ignore_keys=None)  # the Trainer's own call at the last step
    assert trainer.calls == 3 and set(during) == {"eval_one_loss", "eval_two_loss"}
    assert final_evaluation(trainer, trained=True) == during and trainer.calls == 3  # not run again
    trainer.state.global_step = 5  # a step since: the weights changed
    assert final_evaluation(trainer, trained=True) != during and trainer.calls == 6
    best = _Trainer(load_best=True)  # the best checkpoint is loaded after the last step
    remember_evaluations(best)
    best.state.global_step = 4
    best.evaluate()
    final_evaluation(best, trained=True)
    assert best.calls == 6
    alone = _Trainer()  # an evaluation without training always runs
    remember_evaluations(alone)
    final_evaluation(alone, trained=False)
    final_evaluation(alone, trained=False)
    assert alone.calls == 6
