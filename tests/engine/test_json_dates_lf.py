"""A ``.json`` list's columns named like dates (``date``, ``created_at``, ``modified``...) are read as LLaMA-Factory
0.9.5's loader reads them (pandas' ``read_json``): a column whose values all parse as dates holds dates, not text, so
a reply or system prompt taken from it trains nothing (LLaMA-Factory stops), and one with a value that does not parse
stays text (golden: tests/golden/lf_json_dates.json, recorded by tests/golden/generate_json_dates.py)."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from engine.config import build_config
from engine.data import get_dataset
from engine.data.errors import DatasetError
from engine.data.json_dates import is_date_name
from engine.data.rows import iter_rows
from engine.templates import get_template
from tests.golden.generate_json_dates import JSON_PATH, LINES, ROWS, write_data
from tests.golden.tokenizers import load

CASES = json.loads(JSON_PATH.read_text(encoding="utf-8"))["cases"]


def _rows(data, keys, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = build_config({"stage": "sft", "dataset_dir": str(data), "cutoff_len": 1024, "preprocessing_num_workers": 1,
                        "template": "qwen", **keys})
    tokenizer = load("special")
    train = get_dataset(cfg, tokenizer, get_template("qwen", tokenizer)).train
    return [{"input_ids": list(ids), "labels": list(labels)} for ids, labels in zip(train["input_ids"], train["labels"])]


NOTE = "is a datetime, not text .*read_json.*pyarrow.*rename such a column"


@pytest.mark.parametrize("case", sorted(CASES))
def test_date_named_columns_train_what_llama_factory_trains(case, tmp_path, monkeypatch, caplog):
    data = write_data(tmp_path / "data")
    if case == "system_from_dates":  # LLaMA-Factory stops on its first row; here the dated rows are skipped, as a
        assert "TypeError" in CASES[case]["error"]  # number where text belongs is, with the reason and the way out
        assert len(_rows(data, CASES[case]["config"], monkeypatch)) == 1  # the row whose created_at is null
        assert re.search("skipped 2 of 3 rows .*the system column " + NOTE, caplog.text)
        return
    if "error" in CASES[case]:  # LLaMA-Factory finds no valid row; nor does this, and it says why
        assert "Cannot find valid samples" in CASES[case]["error"]
        column = "when" if case.startswith("lines") else "created_at"
        with pytest.raises(DatasetError, match=f"no usable rows .*column '{column}' " + NOTE):
            _rows(data, CASES[case]["config"], monkeypatch)
        return
    got = _rows(data, CASES[case]["config"], monkeypatch)
    expected = [{"input_ids": row["input_ids"], "labels": row["labels"]} for row in CASES[case]["rows"]]
    assert got == expected


def test_only_a_date_named_column_whose_values_all_parse_is_read_as_dates(tmp_path):
    rows = list(iter_rows(write_data(tmp_path / "data") / "dated.json"))
    assert [row["created_at"] for row in rows] == [datetime(2024, 1, 5), datetime(2024, 2, 6, 10, 30), None]
    assert [row["date"] for row in rows] == [row["date"] for row in ROWS]  # "soon" keeps the column text
    assert [row["modified"] for row in rows] == [row["modified"] for row in ROWS]  # two formats: text
    lines = tmp_path / "dated.jsonl"  # a .jsonl list is read as the .json list; numbers past 1971 are epoch seconds
    lines.write_text(json.dumps([{"Timestamp_x": 1700000000, "a": "2024-01-05"}, {"Timestamp_x": None, "a": "x"}]))
    assert list(iter_rows(lines)) == [{"Timestamp_x": datetime(2023, 11, 14, 22, 13, 20), "a": "2024-01-05"},
                                      {"Timestamp_x": None, "a": "x"}]


def test_json_lines_read_a_column_of_iso_dates_as_dates_whatever_its_name(tmp_path):
    rows = list(iter_rows(write_data(tmp_path / "data") / "dated_lines.jsonl"))
    assert [row["when"] for row in rows] == [datetime(2024, 1, 5), None, datetime(2024, 3, 1, 10)]
    assert [row["output"] for row in rows] == [row["output"] for row in LINES]  # "fine" keeps the column text
    odd = tmp_path / "odd.jsonl"  # texts pyarrow's ISO-8601 parser refuses stay text
    odd.write_text("".join(json.dumps({"a": value}) + "\n" for value in ("2024-01-05T10:00:00.123", "2024-1-5")))
    assert [row["a"] for row in iter_rows(odd)] == ["2024-01-05T10:00:00.123", "2024-1-5"]


def test_pandas_name_rule():
    assert all(map(is_date_name, ("date", "Date", "DATETIME", "modified", "timestamp", "timestampz", "created_at",
                                  "x_AT", "update_time")))
    assert not any(map(is_date_name, ("dates", "at", "time", "updated", "my_date", "created-at", "_times", 5, None)))
