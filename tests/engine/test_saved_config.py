"""The lf_config.yaml a run saves beside its checkpoints and adapters is read as every config is
(engine.checkpoints.read_saved_config, through engine.config.loader.load_yaml_text): a broken one is named in a
warning and its settings left unused, by every reader of it (the resume checks, the reward model's base, the trained
template)."""

import logging
import time

import pytest
import torch

from engine.checkpoints import read_saved_config, trained_template
from engine.config import build_config
from engine.errors import UserError
from engine.train.resume_fit import check_fits, guard_loads
from engine.train.rl_checks import adapter_base

LEVELS = "".join(f"{name}: &{name} [{', '.join([f'*{prev}'] * 10)}]\n"
                 for prev, name in zip("abcde", "bcdef", strict=True))
BOMB = "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + LEVELS
"""Six levels of ten aliases: a million values in a file of a few hundred bytes (yaml.safe_load shares them)."""

BROKEN = {
    "not YAML": ("template: [chatml\n", "is not valid YAML at line"),
    "nested too deeply": ("template: " + "[" * 5000 + "\n", "nests lists or mappings too deeply"),
    "an alias bomb": (BOMB + "template: *f\n", "holds more than 100,000 values"),
    "not UTF-8": (b"template: \xff\n", "is not UTF-8 text (byte 0xff at position 10)"),
    "a list": ("- template\n", "does not hold `key: value` lines"),
    "a number too large": ("template: 1" + "0" * 5000 + "\n", "a whole number of 5,001 digits"),
}


def _write(folder, content):
    folder.mkdir(parents=True, exist_ok=True)
    file = folder / "lf_config.yaml"
    file.write_bytes(content if isinstance(content, bytes) else content.encode())
    return file


@pytest.mark.parametrize("case", sorted(BROKEN))
def test_a_broken_saved_config_is_named_once_and_not_used(tmp_path, caplog, case):
    content, words = BROKEN[case]
    file = _write(tmp_path / "adapter", content)
    with caplog.at_level(logging.WARNING, logger="engine.checkpoints"):
        assert trained_template(str(tmp_path / "adapter")) is None
        assert read_saved_config(tmp_path / "adapter") == {}
    warnings = [record.getMessage() for record in caplog.records if record.levelno == logging.WARNING]
    assert len(warnings) == 1, warnings  # said once, however often the file is read
    assert f"`{file}`" in warnings[0] and words in warnings[0] and "fix the file or delete it" in warnings[0]
    assert "Traceback" not in caplog.text


def test_a_deeply_nested_saved_config_is_refused_before_the_parser_crawls(tmp_path):
    """yaml.safe_load took 1.3-3 s (on a busy 2-core machine) to reach the RecursionError of 20,000 `[`; refused
    at the first levels past what can be read, it takes some 0.05 s."""
    _write(tmp_path / "run", "template: " + "[" * 20000 + "\n")
    started = time.perf_counter()
    assert read_saved_config(tmp_path / "run") == {}
    assert time.perf_counter() - started < 0.5


def test_a_good_saved_config_is_read(tmp_path, caplog):
    _write(tmp_path / "adapter", "model_name_or_path: base/model\ntemplate: chatml\ntemplate: qwen\n")
    with caplog.at_level(logging.WARNING):
        assert trained_template(str(tmp_path / "adapter")) == "qwen"  # the last of a key given twice, as LF reads it
        assert adapter_base(tmp_path / "adapter", {"base_model_name_or_path": "other"}) == "base/model"
    assert read_saved_config(tmp_path / "none") == {}
    assert not caplog.records


def test_a_saved_base_model_that_is_no_name_falls_back_to_the_adapter_config(tmp_path):
    _write(tmp_path / "rm", "model_name_or_path: [a, b]\n")
    assert adapter_base(tmp_path / "rm", {"base_model_name_or_path": "base/model"}) == "base/model"
    _write(tmp_path / "rm2", BOMB + "model_name_or_path: *f\n")
    assert adapter_base(tmp_path / "rm2", {"base_model_name_or_path": "base/model"}) == "base/model"


def test_an_alias_bomb_in_a_checkpoints_config_does_not_end_in_the_resume_message(tmp_path):
    """A setting of the checkpoint's lf_config.yaml that differs from the run's went into the message whole: an alias
    bomb's million values made it megabytes of text (a bigger bomb, a hang)."""
    _write(tmp_path, BOMB + "lora_target: *f\nmodel_name_or_path: demo\n")

    class Trainer:
        def _load_from_checkpoint(self, path, model=None):
            raise RuntimeError("Error(s) in loading state_dict:\n\tsize mismatch for x")

    trainer = Trainer()
    cfg = build_config({"model_name_or_path": "demo", "output_dir": str(tmp_path / "out")})
    guard_loads(trainer, cfg, str(tmp_path))
    with pytest.raises(UserError) as caught:
        trainer._load_from_checkpoint(str(tmp_path))
    assert len(str(caught.value)) < 2000
    assert "Its lf_config.yaml, which would tell the settings it was saved with, cannot be read" in str(caught.value)


def test_check_fits_reads_a_broken_saved_config_as_none(tmp_path, caplog):
    _write(tmp_path, "finetuning_type: [lora\n")
    torch.save({}, tmp_path / "optimizer.pt")
    cfg = build_config({"model_name_or_path": "demo", "output_dir": str(tmp_path / "out")})
    with caplog.at_level(logging.WARNING):
        check_fits(cfg, tmp_path)  # no weights: nothing to refuse, and no traceback from the broken file
    assert "is not valid YAML" in caplog.text
