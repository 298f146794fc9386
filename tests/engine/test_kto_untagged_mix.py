"""A set without a ``kto_tag`` column mixed with a KTO set under ``stage: kto`` gives LLaMA-Factory 0.9.5's rows
(tests/golden/lf_kto_untagged.json, from tests/golden/generate_kto_untagged.py): its rows are dropped, after lending
their replies to the KL pairs; alone, such a set is refused, naming the missing column (LLaMA-Factory: "Cannot find
valid samples"). Found by tests/golden/sweep_gaps.py (kto_en_demo with identity): here the whole mix was refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import build_config
from engine.data import DatasetError, get_dataset
from engine.templates import get_template
from tests.golden.generate_kto_untagged import JSON_PATH, write_data
from tests.golden.tokenizers import load

CASES = json.loads(Path(JSON_PATH).read_text(encoding="utf-8"))["cases"]


@pytest.fixture(scope="module")
def tokenizer():
    return load("special")


def _rows(part, cfg) -> list:
    from engine.train.preference import _with_kl_pairs

    d = _with_kl_pairs(part, cfg)
    return [[p + c, [-100] * len(p) + c, kp + kc, [-100] * len(kp) + kc, bool(tag)] for p, c, kp, kc, tag in
            zip(d["prompt_ids"], d["completion_ids"], d["KL_prompt_ids"], d["KL_completion_ids"], d["label"])]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_are_llama_factorys(case, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    data = write_data(tmp_path / "data")
    cfg = build_config({"stage": "kto", "template": "empty", "dataset_dir": str(data), "cutoff_len": 64,
                        "preprocessing_num_workers": 1, **CASES[case]["config"]})
    bundle = get_dataset(cfg, tokenizer, get_template("empty", tokenizer))
    expected = CASES[case]["rows"]
    assert _rows(bundle.train, cfg) == expected["train"]
    if "eval" in expected:
        assert _rows(bundle.eval, cfg) == expected["eval"]


def test_an_untagged_set_alone_is_refused(tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    data = write_data(tmp_path / "data")
    for keys in ({"dataset": "plain"}, {"dataset": "tagged", "eval_dataset": "plain", "do_eval": True}):
        cfg = build_config({"stage": "kto", "template": "empty", "dataset_dir": str(data), "cutoff_len": 64, **keys})
        with pytest.raises(DatasetError, match=r"dataset 'plain' has no kto_tag column"):
            get_dataset(cfg, tokenizer, get_template("empty", tokenizer))


def test_the_dataset_check_lets_the_mix_through(tmp_path):
    from engine.data.registry import check_datasets

    data = write_data(tmp_path / "data")
    assert check_datasets(data, "tagged,plain", "kto") == []
    assert check_datasets(data, "plain", "kto") == [
        "`dataset`: Stage kto needs a desirable/undesirable label per row, but dataset 'plain' has no kto_tag column. "
        "Map it in dataset_info.json (`columns: {\"kto_tag\": \"label\"}`, e.g. kto_en_demo) or use another stage."]
