"""Evaluation numbers as LLaMA-Factory reports them: ``compute_accuracy``'s eval_accuracy (its ComputeAccuracy: the
mean over rows of each row's share of trained next tokens predicted right) and eval_loss as the mean of the batch
losses, the last, smaller batch counted like the others. Each is checked against an independent computation: the
model's own forward pass on padded batches in data order, scored with numpy as LLaMA-Factory's code does."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from engine.cli import main
from engine.config import ConfigError, build_config
from engine.train.token_accuracy import row_accuracies

REPO = Path(__file__).resolve().parents[2]


def lf_accuracy(preds: np.ndarray, labels: np.ndarray) -> list[float]:
    """LLaMA-Factory 0.9.5's ComputeAccuracy.__call__, per row (its code's arithmetic, written here)."""
    out = []
    for i in range(len(preds)):
        pred, label = preds[i, :-1], labels[i, 1:]
        mask = label != -100
        out.append(np.mean(pred[mask] == label[mask]))
    return out


def test_rows_back_to_back_score_as_padded_rows():
    torch.manual_seed(0)
    lengths = [5, 9, 3]
    logits = [torch.randn(n, 11) for n in lengths]
    labels = [torch.randint(0, 11, (n,)) for n in lengths]
    for lab in labels:
        lab[:2] = -100  # a prompt
    labels[1][5] = -100
    width = max(lengths)
    padded_logits = torch.zeros(len(lengths), width, 11)
    padded_labels = torch.full((len(lengths), width), -100)
    for i, (lg, lab) in enumerate(zip(logits, labels)):
        padded_logits[i, :len(lg)], padded_labels[i, :len(lab)] = lg, lab
    padded, unscored = row_accuracies(padded_logits, padded_labels)
    flat_labels = torch.cat([torch.cat([torch.tensor([-100]), lab[1:]]) for lab in labels])[None]  # collator: first -100
    starts = torch.tensor([0, 5, 14, 17])
    flat, _ = row_accuracies(torch.cat(logits)[None], flat_labels, starts)
    reference = lf_accuracy(padded_logits.argmax(-1).numpy(), padded_labels.numpy())
    assert unscored == 0
    assert padded == pytest.approx(reference, abs=0) and flat == pytest.approx(reference, abs=0)


def test_a_row_without_trained_tokens_is_counted_apart():
    logits = torch.randn(2, 4, 7)
    labels = torch.tensor([[-100, -100, -100, -100], [-100, 1, 2, 3]])
    shares, unscored = row_accuracies(logits, labels)
    assert unscored == 1 and len(shares) == 1


def test_compute_accuracy_belongs_to_sft():
    assert build_config({"compute_accuracy": True}).finetuning.compute_accuracy is True
    with pytest.raises(ConfigError, match="`compute_accuracy: true` scores the supervised model"):
        build_config({"compute_accuracy": True, "stage": "dpo"})


def _padded_batches(cfg_path: Path, batch: int):
    """The demo model and the config's evaluation rows as padded batches in data order: (rows, model, [(ids, mask,
    labels), ...]), computed apart from the trainer."""
    from transformers import AutoModelForCausalLM

    from engine.config import load_config
    from engine.data import get_dataset
    from engine.models.tokenizer_setup import load_text_components

    cfg = load_config(cfg_path)
    tokenizer, template = load_text_components(cfg)
    rows = get_dataset(cfg, tokenizer, template).eval
    model = AutoModelForCausalLM.from_pretrained(cfg.model.model_name_or_path).eval()
    batches = []
    for start in range(0, len(rows), batch):
        chunk = rows[start:start + batch]
        width = max(len(ids) for ids in chunk["input_ids"])
        batches.append((torch.tensor([x + [0] * (width - len(x)) for x in chunk["input_ids"]]),
                        torch.tensor([[1] * len(x) + [0] * (width - len(x)) for x in chunk["input_ids"]]),
                        torch.tensor([x + [-100] * (width - len(x)) for x in chunk["labels"]])))
    return len(rows), model, batches


def _reference(cfg_path: Path, batch: int) -> tuple[float, float, int]:
    """eval_loss and eval_accuracy of the base demo model, computed apart from the trainer."""
    count, model, batches = _padded_batches(cfg_path, batch)
    losses, shares = [], []
    for ids, mask, labels in batches:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=mask, labels=labels)
        losses.append(out.loss.item())
        shares += lf_accuracy(out.logits.argmax(-1).numpy(), labels.numpy())
    return float(np.mean(losses)), float(np.mean(shares)), count


@pytest.mark.parametrize("padding_free", [True, False])
def test_eval_loss_and_accuracy_equal_llamafactorys_arithmetic(tmp_path, monkeypatch, padding_free):
    from engine.demo import ensure_demo_model

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    model = ensure_demo_model()
    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(model), "template": "chatml", "stage": "sft", "finetuning_type": "lora",
        "do_train": False, "do_eval": True, "eval_dataset": "demo_alpaca", "dataset_dir": "examples/data",
        "cutoff_len": 24, "per_device_eval_batch_size": 4, "compute_accuracy": True, "padding_free": padding_free,
        "output_dir": str(tmp_path / "out"), "report_to": "none"}))
    assert main(["eval", str(config)]) == 0
    results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    loss, accuracy, rows = _reference(config, 4)
    assert rows % 4 == 1  # the last batch holds one row, so how it is weighted shows
    assert results["eval_accuracy"] == pytest.approx(accuracy, rel=1e-6)
    assert results["eval_loss"] == pytest.approx(loss, rel=1e-5)
    evals = [json.loads(line) for line in (tmp_path / "out" / "events.jsonl").read_text().splitlines()
             if '"eval_accuracy"' in line]
    assert evals  # the run's events carry it too (the board shows them)


def test_accuracy_without_evaluation_data_says_so(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    from engine.train.token_accuracy import accuracy_wanted

    cfg = build_config({"compute_accuracy": True})
    with caplog.at_level("WARNING", logger="engine.train.token_accuracy"):
        assert accuracy_wanted(cfg, has_eval=False) is False
    assert "this run has none: set eval_dataset or val_size" in caplog.text
    with pytest.raises(ConfigError, match="cannot be used together"):  # LLaMA-Factory refuses the pair as well
        build_config({"compute_accuracy": True, "predict_with_generate": True})


def _counted_losses(cfg_path: Path, batch: int) -> list[tuple[float, int]]:
    """Each padded batch's loss as LLaMA-Factory's transformers computes it, and its rows: the summed cross-entropy
    of the shifted tokens over the count of labels that are not -100, position 0 included."""
    _, model, batches = _padded_batches(cfg_path, batch)
    out = []
    for ids, mask, labels in batches:
        with torch.no_grad():
            logits = model(input_ids=ids, attention_mask=mask).logits
        summed = torch.nn.functional.cross_entropy(logits[:, :-1].flatten(0, 1), labels[:, 1:].flatten(),
                                                   ignore_index=-100, reduction="sum")
        out.append(((summed / (labels != -100).sum()).item(), len(ids)))
    return out


def _eval_run(tmp_path: Path, monkeypatch, **keys) -> tuple[Path, dict]:
    """`lf-engine eval` of the demo model on a config of ``keys``; the config and its eval_results.json."""
    from engine.demo import ensure_demo_model

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    config = tmp_path / "eval.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(ensure_demo_model()), "template": "chatml", "finetuning_type": "lora",
        "do_train": False, "do_eval": True, "dataset_dir": "examples/data", "per_device_eval_batch_size": 3,
        "output_dir": str(tmp_path / "out"), "report_to": "none", **keys}))
    assert main(["eval", str(config)]) == 0
    return config, json.loads((tmp_path / "out" / "eval_results.json").read_text())


@pytest.mark.parametrize("packing", [True, False])
def test_pretraining_loss_counts_tokens_as_llamafactory(tmp_path, monkeypatch, packing):
    config, results = _eval_run(tmp_path, monkeypatch, stage="pt", eval_dataset="demo_pt", cutoff_len=16,
                                packing=packing)
    # its pt trainer is the plain Trainer, whose gather_for_metrics counts the last, smaller batch by its rows
    weighted = [loss for loss, rows in _counted_losses(config, 3) for _ in range(rows)]
    assert results["eval_loss"] == pytest.approx(float(np.mean(weighted)), rel=1e-5)
    assert results["eval_perplexity"] == math.exp(results["eval_loss"]) and "perplexity" not in results  # its key


def test_an_evaluation_that_generates_scores_as_prediction_does(tmp_path, monkeypatch):
    from engine.demo import ensure_demo_model

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    common = {"model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": "sft",
              "finetuning_type": "lora", "do_train": False, "eval_dataset": "demo_identity",
              "dataset_dir": "examples/data", "cutoff_len": 48, "per_device_eval_batch_size": 3,
              "predict_with_generate": True, "max_new_tokens": 8, "do_sample": False, "report_to": "none",
              "max_samples": 9}  # three batches (all 32 rows took 25 s more on a loaded machine)
    evaluate, predict = tmp_path / "eval.yaml", tmp_path / "predict.yaml"
    evaluate.write_text(json.dumps({**common, "do_eval": True, "output_dir": str(tmp_path / "eval")}))
    predict.write_text(json.dumps({**common, "do_predict": True, "output_dir": str(tmp_path / "predict")}))
    assert main(["eval", str(evaluate)]) == 0 and main(["eval", str(predict)]) == 0
    scored = json.loads((tmp_path / "eval" / "eval_results.json").read_text())
    predicted = json.loads((tmp_path / "predict" / "predict_results.json").read_text())
    names = ("bleu-4", "rouge-1", "rouge-2", "rouge-l")
    assert {n: scored[f"eval_{n}"] for n in names} == {n: predicted[f"predict_{n}"] for n in names}
    assert "eval_loss" not in scored and "perplexity" not in scored  # as LLaMA-Factory: no labels reach the model
    assert not (tmp_path / "eval" / "generated_predictions.jsonl").exists()


def test_evaluations_during_training_generate_when_asked(tmp_path, monkeypatch):
    from engine.demo import ensure_demo_model

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    config = tmp_path / "train.yaml"
    config.write_text(json.dumps({
        "model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": "sft", "finetuning_type": "lora",
        "do_train": True, "dataset": "demo_identity", "val_size": 0.2, "dataset_dir": "examples/data",
        "cutoff_len": 48, "max_steps": 4, "eval_strategy": "steps", "eval_steps": 2, "save_strategy": "no",
        "predict_with_generate": True, "max_new_tokens": 6, "do_sample": False, "plot_loss": False,
        "output_dir": str(tmp_path / "out"), "report_to": "none"}))
    assert main(["train", str(config)]) == 0
    events = [json.loads(line) for line in (tmp_path / "out" / "events.jsonl").read_text().splitlines()]
    evals = [e for e in events if e.get("event") == "eval"]
    # at steps 2 and 4; the one at the last step is the final evaluation too (eval_strategy turns do_eval on, as in
    # LLaMA-Factory, whose second run of it scores the same weights with the same generation keys as ours at step 4)
    assert [e["step"] for e in evals] == [2, 4] and all("eval_bleu-4" in e for e in evals)
    results = json.loads((tmp_path / "out" / "eval_results.json").read_text())
    assert {key: results[key] for key in results if key.startswith("eval_")} == {
        key: evals[-1][key] for key in evals[-1] if key.startswith("eval_")}


def test_each_eval_dataset_is_evaluated_on_its_own(tmp_path, monkeypatch):
    from engine.demo import ensure_demo_model

    monkeypatch.chdir(REPO)
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    common = {"model_name_or_path": str(ensure_demo_model()), "template": "chatml", "stage": "sft",
              "finetuning_type": "lora", "do_train": False, "do_eval": True, "dataset_dir": "examples/data",
              "cutoff_len": 32, "per_device_eval_batch_size": 3, "compute_accuracy": True, "report_to": "none"}
    each = tmp_path / "each.yaml"
    each.write_text(json.dumps({**common, "eval_dataset": "demo_identity, demo_alpaca", "eval_on_each_dataset": True,
                                "output_dir": str(tmp_path / "each")}))
    assert main(["eval", str(each)]) == 0
    results = json.loads((tmp_path / "each" / "eval_results.json").read_text())
    assert "eval_loss" not in results and "perplexity" not in results  # as LLaMA-Factory: one set of keys per dataset
    for name in ("demo_identity", "demo_alpaca"):  # each equals an evaluation of that dataset alone
        alone = tmp_path / f"{name}.yaml"
        alone.write_text(json.dumps({**common, "eval_dataset": name, "output_dir": str(tmp_path / name)}))
        assert main(["eval", str(alone)]) == 0
        single = json.loads((tmp_path / name / "eval_results.json").read_text())
        assert results[f"eval_{name}_loss"] == pytest.approx(single["eval_loss"], rel=1e-6)
        assert results[f"eval_{name}_accuracy"] == single["eval_accuracy"]


def test_eval_on_each_dataset_where_it_cannot_work():
    with pytest.raises(ConfigError, match="for stage sft, pt, rm, dpo or kto here; this config has `stage: ppo`"):
        build_config({"eval_on_each_dataset": True, "stage": "ppo", "eval_dataset": "a", "reward_model": "r"})
    for loss in ("orpo", "simpo"):  # LLaMA-Factory's losses evaluate each set too (tests/engine/test_pref_metrics_lf.py)
        assert build_config({"eval_on_each_dataset": True, "stage": "dpo", "pref_loss": loss,
                             "eval_dataset": "a"}).data.eval_on_each_dataset
    with pytest.raises(ConfigError, match="with `predict_with_generate: true`"):
        build_config({"eval_on_each_dataset": True, "predict_with_generate": True, "do_eval": True,
                      "eval_dataset": "a"})
    cfg = build_config({"eval_on_each_dataset": True, "val_size": 0.1, "dataset": "a"})
    assert any("applies to `eval_dataset`, which is not set" in note for note in cfg.notes)


def test_each_eval_set_holds_the_rows_of_the_combined_set(tmp_path, monkeypatch):
    """num_samples draws run through the training and then the evaluation datasets on one generator, as in
    LLaMA-Factory, so each set has exactly its part of the combined evaluation set."""
    from engine.data import get_dataset
    from engine.data.each_eval import eval_sets_by_name
    from engine.demo import ensure_demo_model
    from engine.models.tokenizer_setup import load_text_components

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    info = json.loads((REPO / "examples/data/dataset_info.json").read_text())
    for name, count in (("demo_identity", 6), ("demo_alpaca", 8)):
        info[name] = {**info[name], "file_name": str(REPO / "examples/data" / info[name]["file_name"]),
                      "num_samples": count}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info))
    cfg = build_config({"model_name_or_path": str(ensure_demo_model()), "template": "chatml",
                        "dataset": "demo_alpaca", "eval_dataset": "demo_identity,demo_alpaca",
                        "eval_on_each_dataset": True, "dataset_dir": str(tmp_path), "cutoff_len": 48})
    tokenizer, template = load_text_components(cfg)
    combined = list(get_dataset(cfg, tokenizer, template).eval["input_ids"])
    each = eval_sets_by_name(cfg, tokenizer, template)
    assert [len(part) for part in each.values()] == [6, 8]
    assert list(each["demo_identity"]["input_ids"]) + list(each["demo_alpaca"]["input_ids"]) == combined


@pytest.mark.parametrize("padding_free", [True, False])
def test_train_on_prompt_counts_each_rows_first_token(tmp_path, monkeypatch, padding_free):
    """sft with train_on_prompt: each row's first token is a label, which LLaMA-Factory's transformers counts (and
    the shifted loss does not score); its eval_loss is the plain mean of those batch losses (Seq2SeqTrainer)."""
    config, results = _eval_run(tmp_path, monkeypatch, stage="sft", eval_dataset="demo_alpaca", cutoff_len=32,
                                train_on_prompt=True, padding_free=padding_free, max_samples=20)
    _, _, batches = _padded_batches(config, 3)
    assert all((labels[:, 0] != -100).all() for _, _, labels in batches)  # the prompt's first token is trained
    losses = [loss for loss, _ in _counted_losses(config, 3)]
    assert results["eval_loss"] == pytest.approx(float(np.mean(losses)), rel=1e-5)
