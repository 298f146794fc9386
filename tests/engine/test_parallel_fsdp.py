"""FSDP2 for real over 2 CPU processes (gloo): DTensor parameters sharded across both ranks, the same first losses
as one process, a whole model saved by rank 0 that plain transformers loads, and run.json's strategy record."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
COMMON = ["max_steps=2", "logging_steps=1", "save_strategy=no", "max_samples=32", "group_by_length=false",
          "gradient_accumulation_steps=2", "learning_rate=1e-3", f"dataset_dir={EXAMPLES / 'data'}"]


def _events(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "events.jsonl").read_text().splitlines() if x.strip()]


def _losses(folder: Path) -> list[float]:
    return [e["loss"] for e in _events(folder) if e["event"] == "log"]


def _torchrun(example: str, out: Path, *extra: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2", "-m", "engine", "train",
           str(EXAMPLES / example), f"output_dir={out}", *COMMON, *extra]
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    return subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


@pytest.fixture(autouse=True)
def _in_repo(monkeypatch):
    monkeypatch.chdir(REPO)


def _sharded_state_config(tmp_path: Path) -> Path:
    """examples/fsdp/fsdp2.json with a sharded state dict: checkpoints of each rank's shards (pytorch_model_fsdp_0)."""
    config = json.loads((EXAMPLES / "fsdp" / "fsdp2.json").read_text()) | {"state_dict_type": "SHARDED_STATE_DICT"}
    path = tmp_path / "fsdp2_sharded.json"
    path.write_text(json.dumps(config))
    return path


def test_fsdp2_full_finetuning_shards_across_two_cpu_ranks(tmp_path):
    """... with a sharded state dict: real torch.distributed.checkpoint saves, which the checkpoint check reads as
    whole, and a final model of whole weights (transformers' save_model writes none for a sharded state dict)."""
    sharded, single = tmp_path / "fsdp2", tmp_path / "single"
    proc = _torchrun("sft_full_fsdp2_demo.yaml", sharded, "per_device_train_batch_size=2",
                     f"fsdp_config={_sharded_state_config(tmp_path)}", "save_strategy=steps", "save_steps=1")
    assert proc.returncode == 0, proc.stderr[-3000:]
    from engine.checkpoints import checkpoint_problem, latest_complete

    for step in (1, 2):
        assert (sharded / f"checkpoint-{step}" / "pytorch_model_fsdp_0" / ".metadata").is_file()
        assert checkpoint_problem(sharded / f"checkpoint-{step}") is None
    assert latest_complete(sharded) == (sharded / "checkpoint-2", [])
    assert "Passing `fsdp` as a string is deprecated" not in proc.stderr

    run = json.loads((sharded / "run.json").read_text())
    par = run["parallel"]
    assert par["strategy"] == "fsdp2" and par["sharded"] is True
    assert par["world_size"] == 2 and par["backend"] == "gloo" and par["mesh"] == [2]
    assert par["sharded_params"] == par["params"] > 0  # every parameter is a DTensor with a Shard placement
    half = sum(par["rank_numel"]) / 2
    assert len(par["rank_numel"]) == 2 and all(abs(n - half) / half < 0.05 for n in par["rank_numel"])
    assert _events(sharded)[0]["parallel"]["strategy"] == "fsdp2" and _events(sharded)[0]["world_size"] == 2
    assert _events(sharded)[-1]["status"] == "completed"

    # One process over the same global batch (2 ranks x 2 = 4): the same first losses.
    assert main(["train", str(EXAMPLES / "sft_full_fsdp2_demo.yaml"), f"output_dir={single}", *COMMON,
                 "per_device_train_batch_size=4"]) == 0
    assert json.loads((single / "run.json").read_text())["parallel"]["strategy"] == "single"
    got, want = _losses(sharded), _losses(single)
    assert len(got) == len(want) == 2
    for a, b in zip(got, want):
        assert a == pytest.approx(b, rel=2e-3), (got, want)

    # Rank 0 gathered the whole model; plain transformers loads it with full-size weights.
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    cfg = json.loads((sharded / "config.json").read_text())
    assert cfg["architectures"] == ["LlamaForCausalLM"]
    weights = load_file(sharded / "model.safetensors")
    assert weights["model.embed_tokens.weight"].shape == (cfg["vocab_size"], cfg["hidden_size"])
    model = AutoModelForCausalLM.from_pretrained(sharded)
    reference = AutoModelForCausalLM.from_pretrained(single)
    for name, param in model.named_parameters():
        other = dict(reference.named_parameters())[name]
        assert param.shape == other.shape
        assert torch.allclose(param, other, atol=5e-3), name  # two Adam steps, same data: near-identical weights

    # Resuming from the sharded checkpoint of step 1 ends at the same weights as the run that went on.
    resumed = tmp_path / "resumed"
    proc = _torchrun("sft_full_fsdp2_demo.yaml", resumed, "per_device_train_batch_size=2",
                     f"fsdp_config={_sharded_state_config(tmp_path)}", f"resume_from_checkpoint={sharded / 'checkpoint-1'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [e["step"] for e in _events(resumed) if e["event"] == "log"] == [2]
    again = load_file(resumed / "model.safetensors")
    assert set(again) == set(weights) and all(torch.equal(again[k], weights[k]) for k in weights)


def test_fsdp2_lora_shards_and_saves_a_plain_adapter(tmp_path):
    out = tmp_path / "lora"
    proc = _torchrun("sft_lora_demo.yaml", out, "per_device_train_batch_size=2", "fsdp=full_shard auto_wrap",
                     f"fsdp_config={EXAMPLES / 'fsdp' / 'fsdp2.json'}")
    assert proc.returncode == 0, proc.stderr[-3000:]
    par = json.loads((out / "run.json").read_text())["parallel"]
    assert par["strategy"] == "fsdp2" and par["sharded"] and par["world_size"] == 2
    from peft import PeftConfig
    from safetensors.torch import load_file

    assert PeftConfig.from_pretrained(out).r == 16
    adapter = load_file(out / "adapter_model.safetensors")
    assert adapter and all(t.ndim == 2 and min(t.shape) >= 1 for t in adapter.values())
    assert any(16 in t.shape for t in adapter.values())
