"""dataset_info.json entries LLaMA-Factory 0.9.5 takes: unknown keys in `columns`/`tags`, and `ranking: 0`/`1`.

- Unknown keys inside ``columns`` and ``tags`` are never read there: ``DatasetAttr.join`` looks up only its own
  names (data/parser.py:80-90). Ours ignores them too, with a warning naming the key and the nearest known one.
- ``ranking`` is read by its truth value where rows are converted (data/converter.py:109,190), but the stage check
  tests ``ranking is True``/``is False`` (data/loader.py:178), so a number passes it for every stage. ``1`` with rm/dpo
  and ``0`` with sft are read as true and false; pt takes only the prompts of whatever rows it gets; KTO rows with a
  true/false kto_tag are KTO rows before ``ranking`` is looked at. ``1`` with sft and ``0`` with rm/dpo make
  LLaMA-Factory drop every row and fail ("Cannot find valid samples"): refused here with the reason and the fix.

The expected rows were produced by LLaMA-Factory 0.9.5 itself (``tests/golden/compare_rows.py``'s LLaMA-Factory
side, with the committed ``family`` qwen3 test tokenizer saved to a folder) on the rows of :func:`_dataset`, kept as
digests of the rows' ids as compare_rows lists them.
"""

from __future__ import annotations

import json
import logging

import pytest
from golden.stage_rows import digest, qwen3_rows

from engine.config import build_config
from engine.data.errors import DatasetError
from engine.data.registry import check_datasets

ALPACA = [{"instruction": "Hi", "input": "", "output": "Hello there."},
          {"instruction": "What is two plus two?", "input": "Briefly.", "output": "Four."}]
PAIRS = [{"instruction": "Hi", "input": "", "chosen": "Hello there.", "rejected": "Go away."},
         {"instruction": "What is two plus two?", "input": "", "chosen": "Four.", "rejected": "Five."}]
KTO = [{"instruction": "Hi", "input": "", "output": "Hello there.", "kto_tag": True},
       {"instruction": "What is two plus two?", "input": "", "output": "Five.", "kto_tag": False}]
TURNS = [{"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello."},
                       {"role": "user", "content": "Bye"}],
          "chosen": {"role": "assistant", "content": "Bye."}, "rejected": {"role": "assistant", "content": "No."}}]
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}
PAIR_COLUMNS = {"prompt": "instruction", "query": "input", "chosen": "chosen", "rejected": "rejected"}
KTO_COLUMNS = {"prompt": "instruction", "query": "input", "response": "output", "kto_tag": "kto_tag"}
TURN_COLUMNS = {"messages": "messages", "chosen": "chosen", "rejected": "rejected"}


def _dataset(folder) -> str:
    info = {
        "plain": {"file_name": "alpaca.json"},
        "odd_columns": {"file_name": "alpaca.json", "columns": {"prompt": "instruction", "query": "input",
                                                                 "response": "output", "promt": "instruction",
                                                                 "role_tag": "from", "notes": 3}},
        "turns": {"file_name": "turns.json", "formatting": "sharegpt", "ranking": True, "tags": TAGS,
                  "columns": TURN_COLUMNS},
        "odd_tags": {"file_name": "turns.json", "formatting": "sharegpt", "ranking": True, "columns": TURN_COLUMNS,
                     "tags": {**TAGS, "asistant_tag": "gpt", "comment": None}},
        "pairs_true": {"file_name": "pairs.json", "ranking": True, "columns": PAIR_COLUMNS},
        "pairs_one": {"file_name": "pairs.json", "ranking": 1, "columns": PAIR_COLUMNS},
        "alpaca_zero": {"file_name": "alpaca.json", "ranking": 0},
        "kto_one": {"file_name": "kto.json", "ranking": 1, "columns": KTO_COLUMNS},
        "turns_one": {"file_name": "turns.json", "formatting": "sharegpt", "ranking": 1, "tags": TAGS,
                      "columns": TURN_COLUMNS},
    }
    for name, rows in (("alpaca", ALPACA), ("pairs", PAIRS), ("kto", KTO), ("turns", TURNS)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return str(folder)


# (stage, dataset, cutoff_len, more config) -> LLaMA-Factory 0.9.5's rows (digests)
CASES = {
    "sft-odd_columns": ("sft", "odd_columns", 1024, {}),
    "dpo-odd_tags": ("dpo", "odd_tags", 1024, {}),
    "dpo-pairs_one": ("dpo", "pairs_one", 1024, {}),
    "rm-pairs_one": ("rm", "pairs_one", 1024, {}),
    "sft-alpaca_zero": ("sft", "alpaca_zero", 1024, {}),
    "kto-kto_one": ("kto", "kto_one", 1024, {}),
    "pt-turns_one": ("pt", "turns_one", 8, {"packing": False}),
    "pt-pairs_one": ("pt", "pairs_one", 8, {"packing": False}),
}
LF_ROWS: dict[str, list[str]] = {
    "dpo-odd_tags": ["3f957a2c2fa97e5d"],
    "dpo-pairs_one": ["551b6dec1b2bc61c", "3b5f262712f2d411"],
    "kto-kto_one": ["efadbf9a34abaf69", "a53dba04df2b4ca3"],
    "pt-pairs_one": ["07215b5a344e93ca", "8eadc74679448e8c"],
    "pt-turns_one": ["07215b5a344e93ca"],  # pt reads the prompt only, of pairs as of anything else
    "rm-pairs_one": ["551b6dec1b2bc61c", "3b5f262712f2d411"],
    "sft-alpaca_zero": ["f4e7697fa052c20d", "36ae968454641ef2"],
    "sft-odd_columns": ["f4e7697fa052c20d", "36ae968454641ef2"],
}


def _rows(folder, stage, dataset, cutoff=1024, more=None) -> list:
    cfg = build_config({"model_name_or_path": "unused", "dataset_dir": folder, "dataset": dataset, "stage": stage,
                        "template": "qwen3", "cutoff_len": cutoff, **(more or {})})
    return qwen3_rows(cfg)[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_are_llamafactorys(tmp_path, case):
    stage, dataset, cutoff, more = CASES[case]
    assert [digest(row) for row in _rows(_dataset(tmp_path), stage, dataset, cutoff, more)] == LF_ROWS[case]


def test_unknown_columns_and_tags_keys_are_ignored_with_the_nearest_key_named(tmp_path, caplog, monkeypatch):
    from engine.data import entry_keys

    monkeypatch.setattr(entry_keys, "_WARNED", set())  # each warning is given once per process
    folder = _dataset(tmp_path)
    with caplog.at_level(logging.WARNING, logger="engine.data.registry"):
        odd = _rows(folder, "sft", "odd_columns")
        odd_tags = _rows(folder, "dpo", "odd_tags")
    assert odd == _rows(folder, "sft", "plain") and odd_tags == _rows(folder, "dpo", "turns")
    for line in ("`columns.promt` is not a columns key, so it is ignored (as in LLaMA-Factory); the nearest columns "
                 "key is `prompt`", "`columns.role_tag` is not a columns key, so it is ignored (as in LLaMA-Factory); "
                 "`role_tag` belongs under `tags`", "`tags.asistant_tag` is not a tags key, so it is ignored (as in "
                 "LLaMA-Factory); the nearest tags key is `assistant_tag`", "`columns.notes`", "`tags.comment`"):
        assert line in caplog.text


def test_ranking_as_a_number_reads_as_its_truth_value(tmp_path):
    folder = _dataset(tmp_path)
    assert _rows(folder, "dpo", "pairs_one") == _rows(folder, "dpo", "pairs_true")
    assert _rows(folder, "sft", "alpaca_zero") == _rows(folder, "sft", "plain")


@pytest.mark.parametrize(("stage", "dataset", "words"), [
    ("sft", "pairs_one", ("`ranking: 1`, which reads as true", "stage sft cannot use it", "Cannot find valid samples",
                          "write `ranking: false`")),
    ("dpo", "alpaca_zero", ("Stage dpo needs preference pairs", "`ranking: 0` reads as false",
                            "Cannot find valid samples", "Use a ranking dataset")),
])
def test_ranking_as_a_number_the_stage_cannot_read_is_refused(tmp_path, stage, dataset, words):
    folder = _dataset(tmp_path)
    problems = check_datasets(folder, dataset, stage)
    assert len(problems) == 1 and all(word in problems[0] for word in words), problems
    with pytest.raises(DatasetError) as info:
        _rows(folder, stage, dataset)
    assert all(word in str(info.value) for word in words)


def test_other_ranking_values_are_still_refused(tmp_path):
    (tmp_path / "alpaca.json").write_text(json.dumps(ALPACA), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"two": {"file_name": "alpaca.json", "ranking": 2}}),
                                                encoding="utf-8")
    with pytest.raises(DatasetError, match=r"`ranking` must be true or false \(without quotes\), not 2"):
        _rows(str(tmp_path), "sft", "two")
