"""What a newcomer hit: a pasteable Train command, the preview after registering, run pickers without chat loads."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from app.tabs import train

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_the_train_command_works_when_pasted(board, tmp_path):
    from tests.app.test_handlers import TRAIN_KEYS, train_values

    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    command, text, pending = train.preview_command(board, mapping, "", "en")
    assert not (board.jobs.runs_dir / pending).exists()  # the folder does not exist yet: the command must not need it
    # paste it into a shell (checking instead of training, with the engine of this checkout)
    pasted = command.replace("lf-engine train", f"{sys.executable} -m engine check", 1)
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    result = subprocess.run(["bash", "-c", pasted], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.startswith("OK: the config from standard input is valid for `train`")


def test_a_config_containing_the_marker_still_pastes():
    command = train.pasteable_command("train", "a: LF_CONFIG\n")
    assert command.startswith("lf-engine train - <<'LF_CONFIG_'\n") and command.endswith("\nLF_CONFIG_")


def make_eval_run(board, status="running"):
    """A predict run folder as the engine leaves it, without a process (the monitor only reads files)."""
    from engine.runs import EventWriter, RunFolder

    folder = RunFolder(board.jobs.runs_dir / "20261203-000000-predict-test")
    folder.create("predict", "model_name_or_path: demo\n")
    folder.update(status=status, started_at=1.0)
    events = EventWriter(folder.events_path)
    events.write({"event": "progress", "stage": "eval", "done": 1, "total": 1, "fraction": 1.0})
    events.write({"event": "eval", "eval_loss": 2.0, "perplexity": 7.39})
    events.write({"event": "progress", "stage": "predict", "done": 4, "total": 4, "fraction": 1.0})
    events.write({"event": "end", "status": "completed", "error": None, "metrics": {"eval_loss": 2.0}})
    (folder.path / "generated_predictions.jsonl").write_text('{"prompt": "p", "label": "l", "predict": "x"}\n')
    return folder


def test_a_run_that_turns_final_after_its_last_event_is_still_shown_final(board):
    """The engine writes its end event, then run.json: a tick in between must not make the next one skip."""
    from app import progress_view

    folder = make_eval_run(board, status="running")
    first = progress_view.watch(board, folder.id, None, "en")
    second = progress_view.watch(board, folder.id, first["seen"], "en")
    assert second["final"] is False  # run.json still says running, though every event is written
    folder.update(status="completed", finished_at=2.0)
    third = progress_view.watch(board, folder.id, second["seen"], "en")
    assert third is not None and third["final"] and third["changed"]  # the tab fills its tables now


def test_eval_only_progress_card_is_sensible(board):
    from app import progress_view

    folder = make_eval_run(board, status="completed")
    card = progress_view.status_card(board, folder.id, "en")
    assert "step 0" not in card and "/?" not in card and "epoch" not in card
    assert "stage: done · 4/4" in card and "predicting" not in card  # completed: no longer "predicting"
    assert "阶段：完成" in progress_view.status_card(board, folder.id, "zh")


def test_evaluate_tables_have_translated_headers(board):
    from app.tabs import evaluate

    folder = make_eval_run(board, status="completed")
    rows = evaluate.read_predictions(folder.path)
    assert list(evaluate.frame(rows, evaluate.PREDICTION_COLUMNS, "zh").columns) == ["提示", "参考答案", "预测"]
    assert list(evaluate.frame([], evaluate.METRIC_COLUMNS, "en").columns) == ["metric", "value"]


def test_history_hides_ended_chat_loads(board):
    import time

    from app import chat_workers
    from app.tabs import chat, runs

    run_id = board.jobs.new_run_id("chat")
    board.jobs.submit("chat", {"model_name_or_path": "demo", "fake_steps": 4000, "fake_sleep": 0.05}, run_id=run_id,
                      args=["--port", "0"], env=chat_workers.worker_env(board, run_id))
    train_id = board.jobs.submit("train", {"model_name_or_path": "demo"})
    deadline = time.time() + 60
    while board.jobs.folder(run_id).status() != "running":
        assert time.time() < deadline
        time.sleep(0.05)
    assert {run_id, train_id} <= set(runs.table_frame(board, "en")[1])  # a live chat server is listed
    chat.unload(board, {})
    assert board.jobs.wait(run_id, 60) == "aborted"
    ids = runs.table_frame(board, "en")[1]
    assert run_id not in ids and train_id in ids


def test_eval_only_metrics_drop_training_counters():
    from engine.train.callbacks import without_training_fields

    metrics = {"eval_loss": 1.0, "epoch": 0, "num_input_tokens_seen": 0, "eval_model_preparation_time": 0.01}
    assert without_training_fields(metrics) == {"eval_loss": 1.0}


def test_aborting_a_job_that_is_not_training_says_what_happens(board):
    from app.tabs import train

    run_id = board.jobs.submit("chat", {"model_name_or_path": "demo", "fake_steps": 4000, "fake_sleep": 0.05},
                               args=["--port", "0"])
    import time

    deadline = time.time() + 60
    while board.jobs.folder(run_id).status() != "running":
        assert time.time() < deadline
        time.sleep(0.05)
    message = train.abort_run(board, run_id, "en")
    assert "checkpoint" in message and "nothing to save" in message and "it saves a checkpoint" not in message
    assert board.jobs.wait(run_id, 60) == "aborted"


def test_wandb_without_a_key_is_refused_even_when_the_board_has_a_terminal(monkeypatch, tmp_path):
    """The board's runs start in the background, where wandb cannot ask for a key: a board started from a terminal
    must still refuse `report_to: wandb` with no key before the run starts, naming the fixes."""
    import importlib.util

    import pytest

    from app import forms
    from engine import tracker_credentials

    if importlib.util.find_spec("wandb") is None:
        pytest.skip("wandb is not installed")
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "NETRC", "WANDB_CONFIG_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(tracker_credentials, "_stdin_is_terminal", lambda: True)
    mapping = {"model_name_or_path": "demo", "template": "chatml", "dataset": "demo_identity",
               "dataset_dir": str(Path(__file__).resolve().parents[2] / "examples" / "data"), "report_to": "wandb"}
    checked = forms.validate(mapping, "train")
    assert any("needs a W&B API key" in p and "WANDB_MODE=offline" in p for p in checked.problems), checked.problems
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)
    assert not forms.validate(mapping, "train").problems
