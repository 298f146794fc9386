"""Launching from the board: the command per strategy, the strategy check, and a real 2-process run on CPUs
started by the job manager (torchrun) and aborted: every rank stops, the run is recorded as aborted."""

from __future__ import annotations

import json
import os
import signal
import sys
import time
from pathlib import Path

import pytest
import yaml

from app.context import Board
from app.jobs import JobManager
from app.launch import build_command, normalize
from app.progress_view import status_card
from app.tabs import strategy as scaleout
from app.tabs.train import start_run
from app.workspace import Workspace
from engine.ranks import read_ranks
from engine.runs import RunFolder

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
ENGINE = [sys.executable, "-m", "engine"]


@pytest.fixture(autouse=True)
def _fresh_checks():
    scaleout.forget_checks()
    yield
    scaleout.forget_checks()


def _mapping(example: str, **extra) -> dict:
    mapping = yaml.safe_load((EXAMPLES / example).read_text())
    mapping.update({"dataset_dir": str(EXAMPLES / "data"), **extra})
    return mapping


def test_commands_per_strategy(tmp_path):
    cfg = tmp_path / "config.yaml"
    assert build_command(ENGINE, "train", cfg, None, None) == [*ENGINE, "train", str(cfg)]
    assert build_command(ENGINE, "train", cfg, None, {"strategy": "fsdp2", "nproc": 2}) == [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m", "engine",
        "train", str(cfg)]
    fake = [sys.executable, "fake_engine.py"]
    assert build_command(fake, "train", cfg, None, {"strategy": "ddp", "nproc": 3})[-4:] == [
        "3", "fake_engine.py", "train", str(cfg)]
    # Ray: the engine itself is the driver; eval/export never go through torchrun
    assert build_command(ENGINE, "train", cfg, None, {"strategy": "ray", "nproc": 2}) == [*ENGINE, "train", str(cfg)]
    assert build_command(ENGINE, "eval", cfg, None, {"strategy": "ddp", "nproc": 2}) == [*ENGINE, "eval", str(cfg)]
    assert normalize({"strategy": "bogus", "nproc": 4}) == {"strategy": "single", "nproc": 1}


def test_strategy_check_estimates_and_refuses():
    text = scaleout.check_text(_mapping("sft_full_fsdp2_demo.yaml"), "fsdp2", 2, "en")
    assert "Estimated memory per device" in text and "This strategy can run." in text
    # every part of the engine's estimate has its label (the locale names them; zh 权重, 梯度, 优化器状态, 激活)
    assert all(f"{label} 0." in text for label in ("weights", "gradients", "optimizer states", "activations")), text
    mapping, launch, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml"), "fsdp2", 2, "en")
    assert refusal is None and launch == {"strategy": "fsdp2", "nproc": 2}
    assert mapping["fsdp"] == "full_shard auto_wrap" and mapping["fsdp_config"].endswith("fsdp2.json")
    _, launch, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml", quantization_bit=4), "fsdp2", 2, "en")
    assert launch is None and "cannot shard a quantized model" in refusal and "remove `quantization_bit`" in refusal
    _, _, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml"), "deepspeed_zero3", 2, "en")
    assert "DeepSpeed ZeRO runs on accelerators only" in refusal and "pick FSDP2" in refusal
    _, _, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml"), "ddp", 1, "en")
    assert "needs at least 2 processes" in refusal
    mapping, launch, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml"), "single", 1, "en")
    assert launch is None and refusal is None and "fsdp" not in mapping


def test_the_check_reads_devices_and_model_once_per_model_and_checks_every_form_in_the_board(tmp_path, monkeypatch):
    """The subprocess reads the devices and the model's shape once per model; Check and Start for any strategy,
    process count or form are then answered in the board. A changed model config is read again; a model whose config
    cannot be read is asked again every time; a form with config problems never starts the subprocess."""
    asked = []
    shape = {"params": 5 * 10**7, "hidden": 512, "layers": 8, "vocab": 8192, "heads": 8, "linear_in_out": 10**5}

    def worker(model):
        asked.append(model)
        if "missing" in model:
            return {"devices": {"type": "cpu", "count": 0, "memory": None}, "shape_error": "no config.json"}
        return {"devices": {"type": "cpu", "count": 0, "memory": None}, "shape": shape}

    monkeypatch.setattr(scaleout, "_ask_worker", worker)
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("{}")
    form = _mapping("sft_lora_demo.yaml", model_name_or_path=str(model), finetuning_type="full")
    two = scaleout.check_text(form, "fsdp2", 2, "en")
    assert "Estimated memory per device" in two and asked == [str(model)]
    mapping, launch, refusal = scaleout.prepare(form, "fsdp2", 2, "en")
    assert refusal is None and launch == {"strategy": "fsdp2", "nproc": 2} and mapping["fsdp"] == "full_shard auto_wrap"
    four = scaleout.check_text(form, "fsdp2", 4, "en")
    assert four != two  # sharded over four processes: a smaller estimate, from the same facts
    assert "needs at least 2 processes" in scaleout.prepare(form, "ddp", 1, "en")[2]
    scaleout.prepare({**form, "cutoff_len": 64}, "ddp", 2, "en")
    assert asked == [str(model)]
    (model / "config.json").write_text('{"hidden_size": 8}')  # the model's config changed: read again
    os.utime(model / "config.json", ns=(10**18, 10**18))
    scaleout.check_text(form, "fsdp2", 2, "en")
    assert asked == [str(model)] * 2
    missing = {**form, "model_name_or_path": str(tmp_path / "missing")}
    for _ in range(2):
        assert "No memory estimate: the model config could not be read (no config.json)" in scaleout.check_text(
            missing, "ddp", 2, "en")
    assert asked[2:] == [str(tmp_path / "missing")] * 2
    problems = scaleout.check_text({**form, "learning_rate": "fast"}, "ddp", 2, "en")
    assert "learning_rate" in problems and len(asked) == 4


def test_opening_the_box_reads_the_facts_ahead_and_a_check_meanwhile_waits_for_them(tmp_path, monkeypatch):
    asked = []

    def slow_worker(model):
        asked.append(model)
        time.sleep(0.5)
        return {"devices": {"type": "cpu", "count": 0, "memory": None},
                "shape": {"params": 10**6, "hidden": 64, "layers": 2, "vocab": 100, "heads": 2, "linear_in_out": 10}}

    monkeypatch.setattr(scaleout, "_ask_worker", slow_worker)
    form = _mapping("sft_lora_demo.yaml")
    thread = scaleout.read_ahead(form)
    assert thread is not None and scaleout.read_ahead(form) is None  # already being read
    assert "This strategy can run." in scaleout.check_text(form, "ddp", 2, "en")  # waits for the read ahead
    thread.join(5)
    assert len(asked) == 1 and scaleout.read_ahead(form) is None  # known now
    assert scaleout.read_ahead({**form, "learning_rate": "fast"}) is None  # no valid config: nothing to read
    assert len(asked) == 1


def test_a_strategy_check_that_cannot_run_says_so_and_refuses_the_start(tmp_path, monkeypatch):
    import json
    import subprocess

    from app import strategy_worker

    request, out = tmp_path / "in.json", tmp_path / "out.json"
    request.write_text(json.dumps({"strategy": "ddp", "nproc": 2}))  # no model
    assert strategy_worker.main([str(request), str(out)]) == 2
    assert json.loads(out.read_text()) == {"error": "KeyError: 'model'"}

    def too_slow(*args, **kwargs):
        raise subprocess.TimeoutExpired(args[0], scaleout.CHECK_TIMEOUT)

    monkeypatch.setattr(scaleout.subprocess, "run", too_slow)
    assert "took longer than 300 s; try again" in scaleout.check_text(_mapping("sft_lora_demo.yaml"), "ddp", 2, "en")
    mapping, launch, refusal = scaleout.prepare(_mapping("sft_lora_demo.yaml"), "ddp", 2, "en")
    assert launch is None and "took longer than 300 s" in refusal and "fsdp" not in mapping
    monkeypatch.setattr(scaleout.subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 1))
    assert "The strategy check could not run: exit code 1" in scaleout.check_text(
        _mapping("sft_lora_demo.yaml"), "ddp", 2, "en")


def test_board_runs_two_cpu_processes_and_abort_stops_every_rank(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    jobs = JobManager(ws.runs_dir, kill_grace=90.0, poll_interval=0.2, cwd=REPO)
    jobs.start()
    board = Board(workspace=ws, jobs=jobs)
    try:
        mapping, launch, refusal = scaleout.prepare(
            _mapping("sft_lora_demo.yaml", max_steps=400, logging_steps=1, save_strategy="no"), "ddp", 2, "en")
        assert refusal is None
        message, run_id = start_run(board, mapping, "", "en", launch)
        assert run_id, message
        folder = RunFolder(jobs.runs_dir / run_id)
        info = folder.info()
        assert info["launch"] == {"strategy": "ddp", "nproc": 2}
        assert info["command"][1:6] == ["-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2"]
        deadline = time.time() + 400
        while time.time() < deadline:
            mon = jobs.monitor(run_id)
            if mon.last_log is not None or folder.status() in ("failed", "completed"):
                break
            time.sleep(0.5)
        assert folder.status() == "running", folder.log_tail()
        info = folder.info()
        assert info["parallel"]["strategy"] == "ddp" and info["parallel"]["world_size"] == 2
        ranks = read_ranks(folder.path)
        assert [r["rank"] for r in ranks] == [0, 1]
        launcher_pid = info["pid"]
        assert launcher_pid not in [r["pid"] for r in ranks]  # run.json keeps torchrun's pid and group
        assert run_id in JobManager(ws.runs_dir, cwd=REPO).rediscover()["attached"]  # a restarted board re-attaches
        card = status_card(board, run_id, "en")
        assert "parallel: DDP · 2 processes · not sharded · gloo" in card
        assert "并行：DDP · 2 个进程 · 未分片 · gloo" in status_card(board, run_id, "zh")
        assert jobs.abort(run_id) == "stopping"
        assert jobs.wait(run_id, 180) == "aborted"
        deadline = time.time() + 60
        while time.time() < deadline and any(_alive(p) for p in [launcher_pid, *(r["pid"] for r in ranks)]):
            time.sleep(0.5)
        assert not any(_alive(r["pid"]) for r in ranks), "a rank outlived the abort"
        assert not _alive(launcher_pid)
        end = [json.loads(x) for x in folder.events_path.read_text().splitlines() if x.strip()][-1]
        assert end["event"] == "end" and end["status"] == "aborted"
        assert list(folder.path.glob("checkpoint-*")), "the ranks did not save a checkpoint together on abort"
    finally:
        jobs.shutdown()
        for run_id in jobs.running():
            info = RunFolder(jobs.runs_dir / run_id).info()
            for pid in [info.get("pgid"), *(r.get("pgid") for r in read_ranks(jobs.runs_dir / run_id))]:
                if pid:
                    try:
                        os.killpg(int(pid), signal.SIGKILL)
                    except (ProcessLookupError, PermissionError):
                        pass


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as fh:
            return fh.read().rsplit(")", 1)[-1].split()[0] != "Z"
    except OSError:
        return False


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)
