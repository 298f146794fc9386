"""The automation API under bad input and for resuming runs: clear, short, logged-once rejections; /resume_run."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import gradio as gr
import pytest
import torch
import yaml
from safetensors.torch import save_file

from app.api import Automation
from app.tabs.runs import resume_runs
from engine.runs import RunFolder

DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
pytestmark = pytest.mark.skipif(not (DEMO_DATA / "dataset_info.json").is_file(), reason="examples/data is missing")

CONFIG = f"""
model_name_or_path: demo
template: chatml
stage: sft
finetuning_type: lora
dataset: demo_identity
dataset_dir: {DEMO_DATA}
cutoff_len: 128
save_steps: 2
"""


def checkpoint(run_dir: Path, step: int, complete: bool = True) -> Path:
    ckpt = run_dir / f"checkpoint-{step}"
    ckpt.mkdir()
    (ckpt / "README.md").write_text("# adapter\n")
    if complete:
        (ckpt / "adapter_config.json").write_text("{}")
        save_file({"w": torch.zeros(4, 4)}, str(ckpt / "adapter_model.safetensors"))
        (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return ckpt


def finished_run(board, status: str = "aborted", steps: tuple[int, ...] = (2, 4), torn: int | None = 6) -> str:
    """A training run of the workspace that ended ``status`` with checkpoints (the last one torn)."""
    run_id = Automation(board).submit_run(CONFIG)
    assert board.jobs.wait(run_id, 30) == "completed"
    folder = RunFolder(board.jobs.runs_dir / run_id)
    folder.update(status=status, error="stopped by request" if status == "aborted" else None)
    for step in steps:
        checkpoint(folder.path, step)
    if torn:
        checkpoint(folder.path, torn, complete=False)
    return run_id


def rejected(call, *args) -> str:
    with pytest.raises(gr.Error) as err:
        call(*args)
    assert err.value.print_exception is False  # gradio prints no traceback for it
    message = err.value.message
    message.encode("utf-8")  # sendable: no lone surrogate reaches the client
    return message


# -- resume ----------------------------------------------------------------------------------------------------------
def test_resume_run_continues_from_the_latest_complete_checkpoint(board):
    old = finished_run(board)
    auto = Automation(board)
    new = auto.resume_run(old)
    assert new != old
    folder = RunFolder(board.jobs.runs_dir / new)
    cfg = yaml.safe_load(folder.config_path.read_text())
    assert cfg["resume_from_checkpoint"] == str(board.jobs.runs_dir / old / "checkpoint-4")  # not the torn -6
    assert cfg["output_dir"] == str(folder.path) and cfg["save_steps"] == 2 and cfg["dataset"] == "demo_identity"
    info = folder.info()
    assert info["resumed_from"] == old and info["resumed_checkpoint"].endswith("checkpoint-4")
    assert board.jobs.wait(new, 30) == "completed"
    assert RunFolder(board.jobs.runs_dir / old).status() == "aborted"  # the old run is left as it was


def test_submit_run_takes_a_run_id_as_resume_from_checkpoint(board):
    old = finished_run(board, status="failed")
    new = Automation(board).submit_run(CONFIG + f"resume_from_checkpoint: {old}\n")
    cfg = yaml.safe_load((board.jobs.runs_dir / new / "config.yaml").read_text())
    assert cfg["resume_from_checkpoint"] == str(board.jobs.runs_dir / old / "checkpoint-4")
    board.jobs.wait(new, 30)


def test_resume_from_checkpoint_true_is_refused_with_the_way_that_works(board):
    message = rejected(Automation(board).submit_run, CONFIG + "resume_from_checkpoint: true\n")
    assert "new folder" in message and "resume_from_checkpoint: <run id>" in message and "/resume_run" in message
    assert board.jobs.list() == []


def test_runs_that_cannot_be_resumed_say_why(board):
    auto = Automation(board)
    done = finished_run(board, status="completed")
    assert "only a failed or aborted run" in rejected(auto.resume_run, done)
    bare = finished_run(board, steps=(), torn=None)
    assert "saved no complete checkpoint" in rejected(auto.resume_run, bare)
    torn_only = finished_run(board, steps=(), torn=2)
    message = rejected(auto.resume_run, torn_only)
    assert "checkpoint-2: no trainer_state.json (it holds only README.md)" in message
    assert "no run" in rejected(auto.resume_run, "20200101-000000-train-0000")


def test_the_history_resume_button_handler(board):
    old = finished_run(board)
    done = finished_run(board, status="completed")
    message, new_ids = resume_runs(board, [old, done], "en")
    assert len(new_ids) == 1 and f"Run `{old}` continues as run `{new_ids[0]}`" in message
    assert "checkpoint-4" in message and "only a failed or aborted run" in message
    board.jobs.wait(new_ids[0], 30)


# -- raw errors --------------------------------------------------------------------------------------------------------
def test_a_rejected_call_is_logged_as_one_line(board, caplog):
    with caplog.at_level(logging.INFO):
        rejected(Automation(board).submit_run, "model_name_or_path: demo\nlearning_rat: 0.1\n")
    lines = [r for r in caplog.records if r.name == "app.api"]
    assert len(lines) == 1 and "/submit_run rejected" in lines[0].getMessage()
    assert "\n" not in lines[0].getMessage() and lines[0].exc_info is None


def test_a_megabyte_model_name_is_refused_briefly(board):
    message = rejected(Automation(board).submit_run, CONFIG.replace("model_name_or_path: demo",
                                                                    "model_name_or_path: " + "m" * 900_000))
    assert "900,000 characters" in message and len(message) < 600 and "Errno" not in message


def test_long_run_ids_are_refused_briefly(board):
    auto = Automation(board)
    for call in (auto.run_status, auto.abort_run, auto.resume_run):
        message = rejected(call, "r" * 100_000)
        assert "at most 128 characters" in message and len(message) < 300 and "Errno" not in message


def test_a_lone_surrogate_gets_a_clear_error(board):
    message = rejected(Automation(board).submit_run, CONFIG + "default_system: bad \ud800 text\n")
    assert "U+D800" in message and "line 10, column 21" in message
    message = rejected(Automation(board).run_status, "run-\udfff")
    assert "not a run id" in message


def test_huge_configs_are_refused_fast_and_short(board):
    auto = Automation(board)
    start = time.time()
    message = rejected(auto.submit_run, "".join(f"k{i}: 1\n" for i in range(120_000)))
    assert "1,208,890 characters" in message and len(message) < 300
    message = rejected(auto.submit_run, "".join(f"k{i}: 1\n" for i in range(50_000)))
    assert "50,001 lines" in message and len(message) < 300
    message = rejected(auto.submit_run, "x: " + "y" * 2_000_000)
    assert "2,000,003 characters" in message
    message = rejected(auto.submit_run, "".join(f"unknown_{i}: 1\n" for i in range(2000)))
    assert "2,000 keys" in message and len(message) < 300
    assert time.time() - start < 10
    message = rejected(auto.submit_run, CONFIG + "".join(f"unknown_{i}: 1\n" for i in range(300)))
    assert "more problems" in message and len(message) < 8100


def test_resume_refusals_come_in_the_pages_language(board):
    """History's Resume says why a run cannot be resumed in the page's language; the API keeps English."""
    import re

    han = re.compile(r"[\u4e00-\u9fff]")
    done = finished_run(board, status="completed")
    bare = finished_run(board, steps=(), torn=None)
    torn_only = finished_run(board, steps=(), torn=2)
    message, new_ids = resume_runs(board, [done, bare, torn_only], "zh")
    assert new_ids == []
    lines = message.split("\n\n")
    assert len(lines) == 3 and all(han.search(line) for line in lines)
    assert "已完成" in lines[0] and "only a failed" not in message and "saved no complete" not in message
    assert "checkpoint-2: no trainer_state.json" in lines[2]  # the engine's words on the folder stay as written
    english, _ = resume_runs(board, [done, bare], "en")
    assert "only a failed or aborted run" in english and "saved no complete checkpoint" in english
    assert not han.search(english)
    eval_run = Automation(board).submit_run(CONFIG, "eval")
    board.jobs.wait(eval_run, 30)
    RunFolder(board.jobs.runs_dir / eval_run).update(status="failed")
    zh, _ = resume_runs(board, [eval_run], "zh")
    assert "评估运行" in zh and "eval" not in zh.replace(eval_run, "")
    english = rejected(Automation(board).resume_run, eval_run)  # the API: English, with no "a eval run"
    assert "is not a training run (its kind: eval)" in english and " a eval" not in english


def test_resume_from_checkpoint_true_in_both_languages(board):
    from app.jobs import JobError
    from app.resume import resolve_resume_value

    with pytest.raises(JobError) as err:
        resolve_resume_value(board.jobs, True)
    assert "new folder" in str(err.value) and "resume_from_checkpoint: <run id>" in str(err.value)
    zh = err.value.text("zh")
    assert "新目录" in zh and "resume_from_checkpoint: <运行 ID>" in zh and "继续训练" in zh


def test_long_values_are_shortened_so_every_problem_of_a_message_shows(board, tmp_path):
    """Three paths of ~3,900 characters that do not exist: each problem quotes its value, and whole they filled the
    8,000-character message before its last problem (the dataset folder's) was reached."""
    from app import forms
    from app.engine_text import problems_text

    long_path = "/" + "/".join(["a" * 200] * 19)
    mapping = {"model_name_or_path": long_path + "/m", "adapter_name_or_path": long_path + "/x", "template": "chatml",
               "dataset": "demo_identity", "dataset_dir": str(tmp_path / "no-such-folder")}
    message = rejected(Automation(board).submit_run, yaml.safe_dump(mapping, width=10_000))
    assert "no-such-folder" in message and "(message cut)" not in message, message[-300:]
    assert "3,822 characters" in message and len(message) < 3000
    problems = forms.validate(forms.absolute_paths(mapping), "train").problems
    for lang in ("en", "zh"):
        shown = problems_text(lang, "-", problems)
        assert "no-such-folder" in shown and len(shown) < 3000
