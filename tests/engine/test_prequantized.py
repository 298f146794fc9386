"""Pre-quantized checkpoints (a `quantization_config` in config.json, as LLaMA-Factory's qlora examples train: GPTQ,
AWQ, AQLM) whose quantization library is missing are named by the pre-flight check, before anything loads."""

from __future__ import annotations

import json
import shutil

import pytest

from engine.config import build_config
from engine.preflight import check
from tests.engine.tinymodels import build_tiny_model

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "version": "gemm", "zero_point": True}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "model")


def _quantized(tiny, folder, quantization, nested=False):
    shutil.copytree(tiny, folder)
    config = json.loads((folder / "config.json").read_text())
    if nested:  # a composite model's text_config holds it
        config["text_config"] = {"quantization_config": quantization}
    else:
        config["quantization_config"] = quantization
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def _cfg(model, tmp_path):
    return build_config({"model_name_or_path": str(model), "stage": "sft", "do_train": True, "finetuning_type": "lora",
                         "dataset": "demo_alpaca", "template": "chatml", "output_dir": str(tmp_path / "out")})


@pytest.mark.parametrize("nested", [False, True])
def test_a_prequantized_model_without_its_library_is_named(tiny, tmp_path, monkeypatch, nested):
    """LLaMA-Factory's train_qlora/llama3_lora_sft_awq.yaml passed `lf-engine check`; `lf-engine train` then ended in
    transformers' ImportError traceback from inside from_pretrained."""
    import transformers.quantizers.quantizer_awq as awq

    monkeypatch.setattr(awq, "is_gptqmodel_available", lambda: False)  # as on a machine without gptqmodel
    model = _quantized(tiny, tmp_path / "awq", AWQ, nested)
    problems = [p for p in check(_cfg(model, tmp_path), "train") if "pre-quantized" in p]
    assert len(problems) == 1, problems
    assert "`quant_method: awq`" in problems[0] and "requires gptqmodel" in problems[0]
    assert "quantization_bit: 4" in problems[0]
    assert problems[0].code == "model"  # the model is what to change: headed "Model" on the board, not "Device"


def test_a_plain_or_unknown_quantization_is_no_problem(tiny, tmp_path):
    assert not [p for p in check(_cfg(tiny, tmp_path), "train") if "pre-quantized" in p]
    # a method transformers does not know: it loads the weights unquantized (with its own warning), so do we
    model = _quantized(tiny, tmp_path / "odd", {"quant_method": "no_such_method", "bits": 4})
    assert not [p for p in check(_cfg(model, tmp_path), "train") if "pre-quantized" in p]


@pytest.mark.parametrize("quantization, expected", [
    ({"quant_method": ["gptq"]}, '`quant_method: ["gptq"]` is not a method\'s name'),  # was TypeError: unhashable
    ({"quant_method": None, "bits": 4}, "it names no `quant_method`"),  # was ValueError from transformers
    ({"bits": 4}, "it names no `quant_method`"),
    ({**AWQ, "version": {"x": 1}}, "`quant_method: awq`: 'dict' object has no attribute 'lower'"),  # AttributeError
    ({"quant_method": "bitsandbytes", "load_in_4bit": True, "bnb_4bit_compute_dtype": "nope"},
     "`quant_method: bitsandbytes`: module 'torch' has no attribute 'nope'"),  # AttributeError
    ({"quant_method": "gptq", "bits": "four"}, "`quant_method: gptq`: Only support quantization to [2,3,4,8] bits"),
])
def test_a_malformed_quantization_config_is_named_not_a_traceback(tiny, tmp_path, quantization, expected):
    """A config.json edited by hand or damaged: the pre-flight check raised transformers' exception (a traceback)
    or, for a bad value, told the user to install a library."""
    model = _quantized(tiny, tmp_path / "odd", quantization, nested=True)
    problems = [p for p in check(_cfg(model, tmp_path), "train") if "quantization_config" in p]
    assert len(problems) == 1 and expected in problems[0], problems
    assert "cannot read" in problems[0] and "remove `quantization_config`" in problems[0]
    assert "Install what it names" not in problems[0]
