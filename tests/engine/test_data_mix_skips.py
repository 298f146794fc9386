"""Interleaved datasets with unusable rows train LLaMA-Factory 0.9.5's rows in its order: it mixes every row and
drops the unusable ones afterwards, so a skipped row still takes its draw (golden: tests/golden/lf_mix_skips.json,
recorded by tests/golden/generate_mix_skips.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.data import load_examples
from tests.golden.generate_mix_skips import JSON_PATH, write_data

CASES = json.loads(JSON_PATH.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_interleaved_rows_with_skips_are_llama_factorys(case, tmp_path):
    config = CASES[case]["config"]
    data = write_data(Path(tmp_path) / "data")
    args = SimpleNamespace(dataset_dir=str(data), max_samples=None, mix_strategy=config["mix_strategy"],
                           interleave_probs=config.get("interleave_probs"))
    examples = load_examples(args, config["dataset"], "sft", seed=config.get("seed", 42))
    tags = [re.search(r"q ([cps][0-9]+)", example["messages"][0]["content"]).group(1) for example in examples]
    assert tags == CASES[case]["rows"]
