"""Odd values found by a round of outside-checker attacks on `lf-engine check`: each refused once, in words."""

import logging

import pytest

from engine.config import ConfigError, build_config

BASE = {"model_name_or_path": "demo", "dataset": "demo_identity", "dataset_dir": "examples/data"}


@pytest.mark.parametrize(("given", "alone"), [("tensorboard,none", "none"), ("all,tensorboard", "all")])
def test_none_or_all_among_other_trackers_is_refused(given, alone):
    """transformers takes `none` and `all` only alone: `report_to: [tensorboard, none]` passed the check and the
    run failed as the trainer started ("none is not supported"), after the model had loaded."""
    from engine.preflight import _check_trackers

    problems = _check_trackers(build_config({**BASE, "report_to": given}), interactive=False)
    assert f"`report_to: {given}` lists `{alone}` with other trackers; `{alone}` stands alone" in problems[0]
    assert not any("stands alone" in p for p in _check_trackers(build_config({**BASE, "report_to": alone}),
                                                                interactive=False))


def test_an_empty_list_for_a_list_key_is_empty():
    """`lora_target=[]` passed as an empty text (the list joined), where `lora_target=` is refused."""
    for given in ([], None):
        with pytest.raises(ConfigError, match="`lora_target` cannot be empty; give a value."):
            build_config({**BASE, "lora_target": given})


def test_an_empty_value_is_refused_in_words_not_python_type_names():
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, "learning_rate": None, "template": None, "cutoff_len": None})
    assert "`learning_rate` cannot be empty; give a number." in str(info.value)
    assert "`cutoff_len` cannot be empty; give a whole number." in str(info.value)
    assert "give a float" not in str(info.value) and "give a int" not in str(info.value)


def test_a_cutoff_refused_by_its_bound_is_not_also_said_to_be_kept(caplog):
    """`cutoff_len: 0` was refused ("below the minimum 1") and warned about as kept, both."""
    with caplog.at_level(logging.WARNING, logger="engine.config.cross_checks"), pytest.raises(ConfigError):
        build_config({**BASE, "cutoff_len": 0})
    assert "keeps at most" not in caplog.text


@pytest.mark.parametrize(("values", "words"), [
    ({"lr_scheduler_type": "reduce_lr_on_plateau"}, "needs `eval_strategy: steps` or `epoch`"),
    ({"lr_scheduler_type": "cosine_with_min_lr"}, "needs its floor in `lr_scheduler_kwargs`"),
    ({"lr_scheduler_type": "warmup_stable_decay"}, "needs the length of its decay in `lr_scheduler_kwargs`"),
    ({"load_best_model_at_end": True}, "set `save_strategy` and `eval_strategy` alike (now steps and no)"),
])
def test_schedules_transformers_fails_on_at_the_trainers_start_are_refused(values, words):
    """Each passed the check and failed when the trainer built its scheduler (or checked its strategies), after the
    model had loaded; transformers' own TrainingArguments and get_scheduler are what refuse them there."""
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, **values})
    assert words in str(info.value)


@pytest.mark.parametrize("values", [
    {"lr_scheduler_type": "reduce_lr_on_plateau", "eval_strategy": "steps", "eval_steps": 5, "val_size": 0.2},
    {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": {"min_lr_rate": 0.1}},
    {"lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": '{"min_lr": 1e-6}'},
    {"lr_scheduler_type": "warmup_stable_decay", "lr_scheduler_kwargs": {"num_decay_steps": 3}},
    {"load_best_model_at_end": True, "eval_strategy": "steps", "eval_steps": 5, "save_steps": 5, "val_size": 0.2},
])
def test_the_same_schedules_with_what_they_need_are_taken_and_transformers_builds_them(values, tmp_path):
    import torch
    from transformers import TrainingArguments, get_scheduler

    from engine.train.arguments import build_args

    cfg = build_config({**BASE, **values, "output_dir": str(tmp_path)})
    args = build_args(TrainingArguments, cfg, has_eval=cfg.train.eval_strategy != "no")  # as training builds them
    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=1.0)
    scheduler = get_scheduler(args.lr_scheduler_type, optimizer, num_warmup_steps=0, num_training_steps=10,
                              scheduler_specific_kwargs=args.lr_scheduler_kwargs)
    if args.lr_scheduler_type == "cosine_with_min_lr":  # the floor given reaches the schedule
        for _ in range(10):
            optimizer.step()
            scheduler.step()
        floor = values["lr_scheduler_kwargs"]
        expected = 0.1 if "min_lr_rate" in str(floor) else 1e-6
        assert optimizer.param_groups[0]["lr"] == pytest.approx(expected)


@pytest.mark.parametrize(("value", "shown"), [(1e30, "1e+30"), ("1e30", "'1e30'"), (10**25, str(10**25))])
def test_a_whole_number_too_large_is_named_as_given(value, shown):
    """`max_steps=1e30` was named as the 31-digit whole number it became (found by an outside attack)."""
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, "max_steps": value})
    assert f"`max_steps: {shown}` is beyond the largest whole number" in str(info.value)
