"""``openai`` rows whose tool calls give ``arguments`` as JSON objects, and whose ``tools`` column holds objects, train
LLaMA-Factory 0.9.5's tokens: its loader (``datasets``, one Arrow type per column for the whole file) gives every call
and tool the keys of all of them (nulls where missing) and turns a key's whole numbers into floats where another is
fractional (golden: tests/golden/lf_openai_typing.json.gz, recorded by tests/golden/generate_openai_typing.py)."""

from __future__ import annotations

import gzip
import json
import re

import pytest

from engine.config import build_config
from engine.data import get_dataset
from engine.data.errors import DatasetError
from engine.templates import get_template, tool_formats
from tests.golden.generate_openai_typing import JSON_PATH, write_data
from tests.golden.tokenizers import load

CASES = json.loads(gzip.decompress(JSON_PATH.read_bytes()))["cases"]


def _rows(data, keys, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = build_config({"stage": "sft", "dataset_dir": str(data), "cutoff_len": 1024, "preprocessing_num_workers": 1,
                        **keys})
    tokenizer = load("special")
    train = get_dataset(cfg, tokenizer, get_template(keys["template"], tokenizer)).train
    return [{"input_ids": list(ids), "labels": list(labels)} for ids, labels in zip(train["input_ids"], train["labels"])]


def _recorded_date(case: dict) -> str | None:
    """The date Llama 3's tool prompt wrote when the golden was recorded (LLaMA-Factory writes the day it runs)."""
    found = (re.search(r"Today Date: (\d{2} \w{3} \d{4})", row["text"]) for row in case["rows"])
    return next((match.group(1) for match in found if match), None)


@pytest.mark.parametrize("case", sorted(CASES))
def test_object_calls_and_tools_train_llama_factorys_tokens(case, tmp_path, monkeypatch):
    date = _recorded_date(CASES[case])
    if date:  # ours writes today's date too: the golden's day, or the test passed only on the day it was recorded
        monkeypatch.setattr(tool_formats, "today", lambda: date)
    got = _rows(write_data(tmp_path / "data"), CASES[case]["config"], monkeypatch)
    expected = [{"input_ids": row["input_ids"], "labels": row["labels"]} for row in CASES[case]["rows"]]
    assert len(got) == len(expected)
    for index, (mine, theirs) in enumerate(zip(got, expected)):
        assert mine == theirs, f"row {index}: LLaMA-Factory's text is {CASES[case]['rows'][index]['text']!r}"


def test_a_key_of_two_kinds_is_refused_as_llama_factory_fails(tmp_path, monkeypatch):
    """A key holding text in one call and a number in another gets no Arrow type; LLaMA-Factory's loader fails on
    the file, ours names the problem and the way out."""
    data = write_data(tmp_path / "data")
    rows = json.loads((data / "calls.json").read_text(encoding="utf-8"))
    rows[2]["messages"][2]["tool_calls"][0]["function"]["arguments"]["city"] = 7
    (data / "calls.json").write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(DatasetError, match="cannot be given one type for the whole file.*Give each key the same kind"):
        _rows(data, {"dataset": "calls", "template": "qwen"}, monkeypatch)
