"""GRPO and RLOO on a tiny model: built-in and user rewards, a reward model from an `rm` run, events and the
completions sample, PPO's refusal and the bad inputs that must stop a run with a clear message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import tinymodels

from engine.cli import main

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
USER_FILE = FIXTURES / "rewards" / "user_rewards.py"


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory) -> Path:
    return tinymodels.build_tiny_model(tmp_path_factory.mktemp("tiny-rl-model"), max_positions=512)


def base_args(model: Path, out: Path, stage: str = "grpo") -> list[str]:
    return [
        f"model_name_or_path={model}", "template=chatml", f"stage={stage}", "finetuning_type=lora",
        "dataset=alpaca_small", f"dataset_dir={FIXTURES / 'data'}", "cutoff_len=128", f"output_dir={out}",
        "num_generations=2", "max_completion_length=8", "per_device_train_batch_size=2",
        "gradient_accumulation_steps=1", "max_steps=2", "logging_steps=1", "save_strategy=no", "report_to=none",
        "learning_rate=1e-3", "plot_loss=false",
    ]


def write_config(folder: Path, args: list[str]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "config-in.yaml"
    path.write_text("".join(f"{a.split('=', 1)[0]}: '{a.split('=', 1)[1]}'\n" for a in args), encoding="utf-8")
    return str(path)


def run(model: Path, out: Path, *extra: str, stage: str = "grpo") -> int:
    return main(["train", write_config(out.parent / f"{out.name}-cfg", base_args(model, out, stage)), *extra])


def events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines() if x.strip()]


def test_grpo_two_steps_with_built_in_and_user_rewards(tiny_model, tmp_path):
    out = tmp_path / "grpo"
    code = run(tiny_model, out, f"reward_funcs=length,{USER_FILE}:has_digit", "reward_weights=1.0,0.5",
               "reward_max_tokens=4", "beta=0.04")
    assert code == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert [e["step"] for e in logs] == [1, 2]
    for key in ("reward", "reward_std", "rewards/length/mean", "rewards/length/std", "rewards/has_digit/mean",
                "kl", "completions/mean_length", "completions/clipped_ratio", "clip_ratio/region_mean"):
        assert all(key in e for e in logs), key
    assert all(0.0 <= e["rewards/length/mean"] <= 1.0 for e in logs)
    assert 0 < logs[-1]["completions/mean_length"] <= 8
    samples = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    assert {s["step"] for s in samples} == {1, 2} and len(samples) == 4
    first = samples[0]
    assert first["prompt"].startswith("<|im_start|>") and first["prompt"].endswith("<|im_start|>assistant\n")
    assert set(first["rewards"]) == {"length", "has_digit"}
    expected = first["rewards"]["length"] + 0.5 * first["rewards"]["has_digit"]
    assert first["reward"] == pytest.approx(expected, abs=1e-5)
    assert (out / "adapter_config.json").is_file()
    assert json.loads((out / "run.json").read_text())["status"] == "completed"
    closing = events(out)[-1]["metrics"]  # the closing note: mean reward at the start and at the end
    assert closing["reward_first"] == pytest.approx(logs[0]["reward"], abs=1e-4)
    assert closing["reward_last"] == pytest.approx(logs[1]["reward"], abs=1e-4)


@pytest.fixture(scope="module")
def reward_run(tiny_model, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("rm") / "rm"
    args = [f"model_name_or_path={tiny_model}", "template=chatml", "stage=rm", "finetuning_type=lora",
            "dataset=dpo_small", f"dataset_dir={FIXTURES / 'data'}", "cutoff_len=128", f"output_dir={out}",
            "max_steps=1", "per_device_train_batch_size=2", "gradient_accumulation_steps=1", "save_strategy=no",
            "report_to=none", "plot_loss=false"]
    code = main(["train", write_config(out.parent / "cfg", args)])
    assert code == 0 and (out / "adapter_config.json").is_file()
    return out


def test_rloo_two_steps_against_a_reward_model_from_an_rm_run(tiny_model, reward_run, tmp_path):
    out = tmp_path / "rloo"
    assert run(tiny_model, out, f"reward_model={reward_run}", "reward_funcs=length", stage="rloo") == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert [e["step"] for e in logs] == [1, 2]
    assert all("rewards/reward_model/mean" in e and "rewards/length/mean" in e and "kl" in e for e in logs)
    samples = [json.loads(x) for x in (out / "completions.jsonl").read_text().splitlines()]
    scores = [s["rewards"]["reward_model"] for s in samples]
    assert all(isinstance(v, float) for v in scores) and len(set(scores)) > 1  # the head really scores


def test_grpo_full_tuning_with_only_a_reward_model_and_rloo_with_a_user_reward(tiny_model, reward_run, tmp_path):
    out = tmp_path / "grpo-full"
    assert run(tiny_model, out, "finetuning_type=full", f"reward_model={reward_run}", "loss_type=grpo") == 0
    assert (out / "model.safetensors").is_file()
    assert [e["step"] for e in events(out) if e["event"] == "log"] == [1, 2]
    out = tmp_path / "rloo-user"
    assert run(tiny_model, out, f"reward_funcs={USER_FILE}:mentions_answer", stage="rloo") == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert all("rewards/mentions_answer/mean" in e for e in logs)


def test_ppo_is_refused_naming_grpo_rloo_and_reward_model(tiny_model, tmp_path, capsys):
    from engine.train.rl_checks import ppo_trainer_available

    assert not ppo_trainer_available()
    code = main(["train", write_config(tmp_path / "cfg", base_args(tiny_model, tmp_path / "ppo", "ppo")),
                 f"reward_model={tmp_path}", "ppo_epochs=4", "ppo_score_norm=true"])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "`stage: ppo`" in err and "stage: grpo" in err and "stage: rloo" in err and "reward_model" in err
    assert "Unknown key" not in err  # LLaMA-Factory's PPO keys are known: the refusal is the one message


@pytest.mark.parametrize(("extra", "expected"), [
    ([], "needs rewards: set `reward_funcs`"),
    (["reward_funcs=lenght"], "Did you mean `length`"),
    ([f"reward_funcs={FIXTURES}/rewards/missing.py:f"], "does not exist"),
    ([f"reward_funcs={USER_FILE}:nope"], "defines no function `nope`"),
    ([f"reward_funcs={USER_FILE}:wrong_signature"], "needs a parameter `text`"),
    (["reward_funcs=length", "num_generations=3"], "must hold whole groups: make it a multiple of 3"),
    (["reward_funcs=length", "reward_model=/nowhere/rm"], "`reward_model: /nowhere/rm` does not exist"),
    (["reward_funcs=length", "reward_weights=1,2"], "`reward_weights` has 2 values but there is 1 reward"),
    (["reward_funcs=length", "do_sample=false"], "`do_sample: false` would make the 2 completions of a prompt"),
    (["reward_funcs=length", "temperature=0"], "`temperature: 0` would make the 2 completions of a prompt"),
    (["reward_funcs=length", "max_new_tokens=3"], "caps its completions with `max_completion_length` (now 8)"),
    (["reward_funcs=length", "num_generations=0"], "`num_generations: 0` is below the minimum 2"),
])
def test_bad_rl_configs_stop_before_loading(tiny_model, tmp_path, capsys, extra, expected):
    assert run(tiny_model, tmp_path / "bad", *extra) == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    assert not (tmp_path / "bad" / "events.jsonl").exists()


def test_a_grpo_config_saved_with_the_earlier_max_new_tokens_default_still_runs(monkeypatch, capsys):
    repo = Path(__file__).resolve().parents[2]
    monkeypatch.chdir(repo)
    assert main(["check", str(repo / "examples" / "grpo_demo.yaml"), "max_new_tokens=512"]) == 0
    assert "is valid for `train`" in capsys.readouterr().out


def test_a_non_reward_model_is_refused(tiny_model, tmp_path, capsys):
    assert run(tiny_model, tmp_path / "bad", "reward_funcs=length", f"reward_model={tiny_model}") == 2
    err = capsys.readouterr().err
    assert "is a LlamaForCausalLM without a value head (value_head.safetensors" in err and "not a reward model" in err


@pytest.mark.parametrize(("function", "expected"), [
    ("wrong_length", "returned 1 values for 2 completions"),
    ("always_fails", "raised on every completion: NameError"),
])
def test_rewards_that_misbehave_while_training_fail_the_run_clearly(tiny_model, tmp_path, capsys, function, expected):
    out = tmp_path / "run"
    assert run(tiny_model, out, f"reward_funcs={USER_FILE}:{function}") == 2
    err = capsys.readouterr().err
    assert expected in err and "Traceback" not in err
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["status"] == "failed" and expected in run_info["error"]


def test_an_import_error_in_the_reward_file_fails_the_run_clearly(tiny_model, tmp_path, capsys):
    bad = tmp_path / "bad_reward.py"
    bad.write_text("import json\njson.loads('{')\ndef f(prompts, completions, **kwargs):\n    return []\n")
    assert run(tiny_model, tmp_path / "run", f"reward_funcs={bad}:f") == 2
    err = capsys.readouterr().err
    assert "does not import: JSONDecodeError" in err and "bad_reward.py, line 2" in err


def test_a_reward_raising_on_some_completions_is_counted_and_training_goes_on(tiny_model, tmp_path, caplog):
    flaky = tmp_path / "flaky.py"
    flaky.write_text("calls = []\ndef f(prompts, completions, **kwargs):\n    calls.append(1)\n"
                     "    if len(completions) > 1 or len(calls) % 2:\n        raise ValueError('boom')\n"
                     "    return [1.0]\n")
    out = tmp_path / "run"
    assert run(tiny_model, out, f"reward_funcs={flaky}:f") == 0
    logs = [e for e in events(out) if e["event"] == "log"]
    assert all(e.get("rewards/f/errors") == 1.0 for e in logs)
    assert "raised on 1 of 2 completions (scored 0.0" in caplog.text and "ValueError: boom" in caplog.text


def test_rewards_command_scores_sampled_completions_without_training(tiny_model, tmp_path, capsys):
    out = tmp_path / "try.json"
    config = write_config(tmp_path / "cfg", base_args(tiny_model, tmp_path / "run"))
    code = main(["rewards", config, f"reward_funcs=length,{USER_FILE}:has_digit", "reward_weights=1,2",
                 "--prompts", "2", "--samples", "3", "--out", str(out)])
    assert code == 0
    result = json.loads(out.read_text())
    assert result["rewards"] == ["length", "has_digit"] and len(result["rows"]) == 6
    row = result["rows"][0]
    assert row["prompt"].endswith("<|im_start|>assistant\n") and row["answer"] == "Hello!"
    assert 0 < row["tokens"] <= 8
    assert row["reward"] == pytest.approx(row["rewards"]["length"] + 2 * row["rewards"]["has_digit"], abs=1e-5)
    printed = capsys.readouterr().out
    assert "reward  length  has_digit  completion" in printed and "mean: length" in printed
    assert not (tmp_path / "run").exists()  # nothing trained, no run folder


@pytest.mark.parametrize(("flag", "value", "words"), [
    ("--prompts", "0", "--prompts 0: give at least 1 dataset prompt"),  # was taken as 1 without a word
    ("--prompts", "-1", "--prompts -1: give at least 1 dataset prompt"),
    ("--samples", "100000", "--samples 100000: give at most 64 completions per prompt"),  # one batch of 100,000 copies
])
def test_rewards_command_refuses_counts_it_cannot_honour_before_loading(flag, value, words, tmp_path, capsys):
    code = main(["rewards", str(tmp_path / "never-read.yaml"), flag, value])
    assert code == 2 and words in capsys.readouterr().err


def test_a_secret_in_a_reward_error_is_masked_everywhere(tiny_model, tmp_path, capsys, monkeypatch):
    """A reward raising with $HF_TOKEN in its message had written the token into run.json and events.jsonl (the
    warning line was masked, the fatal path was not). Found by an outside review."""
    token = "hf_FAKE_SECRET_0123456789"
    monkeypatch.setenv("HF_TOKEN", token)
    leaky = tmp_path / "leaky.py"
    leaky.write_text("import os\ndef leaky(prompts, completions, **kwargs):\n"
                     "    print('token is', os.environ['HF_TOKEN'])\n"
                     "    raise RuntimeError('auth failed with ' + os.environ['HF_TOKEN'])\n")
    out = tmp_path / "run"
    assert run(tiny_model, out, f"reward_funcs={leaky}:leaky") == 2
    captured = capsys.readouterr()
    assert "auth failed with ***" in captured.err and token not in captured.err + captured.out
    for name in ("run.json", "events.jsonl"):
        text = (out / name).read_text()
        assert token not in text and "auth failed with ***" in text, name


def test_a_new_run_over_an_rl_run_replaces_its_samples_and_keeps_its_reward_code(tiny_model, tmp_path):
    """overwrite_output_dir had appended the new run's samples to the old completions.jsonl; the run folder now
    keeps a copy of each user reward file as the run used it."""
    out = tmp_path / "run"
    reward = tmp_path / "mine.py"
    reward.write_text("def mine(prompts, completions, **kwargs):\n    return [1.0 * len(c) for c in completions]\n")
    assert run(tiny_model, out, f"reward_funcs={reward}:mine") == 0
    assert {json.loads(x)["step"] for x in (out / "completions.jsonl").read_text().splitlines()} == {1, 2}
    kept = list((out / "reward_code").iterdir())
    assert len(kept) == 1 and kept[0].name.startswith("mine-") and kept[0].read_text() == reward.read_text()
    reward.write_text(reward.read_text().replace("1.0 *", "2.0 *"))
    assert run(tiny_model, out, f"reward_funcs={reward}:mine", "max_steps=1", "overwrite_output_dir=true") == 0
    assert {json.loads(x)["step"] for x in (out / "completions.jsonl").read_text().splitlines()} == {1}
    kept = list((out / "reward_code").iterdir())
    assert len(kept) == 1 and "2.0 *" in kept[0].read_text()  # this run's code only
