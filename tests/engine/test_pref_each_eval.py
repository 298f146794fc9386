"""``eval_on_each_dataset`` for stages dpo and rm: each evaluation set is evaluated apart, as LLaMA-Factory 0.9.5's
trainers (HF Trainer over a dict of sets) do: ``eval_NAME_loss`` per set; dpo's reward metrics under the plain keys
(``eval_rewards/accuracies``, ...), each set's in its own log entry; rm's accuracy as ``eval_NAME_accuracy``, a mean
over the set's pairs (its ``ComputeAccuracy``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden.pref_runs import write_sets_beside

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
SETS = {"pref_one": slice(10, 16), "pref_two": slice(16, 21)}  # 6 and 5 pairs: batches of 4+2 and 4+1


def _data(tmp_path: Path) -> Path:
    """The two evaluation sets cut from demo_dpo, beside the whole of it."""
    return write_sets_beside(tmp_path / "data", "demo_dpo", SETS)


def _run(tmp_path: Path, stage: str, name: str, command: str = "train", **keys) -> Path:
    from engine.demo import ensure_demo_model

    config = tmp_path / f"{name}.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": stage,
        "finetuning_type": "lora", "lora_target": "all", "pref_beta": 0.1, "dataset_dir": str(tmp_path / "data"),
        "cutoff_len": 48, "per_device_eval_batch_size": 4, "seed": 42, "save_strategy": "no", "plot_loss": False,
        "report_to": "none", "output_dir": str(tmp_path / name), **keys}))
    assert main([command, str(config)]) == 0
    return tmp_path / name


def _each(tmp_path: Path, stage: str) -> tuple[Path, list[dict]]:
    _data(tmp_path)
    out = _run(tmp_path, stage, "each", dataset="demo_dpo", eval_dataset="pref_one, pref_two", eval_on_each_dataset=True,
               do_train=True, do_eval=True, max_steps=2, per_device_train_batch_size=4, learning_rate=5e-3,
               eval_strategy="steps", eval_steps=2)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    # at step 2 (eval_strategy), the last step, so that is the final evaluation too (not run again, as
    # LLaMA-Factory's trainer_log.jsonl shows it): one event per set, in eval_dataset's order
    assert [(e["step"], next(k for k in e if k.endswith("_loss"))) for e in evals] == [
        (2, "eval_pref_one_loss"), (2, "eval_pref_two_loss")]
    assert all("eval_loss" not in e for e in evals)
    results = json.loads((out / "eval_results.json").read_text())
    assert {f"eval_{name}_{key}" for name in SETS for key in ("loss", "runtime")} <= set(results)
    assert "eval_loss" not in results
    from app.monitor import RunMonitor
    from engine.runs import RunFolder

    shown = dict(RunMonitor(RunFolder(out)).refresh().progress()["eval_scores"])  # the board's card: each set's loss
    assert shown == {name: pytest.approx(results[f"eval_{name}_loss"]) for name in SETS}
    return out, evals


def test_each_dpo_eval_set_is_evaluated_on_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    out, evals = _each(tmp_path, "dpo")
    keys = ("eval_rewards/chosen", "eval_rewards/rejected", "eval_rewards/accuracies", "eval_rewards/margins",
            "eval_logps/chosen", "eval_logps/rejected")
    assert all(set(keys) <= set(e) for e in evals)
    assert evals[0]["eval_rewards/chosen"] != evals[1]["eval_rewards/chosen"]  # each set's own rewards
    from engine.demo import ensure_demo_model

    # each equals an evaluation of that set alone with the trained adapter, against the base as training had it
    # (an evaluation alone without ref_model is referenced to the model itself, as in LLaMA-Factory)
    base = str(ensure_demo_model())
    for name in SETS:
        alone = json.loads((_run(tmp_path, "dpo", name, "eval", eval_dataset=name, adapter_name_or_path=str(out),
                                 ref_model=base) / "eval_results.json").read_text())
        each = next(e for e in evals if f"eval_{name}_loss" in e)
        assert each[f"eval_{name}_loss"] == pytest.approx(alone["eval_loss"], rel=1e-5)
        for key in keys:
            assert each[key] == pytest.approx(alone[key], rel=1e-5, abs=1e-6), key


def test_each_rm_eval_set_is_evaluated_on_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    out, evals = _each(tmp_path, "rm")
    for event in evals:  # LLaMA-Factory's ComputeAccuracy, named by the set; no plain eval_accuracy beside it
        name = next(k for k in event if k.endswith("_loss"))[len("eval_"):-len("_loss")]
        assert f"eval_{name}_accuracy" in event and "eval_accuracy" not in event
    for name in SETS:
        each = next(e for e in evals if f"eval_{name}_loss" in e)
        alone = json.loads((_run(tmp_path, "rm", name, "eval", eval_dataset=name,
                                 adapter_name_or_path=str(out)) / "eval_results.json").read_text())
        assert each[f"eval_{name}_loss"] == pytest.approx(alone["eval_loss"], rel=1e-5)
        # the mean over the set's pairs, as one batch holding them all gives (not TRL's mean of batch means)
        whole = json.loads((_run(tmp_path, "rm", f"{name}_whole", "eval", eval_dataset=name, adapter_name_or_path=str(out),
                                 per_device_eval_batch_size=16) / "eval_results.json").read_text())
        assert each[f"eval_{name}_accuracy"] == pytest.approx(whole["eval_accuracy"])
        assert alone["eval_accuracy"] == pytest.approx(whole["eval_accuracy"])
