"""A tokenized_path saved for another stage is a user error naming that stage (it was a KeyError traceback in the
trainer); one saved with another template or tokenizer loads with a warning naming both."""

import logging
from pathlib import Path

from engine.cli import EXIT_USER_ERROR, main

REPO = Path(__file__).resolve().parents[2]


def _data(saved: Path, *extra: str) -> int:
    return main(["data", str(REPO / "examples" / "sft_lora_demo.yaml"), f"dataset_dir={REPO / 'examples' / 'data'}",
                 "dataset=demo_identity", "max_samples=4", f"tokenized_path={saved}", *extra])


def test_tokenized_data_of_another_stage_or_template(tmp_path, capsys, caplog, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    saved = tmp_path / "tokenized"
    assert _data(saved) == 0
    assert (saved / "lf_tokenized.json").is_file()
    capsys.readouterr()
    assert _data(saved, "stage=dpo", "dataset=demo_dpo") == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"tokenized_path {saved} holds data tokenized for another stage (saved for `stage: sft`)" in err, err
    assert "lacks prompt_ids, chosen_ids, rejected_ids" in err and "overwrite_cache: true" in err
    with caplog.at_level(logging.WARNING, logger="engine"):
        assert _data(saved, "template=llama3") == 0
    notes = [r.getMessage() for r in caplog.records if "was tokenized with" in r.getMessage()]
    assert notes and "template `chatml` (now `llama3`)" in notes[0], notes


def test_a_tokenized_path_that_is_no_save_is_never_answered_with_delete_it(tmp_path):
    """`tokenized_path` naming the dataset folder itself (or /dev/null, or any folder of the user's) was answered
    "holds no saved dataset; delete it or set overwrite_cache: true": advice to delete the user's data, or to save
    over it. Only a damaged save (datasets' own dataset_dict.json or state.json in it) is still advised so."""
    import pytest

    from engine.data import DatasetError, _load_tokenized

    data = tmp_path / "data"
    data.mkdir()
    (data / "dataset_info.json").write_text('{"d": {"file_name": "d.json"}}')
    (data / "d.json").write_text("[]")
    for path in (data, Path("/dev/null")):
        with pytest.raises(DatasetError, match=r"is no folder of saved tokenized data .*set tokenized_path to a new "
                                               r"folder") as err:
            _load_tokenized(path)
        assert "delete" not in str(err.value)
    damaged = tmp_path / "saved"
    (damaged / "train").mkdir(parents=True)
    (damaged / "dataset_dict.json").write_text("{}")
    with pytest.raises(DatasetError, match="holds no saved dataset .*delete it or set overwrite_cache: true"):
        _load_tokenized(damaged)
