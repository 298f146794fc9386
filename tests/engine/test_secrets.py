"""Hub tokens and API keys come from the environment: never in config.yaml, lf_config.yaml, checkpoints,
training_args.bin or logs."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import ConfigError, build_config
from engine.credentials import RedactingFilter, export_secrets, redact, take_secrets

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
SECRET = "hf_SeCrEt" + "7" * 24


def test_secret_keys_are_taken_out_of_the_config():
    cfg = build_config({"model_name_or_path": "demo", "hub_token": SECRET, "hf_hub_token": SECRET,
                        "ms_hub_token": "ms-secret-1"})
    assert cfg.secrets == {"HF_TOKEN": SECRET, "MODELSCOPE_API_TOKEN": "ms-secret-1"}
    assert "hub_token" not in cfg.extra and SECRET not in cfg.to_yaml(minimal=False)
    assert SECRET not in repr(cfg)
    assert any("HF_TOKEN" in note and "never saved" in note for note in cfg.notes)
    swan = build_config({"model_name_or_path": "demo", "swanlab_api_key": SECRET})
    assert swan.secrets == {"SWANLAB_API_KEY": SECRET} and SECRET not in swan.to_yaml(minimal=False) + repr(swan)
    clean, found, _ = take_secrets({"a": 1, "hub_token": None})
    assert clean == {"a": 1} and found == {}


def test_a_secret_that_is_not_one_token_is_refused_without_showing_it():
    with pytest.raises(ConfigError) as err:
        build_config({"model_name_or_path": "demo", "hub_token": [SECRET, "x"]})
    assert "`hub_token` must be the token itself, as text (it is a list)" in str(err.value)
    assert SECRET not in str(err.value)
    with pytest.raises(ConfigError) as err:
        build_config({"model_name_or_path": "demo", "hub_token": SECRET, "hf_hub_token": SECRET[::-1]})
    assert "`hub_token` and `hf_hub_token` are both set, to different tokens" in str(err.value)
    assert SECRET not in str(err.value) and SECRET[::-1] not in str(err.value)


def test_exported_secrets_do_not_override_the_environment():
    env = {"HF_TOKEN": "mine"}
    export_secrets({"HF_TOKEN": "from-config", "MODELSCOPE_API_TOKEN": "m"}, env)
    assert env == {"HF_TOKEN": "mine", "MODELSCOPE_API_TOKEN": "m"}


@pytest.mark.parametrize("env", ["HF_TOKEN", "SWANLAB_API_KEY"])
def test_log_records_are_redacted(monkeypatch, env):
    monkeypatch.setenv(env, SECRET)
    record = logging.LogRecord("x", logging.INFO, __file__, 1, "token is %s", (SECRET,), None)
    assert RedactingFilter().filter(record) and record.getMessage() == "token is ***"
    assert redact(f"a {SECRET} b") == "a *** b"


def test_a_training_run_never_writes_the_token_and_writes_weights_0644(tmp_path):
    out = tmp_path / "run"
    config = tmp_path / "cfg.yaml"
    config.write_text((EXAMPLES / "sft_lora_demo.yaml").read_text() + f"\nhub_token: {SECRET}\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")}
    env["PYTHONPATH"] = str(REPO)
    result = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(config), f"output_dir={out}", "max_steps=2", "save_steps=1",
         "logging_steps=1", "max_samples=8", f"dataset_dir={EXAMPLES / 'data'}", "plot_loss=false"],
        cwd=REPO, env=env, capture_output=True, timeout=500,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output.decode(errors="replace")[-3000:]
    assert b"HF_TOKEN" in output  # the note says where the token belongs
    assert SECRET.encode() not in output
    files = [p for p in out.rglob("*") if p.is_file()]
    names = {p.name for p in files}
    assert {"config.yaml", "lf_config.yaml", "training_args.bin", "run.json"} <= names, names
    assert any("checkpoint-" in str(p) for p in files)
    for path in files:
        assert SECRET.encode() not in path.read_bytes(), path
    # weights are written with the same mode as the configs and logs beside them (0644 under umask 022)
    from engine.fileperms import default_file_mode

    weights = [p for p in files if p.suffix == ".safetensors"]
    assert any("checkpoint-" in str(p) for p in weights) and (out / "adapter_model.safetensors") in weights
    for path in weights:
        assert path.stat().st_mode & 0o777 == default_file_mode(), (path, oct(path.stat().st_mode))
    assert (out / "config.yaml").stat().st_mode & 0o777 == default_file_mode()


def test_match_umask_widens_private_weights_only(tmp_path):
    from engine.fileperms import default_file_mode, match_umask

    weight, secret = tmp_path / "sub" / "model.safetensors", tmp_path / "notes.txt"
    weight.parent.mkdir()
    for path in (weight, secret):
        path.write_bytes(b"x")
        path.chmod(0o600)
    assert match_umask(tmp_path) == 1
    assert weight.stat().st_mode & 0o777 == default_file_mode() and secret.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("key", ["hub_token", "hf_hub_token", "swanlab_api_key"])
def test_board_submissions_hand_the_token_to_the_process_only(key, tmp_path):
    import hashlib

    from app.api import Automation
    from app.context import Board
    from app.jobs import JobManager
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    jobs = JobManager(ws.runs_dir, [sys.executable, str(REPO / "tests" / "app" / "fake_engine.py")],
                      poll_interval=0.05).start()
    try:
        text = (f"model_name_or_path: demo\ntemplate: chatml\ndataset: demo_identity\ndataset_dir: {EXAMPLES / 'data'}"
                f"\n{key}: {SECRET}\n")
        run_id = Automation(Board(ws, jobs)).submit_run(text, "train")
        assert jobs.wait(run_id, 30) == "completed"
        info = jobs.folder(run_id).info()
        if key != "swanlab_api_key":  # the fake engine reports the hub token it was handed
            assert info["hf_token_sha256"] == hashlib.sha256(SECRET.encode()).hexdigest()
        for path in jobs.folder(run_id).path.rglob("*"):
            assert SECRET.encode() not in path.read_bytes(), path
    finally:
        jobs.shutdown()


def test_a_token_given_on_the_command_line_is_masked_in_run_json(tmp_path, monkeypatch):
    """`lf-engine train cfg.yaml hf_hub_token=...` with HF_TOKEN already set to another token: the config's token is
    not exported (the variable wins), so masking the variables' values missed it and run.json's `command` held it."""
    import json

    from engine.credentials import masked_argv
    from engine.lifecycle import JobContext

    monkeypatch.setenv("HF_TOKEN", "hf_anotherTokenFromTheEnvironment")
    monkeypatch.setattr(sys, "argv", ["lf-engine", "train", "cfg.yaml", f"hf_hub_token={SECRET}",
                                      f"--ms_hub_token={SECRET}x", "output_dir=/tmp/x", "--api-key", f"{SECRET}y",
                                      f"--api-key={SECRET}z"])
    with JobContext(tmp_path, "train"):
        pass
    text = (tmp_path / "run.json").read_text(encoding="utf-8")
    assert SECRET not in text
    assert json.loads(text)["command"][3:] == ["train", "cfg.yaml", "hf_hub_token=***", "--ms_hub_token=***",
                                               "output_dir=/tmp/x", "--api-key", "***", "--api-key=***"]
    assert masked_argv(["train", "c.yaml", "lora_rank=8"]) == ["train", "c.yaml", "lora_rank=8"]
