"""Values of the wrong kind refused when the config is built (``lf-engine check``), not after the model has loaded:
an optimizer or a TrainingArguments choice transformers does not know, and a list where one text is expected."""

import pytest
from transformers.training_args import OptimizerNames

from engine.config import ConfigError, build_config, parse_overrides
from engine.config.hf_values import hf_choices

BASE = {"model_name_or_path": "demo", "dataset": "demo_identity"}


def _problem(**values):
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, **values})
    return str(info.value)


def test_an_optimizer_transformers_does_not_know_is_refused_with_the_names_it_knows():
    """`optim: foo` passed `lf-engine check`; training failed only when TrainingArguments was built, after the
    model and data had loaded."""
    message = _problem(optim="adamw_torh")
    assert "`optim: adamw_torh`" in message and "Did you mean `adamw_torch`?" in message
    assert all(name.value in message for name in OptimizerNames)
    for name in OptimizerNames:  # every name transformers takes is taken here
        assert build_config({**BASE, "optim": name.value}).train.optim == name.value


def test_the_choices_are_transformers_own():
    assert hf_choices("optim") == ([name.value for name in OptimizerNames], False)
    assert hf_choices("debug")[1] is True  # a text lists several, as transformers splits it
    assert hf_choices("output_dir") is None and hf_choices("not_a_key") is None


@pytest.mark.parametrize(("key", "wrong", "fine"), [
    ("logging_strategy", "step", "steps"),
    ("hub_strategy", "sometimes", "every_save"),
    ("log_level", "loud", "warning"),
    ("ddp_backend", "tcp", "gloo"),
    ("debug", "underflow_overflow verbose", "underflow_overflow"),
])
def test_passed_through_choices_transformers_does_not_know_are_refused(key, wrong, fine):
    """TrainingArguments keys a LLaMA-Factory config passes through, with a fixed set of values: any text was
    passed on, and transformers refused it after the model had loaded."""
    message = _problem(**{key: wrong})
    assert f"`{key}: " in message and "is not a value transformers knows" in message
    assert build_config({**BASE, key: fine}).extra[key] == fine


@pytest.mark.parametrize(("key", "kind"), [
    ("output_dir", "one folder path"), ("export_dir", "one folder path"), ("template", "one template name"),
    ("model_name_or_path", "one path or hub id"), ("optim", "one optimizer name"), ("default_system", "text"),
])
def test_a_list_for_a_key_holding_one_text_is_refused(key, kind):
    """`output_dir=[a]` on the command line (a YAML list) was read as `a`: a list for any text key was joined
    with commas."""
    for given in (parse_overrides([f"{key}=[a]"])[key], ["a", "b"]):
        message = _problem(**{key: given})
        assert f"`{key}: {given!r}` must be {kind}, not a list" in message


@pytest.mark.parametrize("key", ["dataset", "lora_target", "report_to", "fsdp_transformer_layer_cls_to_wrap"])
def test_a_list_for_a_comma_separated_key_is_still_taken(key):
    """LLaMA-Factory splits these on commas and takes a YAML list as well."""
    values = {"dataset": ["demo_identity", "demo_alpaca"], "lora_target": ["q_proj", "v_proj"],
              "report_to": ["none"], "fsdp_transformer_layer_cls_to_wrap": ["A", "B"]}
    extra = {"fsdp": "full_shard auto_wrap"} if key.startswith("fsdp") else {}
    cfg = build_config({**BASE, **extra, key: values[key]})
    section = {"dataset": cfg.data, "lora_target": cfg.finetuning}.get(key, cfg.train)
    assert getattr(section, key) == ",".join(values[key])


def test_a_yaml_no_for_a_passed_through_strategy_is_no(tmp_path):
    """`logging_strategy: no` (YAML 1.1 reads a bare `no` as false) was refused as "`logging_strategy: False` must be
    text", where the typed `save_strategy: no` is taken."""
    import yaml

    mapping = yaml.safe_load("logging_strategy: no\nsave_strategy: no\nhub_strategy: end\n")
    cfg = build_config({**BASE, **mapping})
    assert cfg.extra["logging_strategy"] == "no" and cfg.train.save_strategy == "no"
    assert cfg.extra["hub_strategy"] == "end"
    with pytest.raises(ConfigError, match="`torch_compile: 'x'` must be true or false"):  # a true bool key is unchanged
        build_config({**BASE, "torch_compile": "x"})
    assert build_config({**BASE, "torch_compile": False}).extra["torch_compile"] is False


def test_the_optimizers_taken_without_importing_transformers_are_its_own():
    """engine.config.hf_values.OPTIMIZER_NAMES answers the common `optim` values without importing transformers
    (and with it torch, which the board checking its form must not): it must be transformers' own list."""
    from engine.config.hf_values import OPTIMIZER_NAMES

    assert OPTIMIZER_NAMES == {name.value for name in OptimizerNames}
