"""CSV rows as LLaMA-Factory gets them from ``datasets`` (pandas' read_csv): missing-value strings are None, columns
of numbers are numbers, and an alpaca reply that is not text leaves the row without one."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engine.data import DatasetError, load_examples
from engine.data import rows as rows_module
from engine.data.rows import iter_rows

# pandas' default na_values (pandas._libs.parsers.STR_NA_VALUES, the same in pandas 2.3 and 3.1)
NA_STRINGS = ["", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>", "N/A",
              "NA", "NULL", "NaN", "None", "n/a", "nan", "null"]


def _args(folder):
    return SimpleNamespace(dataset_dir=str(folder), max_samples=None, mix_strategy="concat", interleave_probs=None)


def test_pandas_missing_value_strings_are_none(tmp_path):
    from pandas._libs.parsers import STR_NA_VALUES

    assert sorted(NA_STRINGS) == sorted(STR_NA_VALUES)
    path = tmp_path / "na.csv"
    path.write_text("word,answer\n" + "".join(f"{na},x\n" for na in NA_STRINGS) + "N/a,kept\nnone,kept\n",
                    encoding="utf-8")
    assert [row["word"] for row in iter_rows(path)] == [None] * len(NA_STRINGS) + ["N/a", "none"]


def test_columns_are_typed_as_pandas_types_them(tmp_path):
    path = tmp_path / "types.csv"
    path.write_text("i,f,gap,flag,text,mixed\n1,1.5,4,True,x,1\n2,2,,false,y,a\n", encoding="utf-8")
    rows = list(iter_rows(path))
    assert rows == [{"i": 1, "f": 1.5, "gap": 4.0, "flag": True, "text": "x", "mixed": "1"},
                    {"i": 2, "f": 2.0, "gap": None, "flag": False, "text": "y", "mixed": "a"}]
    assert [type(row["i"]) for row in rows] == [int, int] and type(rows[0]["gap"]) is float
    (tmp_path / "big.csv").write_text("n\n99999999999999999999\n", encoding="utf-8")
    assert list(iter_rows(tmp_path / "big.csv")) == [{"n": "99999999999999999999"}]  # past 64 bits: text


def test_later_chunks_take_the_first_chunks_types(tmp_path, monkeypatch):
    monkeypatch.setattr(rows_module, "CSV_CHUNK_ROWS", 2)
    path = tmp_path / "chunks.csv"
    path.write_text("q,a\nq0,x\nq1,y\nq2,3\nq3,4\n", encoding="utf-8")
    assert [row["a"] for row in iter_rows(path)] == ["x", "y", "3", "4"]  # the later ints are cast to text
    path.write_text("q,a\nq0,1\nq1,2\nq2,\nq3,4\n", encoding="utf-8")
    assert [row["a"] for row in iter_rows(path)] == [1, 2, None, 4]
    path.write_text("q,a\nq0,1\nq1,2\nq2,x\nq3,4\n", encoding="utf-8")
    with pytest.raises(DatasetError, match=r"column 'a' \(\w*string from row 3 on, int64 before\).*fails on this "
                                           r"file too"):
        list(iter_rows(path))


def test_rows_equal_datasets_csv_builder(tmp_path):
    datasets = pytest.importorskip("datasets")
    files = {
        "na.csv": "instruction,input,output\nGive it.,,N/A\nSum.,None,Nothing.\nNA?,NA,Not available.\n"
                  'Echo null.,,null\n"Multi\nline",,"a, b"\n',
        "num.csv": "instruction,input,output\nWhat is 2+2?,,4\nWhat is 3+3?,,6\n",
        "mixed.csv": "a,b,c,d,e,f\n1,1.5,True,x,,01\n2,,False,NA,,+3\n,3,true,y,,1e3\n",
        "odd.csv": "a,a,b\n1,2\n\n3,4,5\n",
        "inf.csv": "a,b\ninf,-inf\nInfinity,nan\n",
    }
    for name, text in files.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
        theirs = datasets.load_dataset("csv", data_files=[str(tmp_path / name)], split="train",
                                       cache_dir=str(tmp_path / "cache")).to_list()
        assert json.dumps(list(iter_rows(tmp_path / name))) == json.dumps(theirs), name


def test_alpaca_rows_without_a_text_reply_are_skipped_as_in_llama_factory(tmp_path):
    (tmp_path / "na.csv").write_text("instruction,input,output\nAbbreviate not applicable.,,N/A\n"
                                     "Summarize.,None,Nothing to summarize.\nEcho null.,,null\nAsk?,context,answer\n",
                                     encoding="utf-8")
    (tmp_path / "num.csv").write_text("instruction,input,output\nWhat is 2+2?,,4\nWhat is 3+3?,,6.5\n",
                                      encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"na": {"file_name": "na.csv"},
                                                            "num": {"file_name": "num.csv"}}), encoding="utf-8")
    examples = load_examples(_args(tmp_path), "na", "sft")
    assert [e["messages"] for e in examples] == [
        [{"role": "user", "content": "Summarize."}, {"role": "assistant", "content": "Nothing to summarize."}],
        [{"role": "user", "content": "Ask?\ncontext"}, {"role": "assistant", "content": "answer"}],
    ]
    with pytest.raises(DatasetError, match="'num' has no usable rows for stage sft"):
        load_examples(_args(tmp_path), "num", "sft")
    assert [e["text"] for e in load_examples(_args(tmp_path), "num", "pt")] == ["What is 2+2?", "What is 3+3?"]
