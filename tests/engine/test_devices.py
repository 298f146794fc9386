"""engine.devices: the CPU for real, every accelerator branch through fake torch namespaces."""

from __future__ import annotations

import importlib.abc
import logging
import subprocess
import sys
import types
from pathlib import Path

import pytest
import torch

from engine import devices

GIB = 2**30


class FakeEvent:
    def __init__(self, enable_timing: bool = False):
        self.enable_timing = enable_timing


def fake_namespace(name: str, *, count: int = 2, bf16: bool = True, calls: list | None = None):
    """A stand-in for ``torch.cuda``-like namespaces (``torch.supa``, ``torch.npu``, ``torch.xpu``)."""
    calls = calls if calls is not None else []

    def record(what, value=None):
        def fn(*args, **kwargs):
            calls.append(what)
            return value

        return fn

    return types.SimpleNamespace(
        is_available=record("is_available", True),
        device_count=lambda: count,
        get_device_name=lambda index=0: f"Fake {name.upper()} {index}",
        mem_get_info=lambda index=0: ((10 + index) * GIB, 32 * GIB),
        max_memory_allocated=lambda *a: 123,
        max_memory_reserved=lambda *a: 456,
        empty_cache=record("empty_cache"),
        synchronize=record("synchronize"),
        is_bf16_supported=lambda: bf16,
        Event=FakeEvent,
        calls=calls,
    )


@pytest.fixture(autouse=True)
def fresh_cache(monkeypatch):
    monkeypatch.delenv("LOCAL_RANK", raising=False)
    devices.clear_cache()
    yield
    devices.clear_cache()


@pytest.fixture
def no_real_accelerator():
    if devices.get_accelerator().type != "cpu":
        pytest.skip("this machine has a real accelerator")
    devices.clear_cache()


def install(monkeypatch, kind: str, **kwargs) -> types.SimpleNamespace:
    """Make one accelerator type look present."""
    if kind in ("npu", "supa"):
        monkeypatch.setitem(sys.modules, f"torch_{kind}", types.ModuleType(f"torch_{kind}"))
    if kind == "mps":
        monkeypatch.setattr(torch.backends.mps, "is_available", lambda: True)
        return torch.mps
    if kind == "cuda":
        fake = fake_namespace("cuda", **kwargs)
        for attr in ("is_available", "device_count", "get_device_name", "mem_get_info", "is_bf16_supported",
                     "max_memory_allocated"):
            monkeypatch.setattr(torch.cuda, attr, getattr(fake, attr))
        return fake
    fake = fake_namespace(kind, **kwargs)
    monkeypatch.setattr(torch, kind, fake, raising=False)
    return fake


def test_cpu_facts(no_real_accelerator):
    acc = devices.get_accelerator()
    assert (acc.type, acc.module, acc.count, acc.label) == ("cpu", None, 0, "CPU")
    assert devices.current_device() == torch.device("cpu")
    assert devices.device_count() == 0
    assert devices.choose_dtype("auto") == torch.float32
    assert devices.choose_dtype("auto", for_training=True) == torch.float32
    assert devices.choose_dtype("bf16") == torch.bfloat16  # CPU kernels run bfloat16
    with pytest.raises(ValueError, match="float16 training is not supported on the CPU"):
        devices.choose_dtype("fp16", for_training=True)
    with pytest.raises(ValueError, match="Unknown dtype `float8`"):
        devices.choose_dtype("float8")
    free, total = devices.memory_info()
    assert 0 < free <= total
    assert devices.peak_memory() > 10 * 2**20  # a Python process with torch uses well over 10 MiB
    assert devices.pick_attention("auto") == "sdpa"
    assert devices.pick_attention("disabled") == "eager"
    with pytest.raises(ValueError, match="needs an NVIDIA GPU"):
        devices.pick_attention("flash_attention_2")
    with pytest.raises(ValueError, match="Unknown attention `magic`"):
        devices.pick_attention("magic")
    start, end = devices.make_event(), devices.make_event()
    start.record()
    end.record()
    assert start.elapsed_time(end) >= 0
    devices.synchronize()
    devices.empty_cache()
    assert devices.multiprocessing_start_method() in ("fork", "spawn", "forkserver")
    assert devices.check_kernel_booster("liger") is False
    with pytest.raises(ValueError, match="Unsloth is not supported"):
        devices.check_kernel_booster("unsloth")


@pytest.mark.parametrize("expected", ["xpu", "npu", "supa", "mps", "cuda"])
def test_preference_order(monkeypatch, no_real_accelerator, expected):
    order = ["xpu", "npu", "supa", "mps", "cuda"]
    for kind in order[order.index(expected):]:
        install(monkeypatch, kind)
    assert devices.get_accelerator().type == expected


def test_supa_rules(monkeypatch, no_real_accelerator, caplog):
    fake = install(monkeypatch, "supa", count=2, bf16=False)
    monkeypatch.setenv("LOCAL_RANK", "1")
    with caplog.at_level(logging.WARNING, logger="engine.devices"):
        acc = devices.get_accelerator()
    assert (acc.type, acc.count, acc.label, acc.module) == ("supa", 2, "SUPA", fake)
    assert "torch_supa_ext" in caplog.text  # fused operators missing: warned, not fatal
    assert devices.device_string() == "supa:1"
    assert devices.device_count() == 2
    assert devices.memory_info(1) == (11 * GIB, 32 * GIB)
    assert devices.peak_memory() == 123
    assert devices.peak_reserved_memory() == 456
    devices.empty_cache()
    devices.synchronize()
    assert {"empty_cache", "synchronize"} <= set(fake.calls)
    assert isinstance(devices.make_event(), FakeEvent)
    assert devices.is_bf16_supported() is False
    assert devices.is_fp16_supported() is True
    assert devices.choose_dtype("auto") == torch.float16
    with pytest.raises(ValueError, match="`pure_bf16` needs bfloat16"):
        devices.choose_dtype("pure_bf16", for_training=True)
    with pytest.raises(ValueError, match="bfloat16 training is not supported on this SUPA device"):
        devices.choose_dtype("bfloat16", for_training=True)
    assert devices.pick_attention("auto") == "sdpa"
    with pytest.raises(ValueError, match="not available on Biren SUPA"):
        devices.pick_attention("fa2")
    with caplog.at_level(logging.INFO, logger="engine.devices"):
        assert devices.check_kernel_booster("liger") is False
    assert "skipped on SUPA" in caplog.text
    with pytest.raises(ValueError, match="Unsloth cannot run on Biren SUPA"):
        devices.check_kernel_booster("unsloth")
    assert devices.multiprocessing_start_method() == "spawn"
    report = devices.environment_report()
    assert report["torch"].endswith("(SUPA)")
    assert [d["name"] for d in report["devices"]] == ["Fake SUPA 0", "Fake SUPA 1"]
    assert report["devices"][1]["memory_total_gib"] == 32.0
    text = devices.format_environment_report(report)
    assert "PyTorch version:" in text and "(SUPA)" in text and "supa:1 Fake SUPA 1, 32.0 GiB (11.0 GiB free)" in text


def test_supa_bf16_and_extension(monkeypatch, no_real_accelerator, caplog):
    install(monkeypatch, "supa", bf16=True)
    monkeypatch.setitem(sys.modules, "torch_supa_ext", types.ModuleType("torch_supa_ext"))
    with caplog.at_level(logging.WARNING, logger="engine.devices"):
        assert devices.get_accelerator().type == "supa"
    assert "torch_supa_ext" not in caplog.text
    assert devices.load_supa_extension() is True
    assert devices.choose_dtype("auto") == torch.bfloat16
    assert devices.choose_dtype("pure_bf16", for_training=True) == torch.bfloat16


def test_availability_is_cached(monkeypatch, no_real_accelerator):
    fake = install(monkeypatch, "supa")
    devices.get_accelerator()
    devices.get_accelerator()
    assert devices.is_supa_available()
    assert fake.calls.count("is_available") == 1
    devices.clear_cache()
    devices.get_accelerator()
    assert fake.calls.count("is_available") == 2


class _BrokenToolkit(importlib.abc.MetaPathFinder):
    """Makes ``import torch_npu`` fail the way it does without the Ascend toolkit."""

    def find_spec(self, name, path=None, target=None):
        if name == "torch_npu":
            raise RuntimeError("Failed to load the backend extension: torch_npu (libhccl.so: cannot open)")
        return None


def test_broken_vendor_package_reads_as_absent(monkeypatch, no_real_accelerator):
    monkeypatch.delitem(sys.modules, "torch_npu", raising=False)
    monkeypatch.setattr(sys, "meta_path", [_BrokenToolkit(), *sys.meta_path])
    monkeypatch.setattr(torch, "npu", fake_namespace("npu"), raising=False)
    assert devices.is_npu_available() is False
    assert devices.get_accelerator().type == "cpu"


def test_npu(monkeypatch, no_real_accelerator):
    install(monkeypatch, "npu", count=8, bf16=True)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert devices.device_string() == "npu:3"
    assert devices.choose_dtype("auto") == torch.bfloat16
    assert devices.multiprocessing_start_method() == "spawn"
    assert devices.pick_attention("flash_attention_2") == "flash_attention_2"
    with pytest.raises(ValueError, match="not available on Ascend"):
        devices.pick_attention("flash_attention_3")
    assert devices.environment_report()["torch"].endswith("(NPU)")


def test_xpu_current_device_and_liger(monkeypatch, no_real_accelerator):
    install(monkeypatch, "xpu", count=2)
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert devices.current_device() == torch.device("xpu", 1)
    monkeypatch.setattr(devices.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="liger-kernel"):
        devices.check_kernel_booster("liger")


def test_cuda(monkeypatch, no_real_accelerator):
    install(monkeypatch, "cuda", count=1, bf16=False)
    assert devices.get_accelerator().type == "cuda"
    assert devices.choose_dtype("auto") == torch.float16
    assert devices.memory_info() == (10 * GIB, 32 * GIB)
    monkeypatch.setattr(devices.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match="needs the `flash_attn` package"):
        devices.pick_attention("flash_attention_2")
    monkeypatch.setattr(devices.importlib.util, "find_spec", lambda name: object())
    assert devices.pick_attention("flash_attention_2") == "flash_attention_2"
    assert devices.multiprocessing_start_method() != "spawn" or sys.platform != "linux"


def test_mps(monkeypatch, no_real_accelerator):
    install(monkeypatch, "mps")
    assert devices.get_accelerator().type == "mps"
    assert devices.device_string() == "mps"
    assert devices.get_accelerator().label == "MPS"


def test_ray_variables(monkeypatch):
    assert "RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES" in devices.RAY_NOSET_VISIBLE_DEVICES_VARS
    for name in devices.RAY_NOSET_VISIBLE_DEVICES_VARS:
        monkeypatch.delenv(name, raising=False)
    assert devices.ray_visible_devices_env_vars() == {}
    monkeypatch.setenv("RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES", "1")
    monkeypatch.setenv("RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES", "1")
    assert devices.ray_visible_devices_env_vars() == {
        "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1", "RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES": "1"}


def test_environment_report_cpu(no_real_accelerator):
    report = devices.environment_report()
    assert report["torch"] == f"{torch.__version__} (CPU)"
    assert report["devices"] == []
    assert {"transformers", "peft", "trl", "accelerate", "datasets"} <= set(report["packages"])
    text = devices.format_environment_report(report)
    assert "- Accelerator: none (CPU only)" in text and f"- transformers version: {report['packages']['transformers']}" in text


def test_report_imports_neither_gradio_nor_vendor_packages():
    code = (
        "import sys; from engine.devices import environment_report; environment_report(); "
        "print(sorted(m for m in ('gradio', 'torch_npu', 'torch_supa') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip().splitlines()[-1] == "[]"
