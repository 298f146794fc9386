"""BLEU/ROUGE metrics on known strings, perplexity, and batch prediction on a tiny model."""

import json
import math
import re
from pathlib import Path

import pytest
from tinymodels import tiny_model_and_tokenizer

from engine.config import build_config
from engine.evaluate.metrics import (
    compute_generation_metrics,
    lf_generation_metrics,
    lf_metric_libraries,
    own_generation_metrics,
    perplexity,
    rouge_l,
    rouge_n,
    sentence_bleu,
    tokenize,
    with_perplexity,
)
from tests.full_disk import fill_disk

METRIC_KEYS = {"predict_bleu-4", "predict_rouge-1", "predict_rouge-2", "predict_rouge-l"}


def test_tokenize_splits_cjk_by_character_and_other_text_by_word():
    assert tokenize("Hello, world! 你好世界。") == ["Hello", ",", "world", "!", "你", "好", "世", "界", "。"]
    assert tokenize("café 123 こんにちは") == ["café", "123", "こ", "ん", "に", "ち", "は"]
    assert tokenize("   ") == []


def test_identical_texts_score_100():
    scores = own_generation_metrics(["the cat sat on the mat"], ["the cat sat on the mat"])
    assert set(scores) == METRIC_KEYS
    assert all(value == 100.0 for value in scores.values())
    # Shorter than four tokens still scores 100 (effective order).
    assert own_generation_metrics(["yes"], ["yes"])["predict_bleu-4"] == 100.0


def test_disjoint_texts_score_zero():
    scores = own_generation_metrics(["a b c d e"], ["v w x y z"])
    assert scores == {key: 0.0 for key in METRIC_KEYS}


def test_hand_computed_case():
    hyp = tokenize("the cat is on the mat")
    ref = tokenize("the cat sat on the mat")
    # Clipped n-gram precisions: 5/6, 3/5, 1/4 and no 4-gram match -> 1 / (2 * 3); equal lengths -> no penalty.
    expected_bleu = (5 / 6 * 3 / 5 * 1 / 4 * 1 / 6) ** 0.25
    assert sentence_bleu(hyp, ref) == pytest.approx(expected_bleu)
    assert rouge_n(hyp, ref, 1) == pytest.approx(5 / 6)
    assert rouge_n(hyp, ref, 2) == pytest.approx(3 / 5)
    assert rouge_l(hyp, ref) == pytest.approx(5 / 6)  # LCS: the cat on the mat
    scores = own_generation_metrics(["the cat is on the mat"], ["the cat sat on the mat"])
    assert scores["predict_bleu-4"] == pytest.approx(100 * expected_bleu, abs=1e-4)
    assert scores["predict_rouge-1"] == pytest.approx(83.3333, abs=1e-4)


def test_brevity_penalty_applies_to_short_hypotheses():
    hyp, ref = tokenize("the cat sat"), tokenize("the cat sat on the mat")
    # All n-grams of the hypothesis match; the penalty is exp(1 - 6/3).
    assert sentence_bleu(hyp, ref) == pytest.approx(math.exp(1 - 2))


def test_chinese_scores_by_character():
    scores = own_generation_metrics(["我爱北京天安门"], ["我爱北京"])
    # ROUGE-1: 4 matching characters; precision 4/7, recall 4/4.
    assert scores["predict_rouge-1"] == pytest.approx(100 * 2 * (4 / 7) / (4 / 7 + 1), abs=1e-4)
    assert scores["predict_rouge-2"] == pytest.approx(100 * 2 * (3 / 6) / (3 / 6 + 1), abs=1e-4)
    assert 0 < scores["predict_bleu-4"] < 100


def test_scores_average_over_examples_and_empty_texts_score_zero():
    scores = own_generation_metrics(["same words here", ""], ["same words here", "anything"])
    assert scores["predict_rouge-1"] == 50.0
    assert own_generation_metrics([], []) == {key: 0.0 for key in METRIC_KEYS}
    with pytest.raises(ValueError, match="2 predictions but 1 labels"):
        own_generation_metrics(["a", "b"], ["a"])


GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lf_metrics.json"


def test_scores_equal_llamafactory_own():
    """tests/golden/lf_metrics.json holds LLaMA-Factory 0.9.5's ComputeSimilarity scores (jieba words for ROUGE,
    characters with NLTK's smoothing 3 for BLEU-4): ours are the same, pair by pair and on average."""
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    libraries = lf_metric_libraries()
    assert libraries is not None, "jieba, nltk and rouge-chinese are lf-board dependencies"
    for (pred, label), expected in zip(golden["pairs"], golden["scores"]):
        found = lf_generation_metrics([pred], [label], libraries)
        assert found == {f"predict_{k}": pytest.approx(v, abs=1e-9) for k, v in expected.items()}, (pred, label)
    preds, labels = zip(*golden["pairs"])
    assert compute_generation_metrics(list(preds), list(labels)) == {
        f"predict_{k}": pytest.approx(v, rel=1e-12) for k, v in golden["mean"].items()}


def test_without_llamafactory_metric_libraries_our_own_scores_stand_in(monkeypatch, caplog):
    from engine.evaluate import metrics

    monkeypatch.setattr(metrics, "lf_metric_libraries", lambda: None)
    assert compute_generation_metrics(["the cat"], ["the cat"]) == own_generation_metrics(["the cat"], ["the cat"])
    assert "not LLaMA-Factory's (pip install jieba nltk rouge-chinese)" in caplog.text


def test_perplexity():
    assert perplexity(0.0) == 1.0
    assert perplexity(math.log(7.5)) == pytest.approx(7.5)
    assert perplexity(1e6) == math.inf
    assert math.isnan(perplexity(float("nan")))  # math.exp's NaN, as LLaMA-Factory's eval_perplexity


def test_the_eval_event_and_the_results_give_one_perplexity(tmp_path):
    """The eval event's perplexity (math.exp) and the results' (float32 torch.exp) parted at the 7th digit; both
    are now LLaMA-Factory's pt value, exp of the loss in double precision, and pt keeps its own key."""
    from types import SimpleNamespace

    from engine.lifecycle import JobContext
    from engine.train.callbacks import EventsCallback

    loss = 2.123456789
    results = with_perplexity({"eval_loss": loss}, "sft")
    assert results["perplexity"] == math.exp(loss) and "eval_perplexity" not in results
    assert with_perplexity({"eval_loss": loss}, "pt") == {"eval_loss": loss, "eval_perplexity": math.exp(loss)}
    assert with_perplexity({"eval_accuracy": 1.0}, "sft") == {"eval_accuracy": 1.0}
    with JobContext(tmp_path, "train", config_yaml="stage: sft\n") as ctx:
        EventsCallback(ctx).on_log(None, SimpleNamespace(global_step=4, max_steps=4, epoch=1.0,
                                                         is_world_process_zero=True), None, logs={"eval_loss": loss})
        EventsCallback(ctx).on_log(None, SimpleNamespace(global_step=4, max_steps=4, epoch=1.0,
                                                         is_world_process_zero=True), None, logs={"eval_loss": 800.0})
    events = [json.loads(line) for line in (tmp_path / "events.jsonl").read_text().splitlines()]
    evals = [event for event in events if event.get("event") == "eval"]
    assert evals[0]["perplexity"] == results["perplexity"]
    assert evals[1]["perplexity"] is None and with_perplexity({"eval_loss": 800.0}, "sft")["perplexity"] == math.inf


# -- prediction on a tiny model ---------------------------------------------------------------------------------


def test_run_predict_writes_predictions_and_scores(tmp_path, caplog):
    from engine.evaluate.predict import run_predict
    from engine.infer.generation import template_for
    from engine.runs import EventReader, EventWriter

    caplog.set_level("INFO", logger="engine.evaluate.predict")
    model, tokenizer = tiny_model_and_tokenizer()
    cfg = build_config({"model_name_or_path": "tiny", "template": "chatml", "do_sample": False,
                        "max_new_tokens": 6, "per_device_eval_batch_size": 2})
    template = template_for(cfg, tokenizer)
    pairs = [("Hello", "Hi there"), ("How are you today?", "fine"), ("你好", "你好世界"), ("cat", "The cat sat.")]
    rows = [{"prompt_ids": template.encode_prompt(tokenizer, [{"role": "user", "content": q}]),
             "prompt": q, "label": a} for q, a in pairs]
    events = EventWriter(tmp_path / "events.jsonl")
    metrics = run_predict(cfg, model, tokenizer, template, rows, tmp_path / "out", event_writer=events)

    lines = (tmp_path / "out" / "generated_predictions.jsonl").read_text(encoding="utf-8").splitlines()
    records = [json.loads(line) for line in lines]
    assert [set(r) for r in records] == [{"prompt", "predict", "label"}] * 4
    assert [(r["prompt"], r["label"]) for r in records] == pairs  # input order kept despite length batching
    assert all(r["predict"] for r in records)
    saved = json.loads((tmp_path / "out" / "predict_results.json").read_text(encoding="utf-8"))
    assert saved == metrics
    assert METRIC_KEYS | {"predict_runtime", "predict_samples_per_second", "predict_steps_per_second"} <= set(saved)
    progress = [e for e in EventReader(tmp_path / "events.jsonl").read_new() if e["event"] == "progress"]
    assert [e["fraction"] for e in progress] == [0.5, 1.0]
    written = next(r.getMessage() for r in caplog.records if r.getMessage().startswith("Predictions written"))
    scores = written.split(": ", 1)[1].split(", ")  # shown to four decimals, not as 86.86537000000001
    assert len(scores) == 4 and all(re.fullmatch(r"predict_[\w-]+=\d+\.\d{4}", score) for score in scores), written
    assert all(e["stage"] == "predict" for e in progress)

    # Left-padded batches give the same greedy output as one prompt at a time.
    single = build_config({"model_name_or_path": "tiny", "template": "chatml", "do_sample": False,
                           "max_new_tokens": 6, "per_device_eval_batch_size": 1})
    run_predict(single, model, tokenizer, template, rows, tmp_path / "single")
    assert (tmp_path / "single" / "generated_predictions.jsonl").read_text(encoding="utf-8") == "\n".join(lines) + "\n"


def test_run_predict_scores_against_labels(tmp_path):
    from engine.evaluate.predict import run_predict
    from engine.infer.generation import template_for

    model, tokenizer = tiny_model_and_tokenizer()
    cfg = build_config({"model_name_or_path": "tiny", "template": "chatml", "do_sample": False, "max_new_tokens": 5})
    template = template_for(cfg, tokenizer)
    rows = [{"prompt_ids": template.encode_prompt(tokenizer, [{"role": "user", "content": "Hello"}]),
             "prompt": "Hello", "label": ""}]
    run_predict(cfg, model, tokenizer, template, rows, tmp_path)
    predicted = json.loads((tmp_path / "generated_predictions.jsonl").read_text(encoding="utf-8"))["predict"]
    # Scoring the model against its own output as the label gives 100.
    rows[0]["label"] = predicted
    metrics = run_predict(cfg, model, tokenizer, template, rows, tmp_path)
    assert metrics["predict_rouge-l"] == 100.0
    assert metrics["predict_bleu-4"] == 100.0


def test_a_prediction_that_cannot_write_keeps_the_earlier_predictions_whole(tmp_path, monkeypatch):
    """The predictions file was written line by line over the earlier one: a full disk left it cut short."""
    from engine.evaluate.predict import run_predict
    from engine.infer.generation import template_for

    model, tokenizer = tiny_model_and_tokenizer()
    cfg = build_config({"model_name_or_path": "tiny", "template": "chatml", "do_sample": False, "max_new_tokens": 3})
    template = template_for(cfg, tokenizer)
    rows = [{"prompt_ids": template.encode_prompt(tokenizer, [{"role": "user", "content": "Hello"}]),
             "prompt": "Hello", "label": "Hi"}]
    earlier = '{"prompt": "an earlier run", "predict": "kept", "label": "kept"}\n'
    (tmp_path / "generated_predictions.jsonl").write_text(earlier)
    fill_disk(monkeypatch, str(tmp_path / ".generated_predictions"))  # its temp file
    with pytest.raises(OSError, match="No space left"):
        run_predict(cfg, model, tokenizer, template, rows, tmp_path)
    assert (tmp_path / "generated_predictions.jsonl").read_text() == earlier
    assert [p.name for p in tmp_path.iterdir()] == ["generated_predictions.jsonl"]  # no temp file left behind


def test_prediction_rows_are_llamafactory_own(tmp_path):
    """tests/golden/lf_predictions.jsonl is LLaMA-Factory 0.9.5's predictions file on the demo model (identity and
    tool-call rows, cutoff_len 48 cutting some prompts): our rows have the same prompts and labels, so the same
    predictions score the same. (Our labels had been the reply text, and our prompts cut from the other end.)"""
    from engine.data import load_eval_prompts
    from engine.demo import ensure_demo_model
    from engine.models import load_tokenizer
    from engine.templates import get_template
    from tests.golden.generate_predictions import CONFIG

    golden = [json.loads(line) for line in (GOLDEN.parent / "lf_predictions.jsonl").read_text().splitlines()]
    cfg = build_config({**CONFIG, "model_name_or_path": str(ensure_demo_model()), "output_dir": str(tmp_path)})
    tokenizer = load_tokenizer(cfg.model)
    template = get_template(cfg.model.template, tokenizer)
    template.fix_tokenizer(tokenizer)
    rows = load_eval_prompts(cfg, tokenizer, template)
    assert [(row["prompt"], row["label"]) for row in rows] == [(line["prompt"], line["label"]) for line in golden]


def test_predictions_and_scores_are_llamafactory_own(tmp_path):
    """Predicting on the demo model as LLaMA-Factory did for tests/golden/lf_predictions.jsonl: the predictions
    file is the same byte for byte (greedy replies, cut prompts, batches of 4), and predict_results.json carries
    the same BLEU-4 and ROUGE scores (tests/golden/lf_predict_results.json; timings left out)."""
    from engine.data import load_eval_prompts
    from engine.demo import ensure_demo_model
    from engine.evaluate.predict import run_predict
    from engine.infer.generation import template_for
    from engine.models import load_model, load_tokenizer
    from tests.golden.generate_predictions import CONFIG

    cfg = build_config({**CONFIG, "model_name_or_path": str(ensure_demo_model()), "output_dir": str(tmp_path)})
    tokenizer = load_tokenizer(cfg.model)
    template = template_for(cfg, tokenizer)
    rows = load_eval_prompts(cfg, tokenizer, template)
    model = load_model(cfg.model, cfg.finetuning, tokenizer, is_trainable=False)
    run_predict(cfg, model, tokenizer, template, rows, tmp_path)
    written = (tmp_path / "generated_predictions.jsonl").read_text(encoding="utf-8")
    assert written == (GOLDEN.parent / "lf_predictions.jsonl").read_text(encoding="utf-8")
    expected = json.loads((GOLDEN.parent / "lf_predict_results.json").read_text(encoding="utf-8"))
    for name in ("predict_results.json", "all_results.json"):
        saved = json.loads((tmp_path / name).read_text(encoding="utf-8"))
        assert {key: saved[key] for key in expected} == expected, name
