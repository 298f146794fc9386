"""`lr_scheduler_kwargs`, the settings of the learning-rate schedule: a key of the engine's own (the board shows it
beside the schedule), taken as LLaMA-Factory configs give it (a YAML mapping), as a JSON object or as YAML flow text
(the board's box), and handed to transformers' TrainingArguments as the mapping it is."""

import json
import sys

import pytest
import yaml

from engine.config import ConfigError, build_config

BASE = {"model_name_or_path": "demo", "dataset": "demo_identity"}


@pytest.mark.parametrize("given", [
    {"min_lr_rate": 0.1},  # a LLaMA-Factory config's mapping
    '{"min_lr_rate": 0.1}',  # JSON text
    "{min_lr_rate: 0.1}",  # YAML flow text, as typed in the board's box
    "min_lr_rate: 0.1",
])
def test_each_form_gives_the_same_mapping_and_the_saved_config_holds_it(given):
    cfg = build_config({**BASE, "lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": given})
    assert json.loads(cfg.train.lr_scheduler_kwargs) == {"min_lr_rate": 0.1}
    assert yaml.safe_load(cfg.to_yaml())["lr_scheduler_kwargs"] == {"min_lr_rate": 0.1}  # config.yaml: the mapping


@pytest.mark.parametrize("given", ["{min_lr: 1e-6}", {"min_lr": "1e-6"}, '{"min_lr": 1e-6}'])
def test_an_exponent_without_a_dot_is_a_number(given):
    """YAML 1.1 reads `1e-6` as text: transformers' schedule then failed on it after the model had loaded."""
    cfg = build_config({**BASE, "lr_scheduler_type": "cosine_with_min_lr", "lr_scheduler_kwargs": given})
    assert json.loads(cfg.train.lr_scheduler_kwargs) == {"min_lr": 1e-6}


@pytest.mark.parametrize("given", ["abc", "[1, 2]", "{1: 2}", "{a: [1,", "3", "{a: 2024-01-01}", {"a": {1, 2}}])
def test_text_that_is_no_mapping_is_refused_with_an_example(given):
    with pytest.raises(ConfigError) as info:
        build_config({**BASE, "lr_scheduler_kwargs": given})
    assert "`lr_scheduler_kwargs:" in str(info.value) and "must be a mapping" in str(info.value)
    assert '{"min_lr_rate": 0.1}' in str(info.value)


def test_empty_text_is_no_settings():
    assert build_config({**BASE, "lr_scheduler_kwargs": "  "}).train.lr_scheduler_kwargs is None


def test_the_training_arguments_get_the_mapping(tmp_path):
    from transformers import TrainingArguments

    from engine.train.arguments import build_args

    cfg = build_config({**BASE, "output_dir": str(tmp_path), "lr_scheduler_type": "warmup_stable_decay",
                        "lr_scheduler_kwargs": "{num_decay_steps: 3, min_lr_ratio: 0.05}"})
    args = build_args(TrainingArguments, cfg, has_eval=False)
    assert args.lr_scheduler_kwargs == {"num_decay_steps": 3, "min_lr_ratio": 0.05}
    plain = build_args(TrainingArguments, build_config({**BASE, "output_dir": str(tmp_path)}), has_eval=False)
    assert plain.lr_scheduler_kwargs == TrainingArguments(str(tmp_path)).lr_scheduler_kwargs  # nothing given


def test_the_board_checks_the_key_without_importing_torch(tmp_path):
    """The board checks its form with build_config on every change and must stay without torch (README "Speed":
    board memory); `optim`, which the form always sends, is answered from a list of transformers' names."""
    import subprocess

    code = (
        "import sys\n"
        "from app import forms\nfrom app.workspace import DEMO_SETTINGS\n"
        "checked = forms.validate({**DEMO_SETTINGS, 'optim': 'adamw_torch', 'lr_scheduler_type': 'cosine_with_min_lr',"
        f" 'lr_scheduler_kwargs': '{{min_lr_rate: 0.1}}'}}, 'train', {str(tmp_path / 'run')!r})\n"
        "print('CONFIG', checked.config is not None, [p for p in checked.problems])\n"
        "print('HEAVY', [m for m in ('torch', 'transformers') if m in sys.modules])\n"
    )
    from tests.e2e.conftest import REPO_ROOT

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "CONFIG True" in out.stdout and "HEAVY []" in out.stdout, out.stdout
