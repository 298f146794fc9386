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
