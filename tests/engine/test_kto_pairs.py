"""KTO's mismatched (KL) pairs are LLaMA-Factory 0.9.5's: each row takes the completion of the row before it within
each batch of LLaMA-Factory's preprocessing map (``preprocessing_batch_size`` rows, within each of
``preprocessing_num_workers`` contiguous shards)."""

from __future__ import annotations

import pytest
from datasets import Dataset

from engine.train.preference import kl_partners


def llama_factory_partners(rows: int, batch_size: int, workers: int | None) -> list[int]:
    """What LLaMA-Factory's feedback processor computes, through the same `datasets` map it runs."""
    def rotate(batch):  # llamafactory/data/processor/feedback.py: kl_response = [last] + all but the last
        return {"kl": [batch["i"][-1]] + batch["i"][:-1]}

    dataset = Dataset.from_dict({"i": list(range(rows))})
    return dataset.map(rotate, batched=True, batch_size=batch_size, num_proc=workers)["kl"]


@pytest.mark.parametrize("rows, batch_size, workers", [
    (23, 5, None), (23, 5, 3), (10, 1000, 16), (7, 1000, 4), (2000, 1000, None), (2500, 1000, 2), (1, 1000, None),
])
def test_pairs_are_those_of_llama_factorys_preprocessing(rows, batch_size, workers):
    assert kl_partners(rows, batch_size, workers) == llama_factory_partners(rows, batch_size, workers)


def test_the_default_groups_are_llama_factorys_1000_rows():
    partners = kl_partners(1500)
    assert partners[0] == 999 and partners[1] == 0 and partners[1000] == 1499 and partners[1001] == 1000
