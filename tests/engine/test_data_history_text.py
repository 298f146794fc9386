"""An alpaca `history` cell that is not a list (a CSV holding "[]" or a list written as text) is ignored, as
LLaMA-Factory 0.9.5's converter ignores it (`isinstance(history, list)`): the row trains without history, where
the engine skipped every such row and refused the dataset ("no usable rows")."""

import json
import logging
from types import SimpleNamespace

from engine.data import load_examples


def _args(folder):
    return SimpleNamespace(dataset_dir=str(folder), max_samples=None, mix_strategy="concat", interleave_probs=None)


def test_history_written_as_text_is_ignored_as_llamafactory_does(tmp_path, caplog):
    (tmp_path / "rows.csv").write_text('instruction,output,history\nq1,a1,[]\nq2,a2,"[[\'h\', \'i\']]"\n',
                                       encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"csv_history": {"file_name": "rows.csv", "columns": {
        "prompt": "instruction", "response": "output", "history": "history"}}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="engine"):
        rows = list(load_examples(_args(tmp_path), "csv_history", "sft"))
    assert [row["messages"] for row in rows] == [
        [{"role": "user", "content": "q1"}, {"role": "assistant", "content": "a1"}],
        [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]]
    notes = [r.getMessage() for r in caplog.records if "history column 'history' holds text" in r.getMessage()]
    assert len(notes) == 1 and "as in LLaMA-Factory" in notes[0]


def test_a_rejected_rows_note_names_no_optional_column(tmp_path, caplog):
    """Rows without the optional system/tools/history/input columns are whole: their absence is not named as the
    likely cause of another problem (it was, for every rejected row of a dataset that maps them)."""
    rows = [{"instruction": "q", "output": 5}] + [{"instruction": "q", "output": "a"}] * 2
    (tmp_path / "rows.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "rows.json", "columns": {
        "prompt": "instruction", "query": "input", "response": "output", "system": "system", "tools": "tools",
        "history": "history"}}}), encoding="utf-8")
    with caplog.at_level(logging.WARNING, logger="engine"):
        assert len(load_examples(_args(tmp_path), "d", "sft")) == 2
    skipped = next(r.getMessage() for r in caplog.records if "skipped 1 of 3 rows" in r.getMessage())
    assert "does not end with an assistant reply" in skipped and "which the row does not have" not in skipped
