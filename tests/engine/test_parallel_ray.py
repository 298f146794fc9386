"""Ray Train through a fake `ray` package (tests/fixtures/fake_ray): the driver's TorchTrainer set-up and the
per-worker code path, run in 2 local processes. No Ray cluster is ever started here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import build_config
from engine.errors import UserError
from engine.train.parallel import ray as ray_launcher

REPO = Path(__file__).resolve().parents[2]
FAKE_RAY = REPO / "tests" / "fixtures" / "fake_ray"


def test_ray_runs_the_same_training_on_two_workers(tmp_path):
    out, log = tmp_path / "run", tmp_path / "ray.jsonl"
    env = {**os.environ, "PYTHONPATH": f"{FAKE_RAY}{os.pathsep}{REPO}", "FAKE_RAY_LOG": str(log),
           "RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES": "1", "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
           "RAY_ADDRESS": "ray://head.example:10001", "OMP_NUM_THREADS": "1"}
    env.pop("USE_RAY", None)
    cmd = [sys.executable, "-m", "engine", "train", str(REPO / "examples/sft_lora_demo.yaml"), f"output_dir={out}",
           "use_ray=true", "ray_num_workers=2", 'resources_per_worker={"CPU": 1}', "placement_strategy=SPREAD",
           "ray_run_name=lf-test", f"ray_storage_path={tmp_path / 'ray'}", "max_steps=2", "logging_steps=1",
           "save_strategy=no", "max_samples=16", f"dataset_dir={REPO / 'examples/data'}"]
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    init = next(c for c in calls if c["event"] == "init")
    assert init["address"] == "ray://head.example:10001"  # RAY_ADDRESS joins the existing cluster
    env_vars = init["runtime_env"]["env_vars"]
    assert env_vars["RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES"] == "1"
    assert env_vars["RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES"] == "1"
    trainer = next(c for c in calls if c["event"] == "trainer")
    assert trainer["num_workers"] == 2 and trainer["resources"] == {"CPU": 1} and trainer["use_gpu"] is False
    assert trainer["placement"] == "SPREAD" and trainer["run_name"] == "lf-test"
    assert trainer["storage_path"] == str(tmp_path / "ray")
    assert next(c for c in calls if c["event"] == "fit_done")["exit_codes"] == [0, 0]
    assert "train_loss" in next(c for c in calls if c["event"] == "report")["metrics"]  # rank 0 reported
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed"
    assert run["parallel"] == {**run["parallel"], "strategy": "ddp", "world_size": 2, "backend": "gloo",
                               "launcher": "ray"}
    ranks = sorted(json.loads(p.read_text())["pid"] for p in (out / "ranks").glob("*.json"))
    assert len(ranks) == 2 and init["pid"] not in ranks  # the workers are their own processes
    assert (out / "adapter_model.safetensors").is_file()


def test_noset_variables_pick_the_device_ray_assigned(monkeypatch):
    monkeypatch.syspath_prepend(str(FAKE_RAY))
    for name in list(sys.modules):
        if name == "ray" or name.startswith("ray."):
            monkeypatch.delitem(sys.modules, name)
    monkeypatch.setenv("RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("FAKE_RAY_ACCELERATOR_IDS", json.dumps({"SUPA": ["3"]}))
    monkeypatch.setenv("LOCAL_RANK", "0")
    ray_launcher._pick_local_device()
    assert os.environ["LOCAL_RANK"] == "3"
    monkeypatch.delenv("RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES")
    monkeypatch.setenv("LOCAL_RANK", "0")
    ray_launcher._pick_local_device()
    assert os.environ["LOCAL_RANK"] == "0"  # Ray narrowed the visible devices itself: keep the local rank


def test_check_names_a_missing_ray_before_the_run(monkeypatch, tmp_path, capsys):
    """`lf-engine check` said OK to `use_ray: true` without Ray installed; only `train` then refused it."""
    import importlib.util

    from engine.cli import main

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "ray" else real(name, *a))
    monkeypatch.delenv("USE_RAY", raising=False)
    monkeypatch.delenv("LF_RAY_WORKER", raising=False)
    argv = ["check", str(REPO / "examples/sft_lora_demo.yaml"), f"output_dir={tmp_path}"]
    assert main([*argv, "use_ray=true"]) == 2
    assert "pip install 'ray[train]'" in capsys.readouterr().err
    assert main(argv) == 0  # without use_ray, nothing is asked of Ray


def test_use_ray_switches_and_missing_ray(monkeypatch, tmp_path):
    cfg = build_config({"model_name_or_path": "demo", "dataset": "demo_alpaca", "output_dir": str(tmp_path)})
    monkeypatch.delenv("USE_RAY", raising=False)
    assert not ray_launcher.use_ray(cfg)
    monkeypatch.setenv("USE_RAY", "1")  # LLaMA-Factory's switch
    assert ray_launcher.use_ray(cfg)
    monkeypatch.setenv("LF_RAY_WORKER", "1")  # inside a worker the job runs, it does not launch again
    assert not ray_launcher.use_ray(cfg)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UserError, match=r"pip install 'ray\[train\]'"):
        ray_launcher.build_trainer(cfg)
    assert ray_launcher.resources(cfg) == {"CPU": 1}
    cfg.parallel.ray_init_kwargs = {"num_cpus": 2}
    monkeypatch.setenv("RAY_ADDRESS", "auto")
    kwargs = ray_launcher.init_kwargs(cfg)
    assert kwargs["address"] == "auto" and kwargs["num_cpus"] == 2 and kwargs["runtime_env"]["env_vars"]["LF_LAUNCHER"] == "ray"


def test_ray_keys_without_ray_are_named(monkeypatch, tmp_path):
    """LLaMA-Factory's ray example (`ray_num_workers: 4`, launched with USE_RAY=1) run without USE_RAY trained one
    plain process with no word about the Ray keys it ignored."""
    for name in ("USE_RAY", "LF_RAY_WORKER"):
        monkeypatch.delenv(name, raising=False)
    base = {"model_name_or_path": "demo", "dataset": "demo_alpaca", "output_dir": str(tmp_path)}
    notes = build_config({**base, "ray_num_workers": 4, "placement_strategy": "SPREAD"}).notes
    told = [note for note in notes if "Ray" in note]
    assert len(told) == 1 and "`ray_num_workers: 4`, `placement_strategy: SPREAD` ignored" in told[0]
    assert "USE_RAY=1" in told[0] and "use_ray: true" in told[0]
    assert not [n for n in build_config(base).notes if "Ray" in n]  # nothing set: nothing to say
    assert not [n for n in build_config({**base, "ray_num_workers": 4, "use_ray": True}).notes if "Ray" in n]
    monkeypatch.setenv("USE_RAY", "1")
    assert not [n for n in build_config({**base, "ray_num_workers": 4}).notes if "Ray" in n]


def test_the_ray_note_names_a_mapping_or_a_long_value_by_its_key_alone(monkeypatch, tmp_path):
    """The note printed ray_init_kwargs whole: a runtime_env's token went into the notes (the log, run.json, the
    board), and a 5,000-character value made a 5 KB note. A mapping given as bad text is refused with its own
    example, not resources_per_worker's."""
    for name in ("USE_RAY", "LF_RAY_WORKER"):
        monkeypatch.delenv(name, raising=False)
    base = {"model_name_or_path": "demo", "dataset": "demo_alpaca", "output_dir": str(tmp_path)}
    init = {"runtime_env": {"env_vars": {"HF_TOKEN": "hf_SECRET123"}}}
    notes = build_config({**base, "ray_init_kwargs": init, "ray_run_name": "x" * 5000, "ray_num_workers": 4}).notes
    told = [note for note in notes if "Ray" in note]
    assert len(told) == 1 and "hf_SECRET123" not in told[0] and len(told[0]) < 400
    assert "`ray_num_workers: 4`, `ray_run_name`, `ray_init_kwargs` ignored" in told[0]
    with pytest.raises(UserError, match=r"`ray_init_kwargs: \'abc\'` must be a mapping, e.g. \{\"num_cpus\": 8\}"):
        build_config({**base, "ray_init_kwargs": "abc"})
