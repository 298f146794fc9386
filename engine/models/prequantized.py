"""Pre-quantized checkpoints (GPTQ, AWQ, AQLM, ...: a ``quantization_config`` in the model's config.json): whether
transformers can load one here, asked before anything loads.

transformers checks a quantization method's library (and, for some, the device) only inside ``from_pretrained``,
after the tokenizer and the data are ready, and raises ``ImportError`` there: a traceback after the pre-flight check
said OK. LLaMA-Factory's qlora examples (``llama3_lora_sft_awq``, ``_gptq``, ``_aqlm``, and the qoft ones) train such
checkpoints, so this asks transformers' own quantizer for the method the same question at check time.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def quantization_config(config: dict[str, Any]) -> dict[str, Any] | None:
    """The ``quantization_config`` of a config.json, at its top or in a sub-config (``text_config`` ...), as
    transformers looks for it."""
    found = config.get("quantization_config")
    if isinstance(found, dict) and found:
        return found
    for value in config.values():
        if isinstance(value, dict) and isinstance(value.get("quantization_config"), dict) and value["quantization_config"]:
            return value["quantization_config"]
    return None


def prequantized_problem(name: str, config_file: Path | str | None) -> str | None:
    """Why the pre-quantized model ``name`` (its config.json at ``config_file``) cannot be loaded here, or None
    (not quantized, a method transformers does not know, which it loads unquantized, or nothing missing)."""
    if config_file is None:
        return None
    from engine.models.registry import read_config_text

    try:
        config = json.loads(read_config_text(config_file))
    except (OSError, ValueError, RecursionError):  # ValueError: too large, not UTF-8, not JSON
        return None  # the model check names an unreadable config.json
    quantization = quantization_config(config) if isinstance(config, dict) else None
    if quantization is None:
        return None
    from transformers.quantizers.auto import AutoHfQuantizer

    method = quantization.get("quant_method")
    malformed = (f"`{name}` has a `quantization_config` in its config.json that transformers cannot read ({{}}): the "
                 "file was edited or damaged. Restore it from where the model came from, or remove "
                 "`quantization_config` if the weights are not quantized.")
    if method is not None and not isinstance(method, str):
        return malformed.format(f"`quant_method: {json.dumps(method)[:100]}` is not a method's name such as gptq or awq")
    try:
        if not AutoHfQuantizer.supports_quant_method(quantization):
            return None
    except ValueError:  # neither a quant_method nor bitsandbytes' load_in_4bit/8bit
        return malformed.format("it names no `quant_method`, such as gptq or awq")
    method = method or "bitsandbytes"
    try:
        quantizer = AutoHfQuantizer.from_config(quantization, pre_quantized=True)
    except ImportError as err:  # some methods import their library as their config is read
        quantizer, missing = None, err
    except Exception as err:  # noqa: BLE001 - transformers validates each method's keys its own way
        return malformed.format(f"`quant_method: {method}`: {_reason(err)}")
    try:
        if quantizer is None:
            raise missing
        quantizer.validate_environment(device_map=None, weights_only=True)
    except Exception as err:  # noqa: BLE001 - ImportError, ValueError, RuntimeError, ... : say it, don't crash
        return (f"`{name}` is a pre-quantized checkpoint (`quant_method: {method}` in its config.json), and "
                f"transformers cannot load it here: {_reason(err)} Install what it names (most {method} kernels need "
                "an NVIDIA GPU), or train from the model's unquantized weights (`quantization_bit: 4` quantizes them "
                "with bitsandbytes for QLoRA).")
    return None


def _reason(err: BaseException) -> str:
    reason = " ".join(str(err).split())[:500] or type(err).__name__
    return reason + ("" if reason.endswith(".") else ".")
