"""Preference pairs never become sft rows: ranking datasets are refused for sft/pt/kto before conversion
(engine.data.loader.check_stage), so ``finalize`` has no pair-to-sft branch; a pair that reached it is a bad row."""
import pytest

from engine.data.converters import convert_alpaca, finalize
from engine.data.errors import DatasetError, RowError
from engine.data.loader import check_stage
from engine.data.registry import DatasetSpec


def _spec(tmp_path):
    return DatasetSpec(name="pairs", path=tmp_path / "p.json", ranking=True,
                       columns={"prompt": "instruction", "chosen": "chosen", "rejected": "rejected"})


def test_ranking_dataset_refused_for_single_answer_stages(tmp_path):
    for stage in ("sft", "pt", "kto"):
        with pytest.raises(DatasetError, match="preference pairs"):
            check_stage(_spec(tmp_path), stage)


def test_pair_is_not_turned_into_an_sft_row(tmp_path):
    example = convert_alpaca({"instruction": "hi", "chosen": "good", "rejected": "bad"}, _spec(tmp_path))
    assert finalize(dict(example), "dpo")["chosen"]["content"] == "good"
    with pytest.raises(RowError):
        finalize(dict(example), "sft")


def _entry_spec(tmp_path, columns):
    from engine.data.registry import entry_columns

    return DatasetSpec(name="replies", path=tmp_path / "r.json", columns={k: v for k, v in columns.items() if v},
                       lf_columns=entry_columns({"columns": columns}))


def test_columns_that_map_only_the_reply_train_it_after_an_empty_prompt_as_llamafactory(tmp_path):
    """`"columns": {"response": "output"}` maps neither prompt nor query: LLaMA-Factory's AlpacaDatasetConverter
    then writes an empty user turn and trains the reply; every row was refused as "the prompt column None is
    missing", so the dataset had no usable rows."""
    example = convert_alpaca({"instruction": "unread", "output": "the reply"}, _entry_spec(tmp_path,
                                                                                            {"response": "output"}))
    row = finalize(dict(example), "sft")
    assert [turn["content"] for turn in row["messages"]] == ["", "the reply"], row
    with pytest.raises(RowError, match="the query column 'nosuch' is missing"):  # a mapped column that is not there
        convert_alpaca({"output": "x"}, _entry_spec(tmp_path, {"query": "nosuch", "response": "output"}))
    with pytest.raises(RowError, match="the prompt column 'nosuch' is missing"):
        convert_alpaca({"output": "x"}, _entry_spec(tmp_path, {"prompt": "nosuch", "response": "output"}))
