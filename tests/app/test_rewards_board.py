"""The board's GRPO/RLOO parts with a fake engine: "try it", writing a reward in the code box, live reward, KL and
length charts with the recent completions, and History's reward curves."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from app import reward_view
from app.context import Board
from app.jobs import JobManager
from app.tabs import rewards
from app.tabs.runs import overlay_frame

FAKE_RL_ENGINE = Path(__file__).with_name("fake_rl_engine.py")
DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"


@pytest.fixture()
def rl_board(workspace):
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_RL_ENGINE)], kill_grace=1.0, poll_interval=0.05)
    jobs.start()
    yield Board(workspace=workspace, jobs=jobs)
    jobs.shutdown()


def grpo_mapping(**extra):
    return {"model_name_or_path": "demo", "template": "chatml", "stage": "grpo", "dataset": "demo_alpaca",
            "dataset_dir": str(DEMO_DATA), "reward_funcs": "format, length", **extra}


def test_try_it_scores_in_a_child_process_and_shows_a_table(rl_board):
    message, frame = rewards.try_it(rl_board, grpo_mapping(), "en")
    assert "Scored 6 sampled completions" in message and "format 0.500" in message
    assert list(frame.columns) == ["reward", "format", "length", "tokens", "completion", "answer"]
    assert len(frame) == 6 and set(frame["format"]) == {0.0, 1.0}
    assert not list((rl_board.workspace.root / ".scratch").glob("rewards-*.yaml"))  # scratch files cleaned up


@pytest.mark.parametrize("lang", ["en", "zh"])
def test_try_it_keeps_a_reward_named_errors_apart_from_the_error_count(rl_board, monkeypatch, lang):
    """A reward function named `errors` kept its mean, and the count of completions a function raised on is its
    own sentence (it had replaced that mean, in English on the Chinese page too)."""
    result = {"rows": [{}] * 4, "mean": {"errors": 0.5, "format": 1.0}, "errors": {"errors": 0, "format": 2}}
    monkeypatch.setattr(reward_view, "run_try", lambda *args, **kwargs: result)
    message, _ = rewards.try_it(rl_board, grpo_mapping(), lang)
    assert "errors 0.500, format 1.000" in message
    assert ("function and count: format 2" if lang == "en" else "函数与次数：format 2") in message


def test_try_it_runs_where_the_board_runs_jobs(workspace, tmp_path):
    """Relative reward paths: "try it" had run in the repository while training runs in the board's directory."""
    here = tmp_path / "cwd"
    here.mkdir()
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_RL_ENGINE)], poll_interval=0.05, cwd=here)
    result = reward_view.run_try(Board(workspace=workspace, jobs=jobs), grpo_mapping())
    assert result["cwd"] == str(here) == jobs.cwd


def test_stop_ends_a_hanging_try_it_and_what_its_reward_started(rl_board, tmp_path):
    import threading


    pid_file = tmp_path / "hang.pid"
    done: dict = {}
    mapping = grpo_mapping(reward_funcs="hang.py:f", hang_pid_file=str(pid_file))
    worker = threading.Thread(target=lambda: done.update(result=rewards.try_it(rl_board, mapping, "en", "tab-1")))
    worker.start()
    deadline = time.time() + 60
    while not pid_file.is_file() or not pid_file.read_text():
        assert time.time() < deadline and worker.is_alive()
        time.sleep(0.05)
    scorer = rl_board.scorers["tab-1"]
    assert not reward_view.stop_try(rl_board, "another-tab")  # only the session's own scoring stops
    assert reward_view.stop_try(rl_board, "tab-1")
    worker.join(30)
    assert done["result"] == ("Stopped; nothing was scored.", None)
    assert scorer.poll() is not None and "tab-1" not in rl_board.scorers
    assert _ended(int(pid_file.read_text()))  # it ignored SIGTERM: SIGKILL ended it
    assert not list((rl_board.workspace.root / ".scratch").glob("rewards-*"))  # scratch files cleaned up
    assert not reward_view.stop_try(rl_board, "tab-1")  # nothing left to stop


def _ended(pid: int) -> bool:
    import psutil

    deadline = time.time() + 60
    while psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
        if time.time() > deadline:
            return False
        time.sleep(0.05)
    return True


def test_a_program_a_reward_left_running_ends_with_the_scoring(rl_board, tmp_path):
    pid_file = tmp_path / "bg.pid"
    message, frame = rewards.try_it(rl_board, grpo_mapping(reward_funcs="background.py:f, format",
                                                           hang_pid_file=str(pid_file)), "en")
    assert "Scored 6 sampled completions" in message
    assert _ended(int(pid_file.read_text()))


def test_a_stop_that_comes_before_the_scorer_started_ends_it_when_it_starts(rl_board, tmp_path):
    mapping = grpo_mapping(reward_funcs="hang.py:f", hang_pid_file=str(tmp_path / "hang.pid"))
    assert not reward_view.stop_try(rl_board, "tab-2", before_start=True)  # Stop clicked as "try it" begins
    started = time.time()
    assert rewards.try_it(rl_board, mapping, "zh", "tab-2") == ("已停止，未评分。", None)
    assert time.time() - started < 60 and "tab-2" not in rl_board.scorers
    reward_view.stop_try(rl_board, "tab-3", before_start=True)
    reward_view.forget_stop(rl_board, "tab-3")  # a new "try it" begins: the earlier Stop no longer counts
    assert rl_board.scorers == {}


def test_try_it_reports_the_engine_error_and_refuses_other_stages(rl_board):
    message, frame = rewards.try_it(rl_board, grpo_mapping(reward_funcs="broken.py:f"), "en")
    assert frame is None and "Scoring failed" in message and "does not import: SyntaxError" in message
    message, frame = rewards.try_it(rl_board, grpo_mapping(stage="sft"), "en")
    assert frame is None and "grpo or rloo" in message
    message, frame = rewards.try_it(rl_board, grpo_mapping(dataset=None), "en")
    assert frame is None


def test_the_code_box_writes_a_reward_file_without_importing_it(rl_board, tmp_path):
    marker = tmp_path / "ran"
    code = (f"open({str(marker)!r}, 'w').close()\n\n"
            "def short(prompts, completions, **kwargs):\n    return [float(len(c) < 20) for c in completions]\n")
    message, funcs = rewards.save_code(rl_board, code, "format, length", "en")
    path = rl_board.workspace.root / "rewards" / "short.py"
    assert funcs == f"format, length, {path}:short" and "Saved" in message
    assert path.read_text() == code and not marker.exists()  # written and read as text, never run
    # Saving again replaces the entry instead of adding a second one.
    assert rewards.save_code(rl_board, code, funcs, "en")[1] == funcs
    message, funcs = rewards.save_code(rl_board, "def bad(text):\n    return []\n", "format", "en")
    assert funcs is None and "needs a parameter `text`" in message
    message, funcs = rewards.save_code(rl_board, "def broken(:\n", "format", "en")
    assert funcs is None and "line 1" in message


def test_builtin_picker_and_reward_funcs_text_stay_in_step():
    names = ["exact_match", "numeric_match", "format", "length", "json", "tool_call"]
    assert reward_view.with_builtins("length, r.py:f", ["format", "length"], names) == "format, length, r.py:f"
    assert reward_view.with_builtins("length, r.py:f", [], names) == "r.py:f"
    assert rewards.chosen_builtins("json, r.py:f, format") == ["format", "json"]


def wait_done(board: Board, run_id: str) -> None:
    deadline = time.time() + 30
    while time.time() < deadline and board.jobs.monitor(run_id).status not in ("completed", "failed"):
        time.sleep(0.05)
    assert board.jobs.monitor(run_id).status == "completed"


def test_live_charts_and_completions_of_a_watched_rl_run(rl_board):
    run_id = rl_board.jobs.submit("train", grpo_mapping())
    wait_done(rl_board, run_id)
    box, *plots, table, seen = rewards.live_update(rl_board, run_id, None, "en")
    assert seen == [run_id, -1, "en"] and plots == [None, None, None]  # first tick clears the charts
    box, reward, kl, length, table, seen = rewards.live_update(rl_board, run_id, seen, "en")
    assert box["visible"] is True
    assert set(reward["series"]) == {"total (weighted)", "format", "length"}
    total = reward[reward["series"] == "total (weighted)"]["reward"].tolist()
    assert total == sorted(total) and len(total) == 4  # the fake run's reward rises
    assert kl["kl"].tolist() == pytest.approx([0.01, 0.02, 0.03, 0.04])
    assert length["tokens"].tolist() == [19.0, 18.0, 17.0, 16.0]
    assert table["step"].tolist()[0] == 4 and list(table.columns)[:2] == ["step", "reward"]
    assert "format" in table.columns and table["completion"].tolist()[0] == "c4-1"
    assert rewards.live_update(rl_board, run_id, seen, "en") == (rewards.gr.skip(),) * 6  # unchanged: no redraw


def test_the_live_view_shows_a_completions_file_from_elsewhere_without_failing(rl_board):
    """A run folder copied from elsewhere may hold completions.jsonl lines the engine never writes: `rewards` that
    are a list, text or a number stopped every tick of the watched run's view with AttributeError/TypeError; values
    that are no numbers are left empty, and thousands of reward names make no more than MAX_REWARD_COLUMNS columns."""
    run_id = rl_board.jobs.submit("train", grpo_mapping())
    wait_done(rl_board, run_id)
    lines = [{"step": 9, "rewards": [1, 2], "reward": 1.0, "completion": "list"},
             {"step": 10, "rewards": "abc", "completion": "text"}, {"step": 11, "rewards": 5},
             {"step": "x", "reward": {"a": 1}, "rewards": {f"f{i}": "high" for i in range(5000)}}]
    with open(rl_board.jobs.runs_dir / run_id / "completions.jsonl", "a", encoding="utf-8") as fh:
        fh.write("".join(json.dumps(line) + "\n" for line in lines))
    reward_view._FOLLOWERS.clear()
    seen = rewards.live_update(rl_board, run_id, None, "en")[-1]
    table = rewards.live_update(rl_board, run_id, seen, "en")[4]
    assert len(table.columns) <= reward_view.MAX_REWARD_COLUMNS + 4
    newest = table.iloc[0]
    assert newest["step"] is None or newest["step"] != newest["step"]  # empty (None or NaN)
    assert table["completion"].tolist()[1:4] == ["", "text", "list"]


def test_the_live_view_stays_hidden_for_other_runs(rl_board):
    run_id = rl_board.jobs.submit("train", grpo_mapping(stage="sft", reward_funcs=None))
    wait_done(rl_board, run_id)
    # an SFT run logs no reward: the RL charts stay hidden
    (rl_board.jobs.runs_dir / run_id / "events.jsonl").write_text('{"event": "start", "stage": "sft"}\n')
    reward_view._FOLLOWERS.clear()
    box, *_ = rewards.live_update(rl_board, run_id, None, "en")
    assert box["visible"] is False
    assert rewards.live_update(rl_board, None, None, "en")[0]["visible"] is False


def test_history_compares_rl_runs_by_reward_curves(rl_board):
    first = rl_board.jobs.submit("train", grpo_mapping(fake_steps=3))
    second = rl_board.jobs.submit("train", grpo_mapping(fake_steps=5, reward_funcs="format"))
    wait_done(rl_board, first)
    wait_done(rl_board, second)
    frame = reward_view.reward_overlay(rl_board, [first, second])
    assert set(frame["run"]) == {first, second}
    assert frame[frame["run"] == second]["reward"].tolist() == pytest.approx([0.2, 0.4, 0.6, 0.8, 1.0])
    assert len(overlay_frame(rl_board, [first, second])) == 8  # their loss curves as before


def test_a_reward_function_named_like_a_column_keeps_both_values():
    """`reward_funcs: r.py:reward` (or `step`, `tokens`...) is a valid reward; its column took the place of the table's
    own: the completions table showed the function's score as the step and as the total reward."""
    frame = reward_view.completions_frame([{"step": 3, "reward": 0.5, "completion": "c", "prompt": "p",
                                            "rewards": {"reward": 1.0, "step": 2.0, "format": 0.0}}])
    assert list(frame.columns) == ["step", "reward", "reward()", "step()", "format", "completion", "prompt"]
    assert frame.iloc[0][["step", "reward", "reward()", "step()"]].tolist() == [3, 0.5, 1.0, 2.0]
    tried = reward_view.try_frame({"rewards": ["reward", "tokens"], "rows": [
        {"reward": 0.5, "rewards": {"reward": 1.0, "tokens": 2.0}, "tokens": 7, "completion": "c", "answer": "a"}]})
    assert list(tried.columns) == ["reward", "reward()", "tokens()", "tokens", "completion", "answer"]
    assert tried.iloc[0][["reward", "reward()", "tokens()", "tokens"]].tolist() == [0.5, 1.0, 2.0, 7]
