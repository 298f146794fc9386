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
