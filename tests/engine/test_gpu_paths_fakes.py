"""GPU-only paths checked on the CPU with fakes: QLoRA, Liger, DeepSpeed, Unsloth."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest
import torch

from engine.config import ConfigError, build_config
from tests.engine.tinymodels import build_tiny_model


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


@pytest.mark.parametrize("keys, quant_type, double", [
    ({}, "nf4", True),
    # as LlamaBoard writes a QLoRA run's config, and LLaMA-Factory's other 4-bit type
    ({"quantization_method": "bnb", "double_quantization": False, "quantization_type": "fp4"}, "fp4", False),
])
def test_qlora_config_reaches_the_loader_and_the_model_is_prepared(tiny, monkeypatch, keys, quant_type, double):
    import peft
    from transformers import LlamaForCausalLM

    import engine.models.loader as loader

    gated, loaded, prepared = [], {}, {}
    monkeypatch.setattr(loader, "check_quantization", lambda bits: gated.append(bits))
    real_from_pretrained = LlamaForCausalLM.from_pretrained.__func__

    def fake_from_pretrained(cls, path, **kwargs):
        loaded.update(kwargs)
        kwargs = {k: v for k, v in kwargs.items() if k not in ("quantization_config", "device_map")}
        return real_from_pretrained(cls, path, **kwargs)

    def fake_prepare(model, use_gradient_checkpointing=True, **kwargs):
        prepared["checkpointing"] = use_gradient_checkpointing
        return model

    monkeypatch.setattr(LlamaForCausalLM, "from_pretrained", classmethod(fake_from_pretrained))
    monkeypatch.setattr(peft, "prepare_model_for_kbit_training", fake_prepare)
    cfg = build_config({"model_name_or_path": str(tiny), "quantization_bit": 4, "gradient_checkpointing": True,
                        **keys})
    model = loader.load_model(cfg.model, cfg.finetuning, loader.load_tokenizer(cfg.model), is_trainable=True,
                              train_args=cfg.train)
    quant = loaded["quantization_config"]
    assert gated == [4] and quant.load_in_4bit and quant.bnb_4bit_quant_type == quant_type
    assert quant.bnb_4bit_use_double_quant is double and quant.bnb_4bit_compute_dtype == torch.float32
    assert loaded["device_map"] == {"": torch.device("cpu")}
    assert prepared == {"checkpointing": True}
    assert type(model).__name__ == "PeftModelForCausalLM"


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without a GPU")
def test_quantization_without_a_gpu_is_refused():
    from engine.errors import ModelError
    from engine.models.loader import check_quantization

    with pytest.raises(ModelError, match="needs a GPU"):
        check_quantization(4)


def test_liger_is_applied_to_the_model_when_the_device_allows(tiny, monkeypatch):
    import engine.models.loader as loader

    applied = []
    fake = types.ModuleType("liger_kernel.transformers")
    fake._apply_liger_kernel_to_instance = lambda model: applied.append(model.config.model_type)
    monkeypatch.setitem(sys.modules, "liger_kernel", types.ModuleType("liger_kernel"))
    monkeypatch.setitem(sys.modules, "liger_kernel.transformers", fake)
    monkeypatch.setattr(loader.devices, "check_kernel_booster", lambda name: name == "liger")
    cfg = build_config({"model_name_or_path": str(tiny), "enable_liger_kernel": True, "finetuning_type": "full"})
    loader.load_model(cfg.model, cfg.finetuning, is_trainable=True, train_args=cfg.train)
    assert applied == ["llama"]


def test_liger_is_skipped_on_the_cpu(tiny):
    from engine import devices

    assert devices.check_kernel_booster("liger") is False


def test_deepspeed_config_reaches_the_training_arguments(tmp_path, monkeypatch):
    import importlib.util

    from engine.errors import UserError
    from engine.train.arguments import training_kwargs

    ds = tmp_path / "ds_z2.json"
    ds.write_text('{"zero_optimization": {"stage": 2}}')
    cfg = build_config({"deepspeed": str(ds)})
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: object() if n == "deepspeed" else real(n, *a))
    assert training_kwargs(cfg, has_eval=False)["deepspeed"] == str(ds)
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "deepspeed" else real(n, *a))
    with pytest.raises(UserError, match="DeepSpeed is not installed"):
        training_kwargs(cfg, has_eval=False)


def test_unsloth_is_refused_with_the_reason():
    with pytest.raises(ConfigError, match="`use_unsloth: true` is not supported"):
        build_config({"use_unsloth": True})
