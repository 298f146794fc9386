"""Token-budget batches (``max_tokens_per_batch``): every row once per epoch, each batch within the budget, the same
batches every epoch in a seeded order, and a real training run that takes them."""

from __future__ import annotations

import json
import random

import pytest

from engine.config import ConfigError, build_config
from engine.train.token_budget import TokenBudgetBatchSampler, budget_batches
from tests.engine.test_methods import run, tiny  # noqa: F401  (the tiny model fixture)


def _lengths(count=200, seed=0):
    rng = random.Random(seed)
    return [rng.randint(1, 300) for _ in range(count)]


@pytest.mark.parametrize("budget", [64, 512, 2048])
def test_every_row_once_and_each_batch_within_the_budget(budget):
    lengths = _lengths()
    batches = budget_batches(lengths, budget, seed=1)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        padded = len(batch) * max(lengths[i] for i in batch)
        assert padded <= budget or len(batch) == 1  # a row longer than the budget goes alone
    # batches are full: the next row (the shortest of the next batch) would not have fitted
    for batch, following in zip(batches, batches[1:]):
        assert (len(batch) + 1) * lengths[following[0]] > budget


@pytest.mark.parametrize("budget", [64, 512, 2048])
def test_padding_free_budget_counts_the_rows_own_tokens(budget):
    lengths = _lengths()
    batches = budget_batches(lengths, budget, seed=1, padded=False)
    assert sorted(i for batch in batches for i in batch) == list(range(len(lengths)))
    for batch in batches:
        assert sum(lengths[i] for i in batch) <= budget or len(batch) == 1
    for batch, following in zip(batches, batches[1:]):  # full: the next row would not have fitted
        assert sum(lengths[i] for i in batch) + lengths[following[0]] > budget
    assert len(batches) < len(budget_batches(lengths, budget, seed=1))  # more rows per batch than padded
    sampler = TokenBudgetBatchSampler(lengths, budget, seed=1, padded=False)
    assert sorted(map(tuple, sampler)) == sorted(map(tuple, batches))


def test_short_rows_travel_many_to_a_batch_long_rows_few():
    lengths = [10] * 40 + [200] * 4
    batches = budget_batches(lengths, 400, seed=0)
    sizes = sorted(len(b) for b in batches)
    assert sizes == [2, 2, 40]  # 40 x 10 = 400; 2 x 200 = 400


def test_same_batches_every_epoch_in_a_seeded_order_a_resume_repeats():
    lengths = _lengths()
    sampler = TokenBudgetBatchSampler(lengths, 1024, seed=7)
    first = list(sampler)
    sampler.set_epoch(1)
    second = list(sampler)
    assert len(first) == len(second) == len(sampler)
    assert sorted(map(tuple, first)) == sorted(map(tuple, second))  # same batches
    assert first != second  # another order
    again = TokenBudgetBatchSampler(lengths, 1024, seed=7)
    again.set_epoch(1)
    assert list(again) == second  # what a resumed run replays
    assert list(TokenBudgetBatchSampler(lengths, 1024, seed=8)) != first


def test_refused_with_packing_or_other_stages():
    with pytest.raises(ConfigError, match="max_tokens_per_batch.*packing"):
        build_config({"max_tokens_per_batch": 512, "packing": True})
    with pytest.raises(ConfigError, match="max_tokens_per_batch.*stage: dpo"):
        build_config({"max_tokens_per_batch": 512, "stage": "dpo"})
    with pytest.raises(ConfigError):
        build_config({"max_tokens_per_batch": -1})
    assert build_config({"max_tokens_per_batch": 512}).train.max_tokens_per_batch == 512


@pytest.mark.parametrize("padding_free", [True, False])
def test_training_takes_token_budget_batches(tiny, tmp_path, monkeypatch, padding_free):  # noqa: F811
    from engine.train.sft import LabelPositionsTrainer

    shapes = []  # (rows, longest row, real tokens) of every training batch
    original = LabelPositionsTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        if "cu_seq_lens_q" in inputs:  # a padding-free batch: the rows from their offsets
            lengths = inputs["cu_seq_lens_q"].diff()
            shapes.append((len(lengths), int(lengths.max()), int(lengths.sum())))
        else:
            rows, longest = inputs["input_ids"].shape
            shapes.append((rows, longest, int(inputs["attention_mask"].sum())))
        return original(self, model, inputs, *args, **kwargs)

    monkeypatch.setattr(LabelPositionsTrainer, "compute_loss", spy)
    examples = [{"instruction": "word " * (1 + (i * 7) % 40), "input": "", "output": "ok " * (1 + i % 5)}
            for i in range(40)]  # prompts of 1 to 40 words: short and long rows
    data = tmp_path / "varied.json"
    data.write_text(json.dumps(examples))
    out = tmp_path / "run"
    budget = 256
    assert run(tiny, out, "max_steps=-1", "num_train_epochs=1", f"max_tokens_per_batch={budget}", f"dataset={data}",
               "cutoff_len=128", f"padding_free={str(padding_free).lower()}") == 0
    assert shapes and all(rows == 1 or (real if padding_free else rows * longest) <= budget
                          for rows, longest, real in shapes)
    if padding_free:  # the budget counts real tokens: some batch holds more than rows x longest would allow
        assert any(rows * longest > budget for rows, longest, _ in shapes)
    assert len({rows for rows, _, _ in shapes}) > 1  # the row count follows the lengths
    steps = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]
    logged = [e for e in steps if e["event"] == "log" and "loss" in e]
    assert logged[-1]["step"] == len(shapes)  # one optimizer step per budget batch (no accumulation here)
    assert sum(rows for rows, _, _ in shapes) == len(examples)  # every row once
