"""Nested texts of JSON lines that are all ISO dates are read as LLaMA-Factory 0.9.5's loader reads them (pyarrow
makes every field of the file whose values are all ISO dates timestamps, top-level or nested): a turn, history item
or preference answer that is one stops LLaMA-Factory's run, so the dataset is refused here, naming the field and
the way out; tool calls or tools holding one likewise. A field that also holds other text, one that is not read,
and the same rows as a JSON list train as LLaMA-Factory trains them (golden: tests/golden/lf_nested_dates.json,
recorded by tests/golden/generate_nested_dates.py)."""

from __future__ import annotations

import json
from datetime import datetime

import pytest

from engine.config import build_config
from engine.data import get_dataset
from engine.data.errors import DatasetError
from engine.data.rows import iter_rows
from engine.templates import get_template
from tests.golden.generate_nested_dates import JSON_PATH, write_data
from tests.golden.tokenizers import load

CASES = json.loads(JSON_PATH.read_text(encoding="utf-8"))["cases"]

REFUSED = {  # what our refusal names: the field, and the way out
    "turns": r"row 0: the 'value' of turn 0 \('human'\) holds a date, not text",
    "turns_pt": r"row 0: the 'value' of turn 0 \('human'\) holds a date, not text",
    "history": r"row 1: history pair 0's prompt \(column 'history'\) holds a date, not text",
    "pairs": r"row 0: the 'value' of the chosen turn holds a date, not text",
    "calls": r"row 0: turn 1's tool_calls hold a date, which LLaMA-Factory cannot write as JSON",
    "tools": r"row 0: the tools of column 'tools' hold a date, which LLaMA-Factory cannot write as JSON",
}
WAY_OUT = r".*pyarrow.*nested ones too.*save the file as a JSON list"


def _rows(data, keys, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = build_config({"dataset_dir": str(data), "cutoff_len": 1024, "preprocessing_num_workers": 1,
                        "template": "qwen", **keys})
    tokenizer = load("special")
    train = get_dataset(cfg, tokenizer, get_template("qwen", tokenizer)).train
    if keys["stage"] == "rm":
        return [{"chosen_input_ids": list(c), "rejected_input_ids": list(r)}
                for c, r in zip(train["chosen_ids"], train["rejected_ids"])]
    return [{"input_ids": list(ids), "labels": list(labels)} for ids, labels in zip(train["input_ids"], train["labels"])]


@pytest.mark.parametrize("case", sorted(CASES))
def test_nested_dates_train_what_llama_factory_trains(case, tmp_path, monkeypatch):
    data = write_data(tmp_path / "data")
    if case in REFUSED:  # LLaMA-Factory's run stops; here the dataset is refused, saying where and why
        assert "error" in CASES[case] and "Error" in CASES[case]["error"]
        with pytest.raises(DatasetError, match=REFUSED[case] + WAY_OUT):
            _rows(data, CASES[case]["config"], monkeypatch)
        return
    assert _rows(data, CASES[case]["config"], monkeypatch) == CASES[case]["rows"]


def test_a_nested_field_of_iso_dates_holds_dates_in_json_lines_only(tmp_path):
    data = write_data(tmp_path / "data")
    turns = [row["conversations"] for row in iter_rows(data / "turns.jsonl")]
    assert [turn["value"] for turn in turns[1]] == [datetime(2024, 3, 1), datetime(2024, 2, 6, 10, 30),
                                                    datetime(2024, 2, 7)]
    assert all(isinstance(turn["value"], str) for row in iter_rows(data / "turns.json") for turn in row["conversations"])
    half = [turn["value"] for row in iter_rows(data / "half_turns.jsonl") for turn in row["conversations"]]
    assert half == ["2024-01-05", "In winter.", "Be brief.", "2024-02-06 10:30:00", "Later."]  # one field: text
    (meta,) = iter_rows(data / "meta.jsonl")
    assert meta["meta"] == {"created": datetime(2024, 1, 5)} and meta["tags"] == [datetime(2024, 1, 5),
                                                                                   datetime(2024, 2, 6)]
    history = [row["history"] for row in iter_rows(data / "history.jsonl")]
    assert history == [[], [[datetime(2024, 1, 5), datetime(2024, 1, 6, 8)]]]


def test_a_row_without_date_text_keeps_a_nested_field_text(tmp_path):
    lines = tmp_path / "late.jsonl"  # the dates come first; a later row with no date text at all types the field
    rows = [{"c": [{"v": "2024-01-05"}], "n": 1}, {"c": [{"v": None}], "n": 2}, {"c": [{"v": "plain"}], "n": 3}]
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    assert list(iter_rows(lines)) == rows
    lines.write_text("".join(json.dumps(row) + "\n" for row in rows[:2]), encoding="utf-8")  # a null keeps it dates
    assert [row["c"][0]["v"] for row in iter_rows(lines)] == [datetime(2024, 1, 5), None]
