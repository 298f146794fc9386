"""bitsandbytes stays out of engine processes whose config cannot use it (engine.import_guard)."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.config import load_config
from engine.import_guard import bitsandbytes_reason

REPO = Path(__file__).resolve().parents[2]
DEMO = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "lora", "dataset": "demo_sft",
        "output_dir": "out"}


def _reason(**overrides):
    return bitsandbytes_reason(load_config(None, {**DEMO, **overrides}))


def _model_folder(path: Path, config: dict) -> str:
    path.mkdir()
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def test_a_plain_run_does_not_need_it():
    assert _reason() is None
    for optim in ("adamw_torch", "adamw_torch_fused", "sgd", "adafactor"):
        assert _reason(optim=optim) is None


@pytest.mark.parametrize("overrides, says", [
    ({"quantization_bit": 4}, "quantization_bit: 4"),
    ({"optim": "adamw_bnb_8bit"}, "optim: adamw_bnb_8bit"),
    ({"optim": "paged_adamw_32bit"}, "optim: paged_adamw_32bit"),
    ({"optim": "lion_8bit"}, "optim: lion_8bit"),
    ({"use_galore": True, "finetuning_type": "full"}, "use_galore"),
    ({"use_apollo": True, "finetuning_type": "full"}, "use_apollo"),
])
def test_what_may_use_it_keeps_it(overrides, says):
    assert says in _reason(**overrides)


def test_a_model_folder_decides_by_its_config(tmp_path):
    plain = _model_folder(tmp_path / "plain", {"model_type": "qwen2"})
    assert _reason(model_name_or_path=plain) is None
    quantized = _model_folder(tmp_path / "bnb4", {"model_type": "qwen2", "quantization_config": {
        "quant_method": "bitsandbytes", "load_in_4bit": True}})
    assert "may be quantized" in _reason(model_name_or_path=quantized)
    nested = _model_folder(tmp_path / "vlm", {"model_type": "qwen2_vl", "text_config": {
        "quantization_config": {"quant_method": "bitsandbytes"}}})
    assert "may be quantized" in _reason(model_name_or_path=nested)
    broken = tmp_path / "broken"
    broken.mkdir()
    (broken / "config.json").write_text("{not json", encoding="utf-8")
    assert "may be quantized" in _reason(model_name_or_path=str(broken))
    ref = _model_folder(tmp_path / "ref", {"quantization_config": {"quant_method": "bitsandbytes"}})
    assert "may be quantized" in _reason(model_name_or_path=plain, stage="dpo", dataset="demo_dpo", ref_model=ref)


def test_a_hub_id_not_in_the_cache_keeps_it(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    assert "may be quantized" in _reason(model_name_or_path="someone/some-model",
                                         cache_dir=str(tmp_path / "hub"))
    snapshot = tmp_path / "hub" / "models--someone--some-model" / "snapshots" / ("0" * 40)
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text(json.dumps({"model_type": "qwen2"}), encoding="utf-8")
    refs = tmp_path / "hub" / "models--someone--some-model" / "refs"
    refs.mkdir()
    (refs / "main").write_text("0" * 40, encoding="utf-8")
    assert _reason(model_name_or_path="someone/some-model", cache_dir=str(tmp_path / "hub")) is None


PROBE = """
import sys
from engine.cli import main
rc = main(["check", "examples/sft_lora_demo.yaml"] + sys.argv[1:])
import peft  # noqa: F401 - as a training run does next (the checks themselves no longer import it)
print("RESULT", rc, "bitsandbytes" in sys.modules and sys.modules["bitsandbytes"] is not None,
      "torch._inductor.compile_fx" in sys.modules, "peft" in sys.modules)
"""


def _probes(*overrides: tuple[str, ...]) -> list[list[str]]:
    """Each probe's answer; the probes (fresh interpreters sharing nothing) run side by side."""
    procs = [subprocess.Popen([sys.executable, "-c", PROBE, *extra], cwd=REPO, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for extra in overrides]
    answers = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=300)
            assert proc.returncode == 0, stderr[-2000:]
            answers.append(stdout.split("RESULT", 1)[1].split())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return answers


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes not installed")
def test_the_engine_leaves_it_out_of_a_plain_run_and_keeps_it_for_an_8bit_optimizer():
    plain, eight_bit = _probes((), ("optim=adamw_bnb_8bit",))
    # a plain LoRA run: PEFT is imported (PEFT imports bitsandbytes when it can), bitsandbytes and torch's compiler
    # are not
    assert plain == ["0", "False", "False", "True"]
    # an 8-bit optimizer from bitsandbytes: imported as usual
    assert eight_bit[:2] == ["0", "True"]


def test_a_later_run_in_the_same_process_that_needs_it_gets_it_back(monkeypatch):
    from engine.import_guard import skip_bitsandbytes_unless_needed

    monkeypatch.setitem(sys.modules, "bitsandbytes", None)  # hidden by an earlier plain run in this process
    galore = load_config(None, {**DEMO, "finetuning_type": "full", "use_galore": True})
    assert skip_bitsandbytes_unless_needed(galore) is False and "bitsandbytes" not in sys.modules
    monkeypatch.setitem(sys.modules, "bitsandbytes", None)
    assert skip_bitsandbytes_unless_needed(load_config(None, DEMO)) is False and sys.modules["bitsandbytes"] is None
