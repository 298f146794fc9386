"""report_to: the run's metrics reach TensorBoard, Weights & Biases (offline) and MLflow (local file store)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main
from engine.config import ConfigError, build_config
from tests.engine.tinymodels import build_tiny_model

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "data"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


REPO = Path(__file__).resolve().parents[2]
COMMON = ["template=chatml", "dataset=alpaca_small", f"dataset_dir={FIXTURES}", "max_steps=2", "logging_steps=1",
          "save_strategy=no", "plot_loss=false", "per_device_train_batch_size=2", "gradient_accumulation_steps=1",
          "cutoff_len=64", "overwrite_output_dir=true", "run_name=tracked"]


def train(tiny: Path, out: Path, report_to: str) -> int:
    config = out.parent / f"{out.name}.yaml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text(f"model_name_or_path: {tiny}\nreport_to: {report_to}\n")
    return main(["train", str(config), *COMMON, f"output_dir={out}"])


def needs(package: str):
    return pytest.mark.skipif(importlib.util.find_spec(package) is None, reason=f"{package} is not installed")


@needs("tensorboard")
def test_tensorboard_gets_the_loss_scalars(tiny, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    out = tmp_path / "tb"
    assert train(tiny, out, "tensorboard") == 0
    files = list(out.rglob("events.out.tfevents.*"))
    assert files, "no TensorBoard event file was written"
    acc = EventAccumulator(str(files[0].parent))
    acc.Reload()
    steps = [s.step for s in acc.Scalars("train/loss")]
    assert steps == [1, 2]
    assert all(s.value > 0 for s in acc.Scalars("train/loss"))


@needs("tensorboard")
def test_tensorboard_writes_into_the_runs_own_folder_not_through_a_planted_link(tiny, tmp_path):
    """The run's `runs` was a link to a folder elsewhere: the writer made its dated folder and event file there."""
    out, elsewhere = tmp_path / "tb-linked", tmp_path / "elsewhere"
    out.mkdir()
    elsewhere.mkdir()
    (out / "runs").symlink_to(elsewhere, target_is_directory=True)
    assert train(tiny, out, "tensorboard") == 0
    assert list(elsewhere.iterdir()) == []
    assert not (out / "runs").is_symlink()
    [event_file] = list((out / "runs").glob("*/events.out.tfevents.*"))
    assert b"train/loss" in event_file.read_bytes()


@needs("wandb")
def test_wandb_offline_run_records_the_metrics(tiny, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_DISABLED", raising=False)
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_DIR", str(tmp_path))
    monkeypatch.setenv("WANDB_SILENT", "true")
    out = tmp_path / "wb"
    config = tmp_path / "wb.yaml"
    config.write_text(f"model_name_or_path: {tiny}\nreport_to: wandb\n")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-m", "engine", "train", str(config), *COMMON, f"output_dir={out}"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]  # the offline run is closed when the process ends
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1
    records = next(runs[0].glob("run-*.wandb")).read_bytes()  # the offline run log, synced later by `wandb sync`
    assert records.count(b"train/loss") >= 2 and b"train/global_step" in records


@needs("mlflow")
def test_mlflow_local_store_logs_the_metrics(tiny, tmp_path, monkeypatch):
    store = tmp_path / "mlruns"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store.as_uri())
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", "lf-board-test")
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")
    out = tmp_path / "ml"
    assert train(tiny, out, "mlflow") == 0
    loss_files = list(store.rglob("metrics/loss"))
    assert loss_files, "MLflow logged no loss metric"
    steps = [int(line.split()[2]) for line in loss_files[0].read_text().splitlines()]
    assert steps == [1, 2]


def test_missing_tracker_package_is_refused(monkeypatch):
    import engine.config.method_checks as checks

    monkeypatch.setattr(checks.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ConfigError, match=r"report_to.*wandb.*pip install wandb"):
        build_config({"report_to": "wandb"})
