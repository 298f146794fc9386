"""A run folder's config.yaml as a folder copied in from elsewhere (or damaged on disk) may hold it: an alias bomb,
a whole number past Python's 4,300 digits, bytes that are not UTF-8. History shows the run without its config's
cells, the config diff leaves it out, a resume says why it cannot read it, and the chat reuse check serves nothing
from it. Before, the bomb made History build a 5 GB model cell (minutes, then the memory), and the others stopped
History, the diff and Resume with a ValueError or UnicodeDecodeError."""

from __future__ import annotations

import pytest

from app import chat_workers, history
from app.config_compare import config_diff
from app.jobs import JobError
from app.resume import resume_mapping
from engine.runs import RunFolder
from tests.app.test_api_faults import finished_run

BOMB = "".join(f"x{i}: &b{i} [" + ", ".join([f"*b{i - 1}" if i else "y"] * 10) + "]\n" for i in range(9))
CONFIGS = {
    "bomb": (BOMB + "stage: sft\nmodel_name_or_path: *b8\n").encode(),
    "long_number": ("stage: sft\ncutoff_len: 1" + "0" * 5000 + "\n").encode(),
    "not_utf8": b"stage: sft\nmodel_name_or_path: caf\xe9\n",
    # past 2 MB: read whole at 0.2-0.5 MB a second (an 11 MB one held History for a minute)
    "too_large": b"stage: sft\nmodel_name_or_path: demo\nx: " + b"a" * 2_000_000 + b"\n",
}


@pytest.mark.parametrize("content", CONFIGS.values(), ids=CONFIGS.keys())
def test_history_diff_and_resume_pass_over_a_config_they_cannot_read(board, content):
    run_id = finished_run(board)
    folder = RunFolder(board.jobs.runs_dir / run_id)
    folder.config_path.write_bytes(content)
    history._CONFIGS.clear()
    [row] = history.summaries([folder.info()], board.jobs.runs_dir)
    assert row["id"] == run_id and row["model"] == "" and row["stage"] == ""
    assert config_diff({run_id: history.read_config(folder), "other": {"stage": "dpo"}}) == [
        ["stage", "", "dpo"]]
    with pytest.raises(JobError) as err:
        resume_mapping(board.jobs, run_id)
    assert err.value.key == "job_resume_config_unreadable"
    assert str(folder.config_path) in err.value.text("en")
    assert not chat_workers.serves(board, run_id, {})


def test_a_config_that_is_no_mapping_is_still_named_as_one(board):
    run_id = finished_run(board)
    RunFolder(board.jobs.runs_dir / run_id).config_path.write_text("- a\n- b\n")
    with pytest.raises(JobError) as err:
        resume_mapping(board.jobs, run_id)
    assert err.value.key == "job_resume_config_not_mapping"


def test_history_shows_a_list_of_datasets_and_leaves_out_a_structure(board):
    run_id = finished_run(board)
    folder = RunFolder(board.jobs.runs_dir / run_id)
    folder.config_path.write_text("stage: sft\nmodel_name_or_path: {a: 1}\ndataset: [one, two]\n")
    history._CONFIGS.clear()
    [row] = history.summaries([folder.info()], board.jobs.runs_dir)
    assert row["model"] == "" and row["dataset"] == "one, two"
