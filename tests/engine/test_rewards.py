"""GRPO/RLOO rewards: each built-in on hand-written completions, user reward files, and every bad input."""

from __future__ import annotations

import logging
import textwrap
from pathlib import Path

import pytest

from engine.config import build_config
from engine.rewards import (
    BUILTIN_REWARDS,
    RewardError,
    build_rewards,
    check_rewards,
    check_user_reward,
    load_user_reward,
    reward_weights,
)
from engine.rewards.guard import GuardedReward

USER_FILE = Path(__file__).resolve().parents[1] / "fixtures" / "rewards" / "user_rewards.py"


def settings(**values):
    return build_config({"stage": "grpo", **values}).finetuning


def score(name: str, completions: list[str], template=None, **columns) -> list:
    func = BUILTIN_REWARDS[name](settings(), template)
    return func(prompts=["p"] * len(completions), completions=completions, **columns)


def test_exact_match_compares_the_answer_part_normalised():
    completions = ["Paris", "<think>hmm</think><answer> paris. </answer>", "London", "It is Paris"]
    assert score("exact_match", completions, answer=["Paris"] * 4) == [1.0, 1.0, 0.0, 0.0]
    assert score("exact_match", ["x"], answer=[None]) == [None]


def test_numeric_match_takes_the_last_number():
    completions = ["7 times 3 is 21.", "<answer>1,000</answer>", "about 20", "no idea", "21.0000000001"]
    assert score("numeric_match", completions, answer=["21", "1000", "21", "21", "#### 21"]) == [1.0, 1.0, 0.0, 0.0, 1.0]
    assert score("numeric_match", ["5"], answer=["no number here"]) == [None]
    # a hyphen is not a minus sign, and a comma only separates thousands in groups of three (outside review)
    assert score("numeric_match", ["x = 2024-01-05", "3,4", "x=-5", "(-5)", "1,234,567 units", "1,2345"],
                 answer=["5", "4", "-5", "-5", "1234567", "2345"]) == [1.0] * 6


def test_json_scores_deeply_nested_brackets_zero_instead_of_failing():
    assert score("json", ["[" * 3000, "[1, 2]"]) == [0.0, 1.0]


def test_format_matches_think_then_answer_by_default():
    completions = ["<think>a\nb</think>\n<answer>42</answer>", "<answer>42</answer>", "<think>x</think>",
                   "  <think>a</think><answer>b</answer>  ", "<think>a</think><answer>b</answer> and more"]
    assert score("format", completions) == [1.0, 0.0, 0.0, 1.0, 0.0]
    custom = BUILTIN_REWARDS["format"](settings(reward_format=r"^\w+$"), None)
    assert custom(prompts=["p", "p"], completions=["word", "two words"]) == [1.0, 0.0]


def test_length_is_full_inside_the_range_and_falls_off_outside():
    func = BUILTIN_REWARDS["length"](settings(reward_min_tokens=4, reward_max_tokens=8), None)
    ids = [[1] * n for n in (0, 2, 4, 8, 16, 32)]
    assert func(prompts=["p"] * 6, completions=[""] * 6, completion_ids=ids) == [0.0, 0.5, 1.0, 1.0, 0.5, 0.25]


def test_json_accepts_objects_arrays_and_fenced_blocks():
    completions = ['{"a": 1}', "[1, 2]", '```json\n{"a": 1}\n```', "<answer>{\"b\": 2}</answer>", "{a: 1}", "42"]
    assert score("json", completions) == [1.0, 1.0, 1.0, 1.0, 0.0, 0.0]


def test_tool_call_uses_the_template_tool_format():
    from engine.templates import get_template

    qwen = get_template("qwen")
    tools = '[{"name": "get_weather", "description": "", "parameters": {"type": "object", "properties": {}}}]'
    good = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>'
    other = '<tool_call>\n{"name": "send_mail", "arguments": {}}\n</tool_call>'
    broken = '<tool_call>\n{"name": "get_weather", "arguments": \n</tool_call>'
    completions = [good, other, broken, "It is sunny."]
    assert score("tool_call", completions, qwen, tools=[tools] * 4) == [1.0, 0.5, 0.0, 0.0]
    # The default format (LLaMA-Factory's "Action: name / Action Input: {...}") and no declared tools.
    default = get_template("chatml")
    assert score("tool_call", ['Action: get_weather\nAction Input: {"city": "Paris"}', "Hi"], default,
                 tools=["", ""]) == [1.0, 0.0]


def test_user_reward_file_loads_and_gets_dataset_columns():
    func = load_user_reward(f"{USER_FILE}:mentions_answer")
    guarded = GuardedReward(func, "mentions_answer", "user")
    out = guarded(prompts=["p", "p"], completions=["It is Paris", "Rome"], answer=["paris", "paris"],
                  completion_ids=[[1], [2]], trainer_state=None)
    assert out == [1.0, 0.0]
    rewards = build_rewards(settings(reward_funcs=f"format, {USER_FILE}:has_digit"))
    assert [r.__name__ for r in rewards] == ["format", "has_digit"]
    assert rewards[1](prompts=["p"], completions=["a1"]) == [1.0]


@pytest.mark.parametrize(("function", "expected"), [
    ("nope", "defines no function `nope`"),
    ("wrong_signature", "needs a parameter `text` that is never passed"),
    ("asynchronous", "is `async def`"),
])
def test_user_reward_problems_are_found_without_importing(function, expected, tmp_path):
    problems = check_user_reward(f"{USER_FILE}:{function}")
    assert len(problems) == 1 and expected in problems[0]
    with pytest.raises(RewardError, match=expected.split("`")[0]):
        load_user_reward(f"{USER_FILE}:{function}")


def test_a_reward_file_is_only_read_by_the_checks(tmp_path):
    marker = tmp_path / "imported"
    path = tmp_path / "side_effect.py"
    path.write_text(f"open({str(marker)!r}, 'w').close()\ndef r(prompts, completions, **kw):\n    return [0.0]\n")
    assert check_user_reward(f"{path}:r") == [] and not marker.exists()
    load_user_reward(f"{path}:r")
    assert marker.exists()


def test_reward_files_that_do_not_exist_parse_or_import(tmp_path):
    assert "does not exist" in check_user_reward(f"{tmp_path}/missing.py:f")[0]
    assert "must look like" in check_user_reward("rewards.py")[0]
    broken = tmp_path / "broken.py"
    broken.write_text("def f(prompts, completions, **kwargs)\n    return []\n")
    assert "does not parse (line 1)" in check_user_reward(f"{broken}:f")[0]
    raising = tmp_path / "raising.py"
    raising.write_text(textwrap.dedent("""
        import os
        def f(prompts, completions, **kwargs):
            return [0.0] * len(completions)
        raise RuntimeError("no API key")
    """))
    assert check_user_reward(f"{raising}:f") == []  # reading cannot know; importing does
    with pytest.raises(RewardError, match=r"does not import: RuntimeError: no API key \(raising.py, line 5\)"):
        load_user_reward(f"{raising}:f")
    missing_module = tmp_path / "needs.py"
    missing_module.write_text("import not_a_module_here\ndef f(prompts, completions, **kw):\n    return []\n")
    with pytest.raises(RewardError, match="ModuleNotFoundError"):
        load_user_reward(f"{missing_module}:f")
    with pytest.raises(RewardError, match="is a int, not a function"):
        load_user_reward(f"{USER_FILE}:NOT_A_FUNCTION")


def test_wrong_return_length_or_type_is_a_clear_error():
    wrong = GuardedReward(load_user_reward(f"{USER_FILE}:wrong_length"), "wrong_length", "user.py:wrong_length")
    with pytest.raises(RewardError, match="returned 1 values for 3 completions"):
        wrong(prompts=["p"] * 3, completions=["a", "b", "c"])
    words = GuardedReward(load_user_reward(f"{USER_FILE}:not_numbers"), "not_numbers", "user.py:not_numbers")
    with pytest.raises(RewardError, match="returned 'good'"):
        words(prompts=["p"], completions=["a"])
    scalar = GuardedReward(lambda prompts, completions, **kw: 1.0, "scalar", "scalar")
    with pytest.raises(RewardError, match="returned a float"):
        scalar(prompts=["p"], completions=["a"])


def test_a_reward_raising_on_one_completion_scores_it_zero_counts_and_logs(caplog):
    logged = []
    guarded = GuardedReward(load_user_reward(f"{USER_FILE}:fails_on_x"), "fails_on_x", "user.py:fails_on_x")
    with caplog.at_level(logging.WARNING, logger="engine.rewards.guard"):
        out = guarded(prompts=["p"] * 3, completions=["ok", "x marks", "fine"], answer=["a", "b", "c"],
                      log_metric=lambda name, value: logged.append((name, value)))
    assert out == [1.0, 0.0, 1.0]
    assert guarded.errors == 1 and logged == [("rewards/fails_on_x/errors", 1.0)]
    assert "raised on 1 of 3 completions" in caplog.text and "ZeroDivisionError" in caplog.text


def test_a_reward_raising_on_every_completion_stops_with_its_line():
    guarded = GuardedReward(load_user_reward(f"{USER_FILE}:always_fails"), "always_fails", "user.py:always_fails")
    with pytest.raises(RewardError, match=r"raised on every completion: NameError.*user_rewards.py, line \d+"):
        guarded(prompts=["p", "p"], completions=["a", "b"])


def test_a_reward_failing_only_on_the_batch_keeps_the_single_scores(caplog):
    """It used to crash with an IndexError (no single completion had failed, and the warning read the first failure)."""

    def batch_limited(prompts, completions, **kw):
        if len(completions) > 1:
            raise RuntimeError("the judge takes one completion per call")
        return [float(len(completions[0]))]

    guarded = GuardedReward(batch_limited, "batch_limited", "user.py:batch_limited")
    with caplog.at_level(logging.WARNING, logger="engine.rewards.guard"):
        assert guarded(prompts=["p"] * 3, completions=["a", "bb", "ccc"]) == [1.0, 2.0, 3.0]
    assert guarded.errors == 0 and "raised on a batch of 3 but on none of its completions alone" in caplog.text


def test_an_infinite_reward_or_a_reward_that_exits_is_a_clear_error():
    """inf used to pass (a run 'completed' with mean reward inf and learned nothing); sys.exit(0) ended the CLI with
    exit code 0 and no message."""
    infinite = GuardedReward(lambda prompts, completions, **kw: [float("inf")] * len(completions), "inf", "user.py:inf")
    with pytest.raises(RewardError, match="returned inf for a completion; return finite numbers"):
        infinite(prompts=["p"], completions=["a"])
    assert GuardedReward(lambda prompts, completions, **kw: [float("nan")], "nan", "n")(
        prompts=["p"], completions=["a"]) == [None]  # NaN still means "does not apply"

    def exits(prompts, completions, **kw):
        raise SystemExit(0)

    with pytest.raises(RewardError, match=r"called sys.exit\(0\) \(test_rewards.py, line \d+\); a reward returns its scores"):
        GuardedReward(exits, "exits", "user.py:exits")(prompts=["p"], completions=["a"])


def test_os_exit_and_huge_rewards_are_refused_and_children_may_still_exit():
    """os._exit(0) in a reward had ended the run with nothing recorded (the board showed it completed); 1e20 made
    TRL's float32 group spread inf, so every advantage was 0 and the run silently learned nothing (outside review)."""
    import os

    def hard_exit(prompts, completions, **kw):
        os._exit(0)

    with pytest.raises(RewardError, match=r"called os._exit\(0\) \(test_rewards.py, line \d+\)"):
        GuardedReward(hard_exit, "hard_exit", "user.py:hard_exit")(prompts=["p"], completions=["a"])
    import threading

    def exits_in_a_thread(prompts, completions, **kw):  # the thread gets the exception; the process goes on
        worker = threading.Thread(target=os._exit, args=(0,))
        worker.start()
        worker.join(10)
        return [1.0] * len(completions)

    assert GuardedReward(exits_in_a_thread, "t", "user.py:t")(prompts=["p"], completions=["a"]) == [1.0]
    from posix import _exit as bound_before  # bound after the guard was installed: refused as well

    with pytest.raises(SystemExit, match="is refused while rewards run"):
        bound_before(0)
    huge = GuardedReward(lambda prompts, completions, **kw: [1e20] * len(completions), "huge", "user.py:huge")
    with pytest.raises(RewardError, match=r"returned 1e\+20 for a completion; rewards beyond \+-1e\+09"):
        huge(prompts=["p"], completions=["a"])

    def forks(prompts, completions, **kw):  # a child the reward starts exits through the real os._exit
        import multiprocessing

        process = multiprocessing.get_context("fork").Process(target=len, args=("x",))
        process.start()
        process.join(30)
        return [float(process.exitcode == 0)] * len(completions)

    assert GuardedReward(forks, "forks", "user.py:forks")(prompts=["p"], completions=["a"]) == [1.0]


def test_advice_after_a_whole_batch_failed_fits_who_and_when():
    calls = []

    def later(prompts, completions, **kw):
        calls.append(1)
        if len(calls) > 1:
            raise ValueError("broke")
        return [1.0] * len(completions)

    guarded = GuardedReward(later, "later", "user.py:later")
    guarded(prompts=["p"], completions=["a"])
    with pytest.raises(RewardError, match=r"then resume the run from its last checkpoint"):
        guarded(prompts=["p"], completions=["a"])
    built_in = GuardedReward(lambda prompts, completions, **kw: 1 / 0, "json", "json")
    with pytest.raises(RewardError, match="This built-in reward should never fail: please report it"):
        built_in(prompts=["p"], completions=["a"])


def test_two_rewards_of_one_name_and_an_imported_module_are_refused_unread(tmp_path):
    (tmp_path / "a.py").write_text("def reward(prompts, completions, **kw):\n    return [1.0] * len(completions)\n")
    (tmp_path / "b.py").write_text("def reward(prompts, completions, **kw):\n    return [0.0] * len(completions)\n")
    problems = check_rewards(settings(reward_funcs=f"{tmp_path}/a.py:reward, {tmp_path}/b.py:reward"))
    assert problems == ["Two rewards in `reward_funcs` are both called `reward`: their scores would be logged and "
                        "summed as one. Rename one of the functions."]
    side = tmp_path / "side.py"
    side.write_text(f"import os\nopen({str(tmp_path / 'ran')!r}, 'w').write('ran')\n")
    assert "is a module it imports, not a function" in check_user_reward(f"{side}:os")[0]
    assert not (tmp_path / "ran").exists()


def test_reward_names_and_weights_are_checked():
    problems = check_rewards(settings(reward_funcs="fromat, length, length", reward_weights="1, 2"))
    assert any("Unknown reward `fromat`" in p and "Did you mean `format`" in p for p in problems)
    assert any("names a reward twice" in p for p in problems)
    assert any("`reward_weights` has 2 values but there are 3" in p for p in problems)
    assert reward_weights(settings(reward_funcs="format, length", reward_weights=[1.0, 0.5]), 2) == [1.0, 0.5]
    assert "must be numbers" in check_rewards(settings(reward_funcs="format", reward_weights="a"))[0]
    assert "not a valid regular expression" in check_rewards(settings(reward_funcs="format", reward_format="("))[0]


def test_a_loss_of_exactly_zero_is_logged_as_zero_not_nan(caplog):
    """GRPO's loss is often exactly 0 (every completion of a group scored alike); the step line printed it as nan."""
    from types import SimpleNamespace

    from engine.train.callbacks import EventsCallback

    written = []
    callback = EventsCallback(SimpleNamespace(events=SimpleNamespace(write=written.append), metrics={}))
    state = SimpleNamespace(is_world_process_zero=True, global_step=1, max_steps=2, epoch=0.5, num_input_tokens_seen=0)
    with caplog.at_level(logging.INFO, logger="engine.train.callbacks"):
        callback.on_log(None, state, None, logs={"loss": 0.0, "learning_rate": 1e-5})
    assert written[-1]["loss"] == 0.0 and "step 1/2  loss 0.0000" in caplog.text and "nan" not in caplog.text


def test_a_stop_request_ends_a_reward_that_never_returns(tmp_path):
    """The board's Abort (SIGTERM) only set a flag inside the training loop, which a reward stuck in a call never
    reached: the run hung until killed and run.json stayed `running`. Now the stop interrupts the reward."""
    import json
    import os
    import signal
    import time

    from engine.errors import AbortRequested
    from engine.lifecycle import JobContext

    def stuck(prompts, completions, **kw):
        os.kill(os.getpid(), signal.SIGTERM)  # the board's Abort, while the reward runs
        time.sleep(30)
        return [1.0] * len(completions)

    started = time.monotonic()
    with pytest.raises(AbortRequested), JobContext(tmp_path / "run", "train") as ctx:
        ctx.in_loop = True
        GuardedReward(stuck, "stuck", "user.py:stuck")(prompts=["p"], completions=["a"])
    assert time.monotonic() - started < 10
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "aborted" and info["error"] == "stopped by request"


def test_a_completion_no_reward_applies_to_has_no_total():
    """It had shown a total reward of 0 where every reward returned None (TRL trains on 0 there, and warns)."""
    from engine.rewards.trial import format_table
    from engine.train.rl import weighted_total

    assert weighted_total([1.0, 0.5], [None, None]) is None
    assert weighted_total([1.0, 0.5], [None, 2.0]) == 1.0
    table = format_table({"rewards": ["r"], "rows": [{"reward": None, "rewards": {"r": None}, "completion": "x"}],
                          "mean": {"reward": float("nan")}})
    assert table.splitlines()[1].split() == ["-", "-", "x"]


def test_rl_sampling_takes_the_generation_keys_a_config_changed():
    from engine.train.rl import sampling_settings

    assert sampling_settings(build_config({"stage": "grpo"})) == {}
    changed = build_config({"stage": "grpo", "top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1})
    assert sampling_settings(changed) == {"top_p": 0.9, "top_k": 20, "repetition_penalty": 1.1}


def test_a_keyboard_interrupt_raised_by_a_reward_is_its_error_where_a_run_handles_ctrl_c(monkeypatch):
    """It had ended a run as `aborted` ("stopped by request"); a real Ctrl+C there arrives as AbortRequested."""
    import signal

    def interrupts(prompts, completions, **kw):
        raise KeyboardInterrupt

    guarded = GuardedReward(interrupts, "interrupts", "user.py:interrupts")
    monkeypatch.setattr(signal, "getsignal", lambda sig: (lambda *a: None))  # a run's own SIGINT handler
    with pytest.raises(RewardError, match="raised KeyboardInterrupt"):
        guarded(prompts=["p"], completions=["a"])
    monkeypatch.setattr(signal, "getsignal", lambda sig: signal.default_int_handler)  # Python's: the user's Ctrl+C
    with pytest.raises(KeyboardInterrupt):
        guarded(prompts=["p"], completions=["a"])


def test_the_guard_holds_at_import_for_huge_ints_and_for_weights(tmp_path):
    """Ways around the first fixes, found by a recheck: os._exit at the top of the reward file, an int too large for
    a float (a traceback), and 1e15 weights on allowed rewards (the same overflow)."""
    exits = tmp_path / "exits.py"
    exits.write_text("import os\nos._exit(0)\ndef f(prompts, completions, **kw):\n    return [1.0]\n")
    with pytest.raises(RewardError, match=r"does not import: ProcessExit: os._exit\(0\) is refused"):
        load_user_reward(f"{exits}:f")
    huge = GuardedReward(lambda prompts, completions, **kw: [10 ** 400], "h", "user.py:h")
    with pytest.raises(RewardError, match="returned an integer of 401 digits"):
        huge(prompts=["p"], completions=["a"])
    assert "weights beyond +-1e+06" in check_rewards(settings(reward_funcs="length", reward_weights="1e15"))[0]
    assert check_rewards(settings(reward_funcs="length", reward_weights="2.5")) == []
