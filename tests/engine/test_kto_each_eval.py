"""``eval_on_each_dataset`` for stage kto: each evaluation set is evaluated apart, as LLaMA-Factory 0.9.5's KTO
trainer (HF Trainer over a dict of sets) does: ``eval_NAME_loss`` (with ``_runtime`` and the rates) per set, each
set's log entry carrying its own reward metrics (``eval_rewards/chosen``, ...; not named by set, as there)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from golden.pref_runs import write_sets_beside

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
SETS = {"kto_one": slice(0, 12), "kto_two": slice(12, 19)}  # 6+6 and 4+3 desirable/undesirable rows


def _data(tmp_path: Path) -> Path:
    """The two evaluation sets cut from demo_kto, beside the whole of it."""
    return write_sets_beside(tmp_path / "data", "demo_kto", SETS)


def _run(tmp_path: Path, name: str, command: str = "train", **keys) -> Path:
    from engine.demo import ensure_demo_model

    config = tmp_path / f"{name}.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": "kto",
        "finetuning_type": "lora", "lora_target": "all", "pref_beta": 0.1, "dataset_dir": str(tmp_path / "data"),
        "cutoff_len": 48, "per_device_eval_batch_size": 4, "seed": 42, "save_strategy": "no", "plot_loss": False,
        "report_to": "none", "output_dir": str(tmp_path / name), **keys}))
    assert main([command, str(config)]) == 0
    return tmp_path / name


def test_each_kto_eval_set_is_evaluated_on_its_own(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    _data(tmp_path)
    out = _run(tmp_path, "each", dataset="demo_kto", eval_dataset="kto_one, kto_two", eval_on_each_dataset=True,
               do_train=True, do_eval=True, max_steps=2, per_device_train_batch_size=4, learning_rate=5e-3,
               eval_strategy="steps", eval_steps=2)
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    # at step 2 (eval_strategy), the last step, so that is the final evaluation too (not run again, as
    # LLaMA-Factory's trainer_log.jsonl shows it): one event per set, in eval_dataset's order
    assert [(e["step"], next(k for k in e if k.endswith("_loss"))) for e in evals] == [
        (2, "eval_kto_one_loss"), (2, "eval_kto_two_loss")]
    assert all("eval_rewards/chosen" in e and "eval_rewards/rejected" in e and "eval_loss" not in e for e in evals)
    assert evals[0]["eval_rewards/chosen"] != evals[1]["eval_rewards/chosen"]  # each set's own rewards
    results = json.loads((out / "eval_results.json").read_text())
    assert {"eval_kto_one_loss", "eval_kto_two_loss", "eval_kto_one_runtime", "eval_kto_two_runtime"} <= set(results)
    assert "eval_loss" not in results and "perplexity" not in results
    from app.monitor import RunMonitor
    from engine.runs import RunFolder

    shown = dict(RunMonitor(RunFolder(out)).refresh().progress()["eval_scores"])  # the board's card: each set's loss
    assert shown == {name: pytest.approx(results[f"eval_{name}_loss"]) for name in SETS}
    from engine.demo import ensure_demo_model

    # the base as the reference, as training had it (an evaluation alone without ref_model is the model itself)
    base = str(ensure_demo_model())
    for name in SETS:  # each equals an evaluation of that set alone with the trained adapter
        alone = _run(tmp_path, name, "eval", eval_dataset=name, adapter_name_or_path=str(out), ref_model=base)
        single = json.loads((alone / "eval_results.json").read_text())
        each = next(e for e in evals if f"eval_{name}_loss" in e)
        assert each[f"eval_{name}_loss"] == pytest.approx(single["eval_loss"], rel=1e-5)
        # one batch of the whole set: the reward metrics are means over its rows (LLaMA-Factory's), not means of
        # batch means (TRL's), which kto_two's batches of 2+2 and 2+1 rows would make differ
        whole = _run(tmp_path, f"{name}_whole", "eval", eval_dataset=name, adapter_name_or_path=str(out),
                     per_device_eval_batch_size=16, ref_model=base)
        whole = json.loads((whole / "eval_results.json").read_text())
        for key in ("eval_rewards/chosen", "eval_rewards/rejected", "eval_logps/chosen", "eval_logps/rejected",
                    "eval_rewards/margins"):
            assert each[key] == pytest.approx(single[key], rel=1e-5, abs=1e-6), key
            assert each[key] == pytest.approx(whole[key], rel=1e-4, abs=1e-5), key
        assert each["eval_rewards/margins"] == pytest.approx(each["eval_rewards/chosen"] - each["eval_rewards/rejected"])
