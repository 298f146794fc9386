"""LLaMA Pro's block expansion: a model with ``num_expand`` extra decoder blocks, for ``use_llama_pro`` training.

After every ``num_layers / num_expand`` original blocks a copy of the last one is inserted whose output projections
(``o_proj`` and ``down_proj``) are zero, so the expanded model computes exactly what the original did until those
blocks train (``use_llama_pro: true`` with ``freeze_trainable_layers: num_expand`` trains only them). This is what
LLaMA-Factory's ``scripts/llama_pro.py`` writes (the same weights under the same names), for Llama-style models
(Llama, Mistral, Qwen2/3, Yi). ``lf-engine expand MODEL OUTPUT --num-expand N``.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from pathlib import Path
from typing import Any

from engine.errors import UserError

logger = logging.getLogger(__name__)

ZEROED = ("o_proj", "down_proj")


def expanded_state_dict(state: dict[str, Any], num_layers: int, num_expand: int) -> OrderedDict:
    """The expanded model's weights from the original's ``state`` (names with ``.{layer}.``)."""
    import torch

    split = num_layers // num_expand
    out: OrderedDict = OrderedDict()
    count = 0
    for layer in range(num_layers):
        marker = f".{layer:d}."
        for key, value in state.items():
            if marker in key:
                out[key.replace(marker, f".{count:d}.")] = value
        count += 1
        if (layer + 1) % split == 0:
            for key, value in state.items():
                if marker in key:
                    zero = any(name in key for name in ZEROED)
                    out[key.replace(marker, f".{count:d}.")] = torch.zeros_like(value) if zero else value.clone()
            count += 1
    for key, value in state.items():
        if key not in out:
            out[key] = value
    return out


def expand_blocks(model_path: str, output_dir: str, num_expand: int, trust_remote_code: bool = False) -> Path:
    """Write the block-expanded model of ``model_path`` (config, tokenizer, safetensors weights) to ``output_dir``.

    Raises:
        UserError: when the layers cannot be split evenly, the model has no ``num_hidden_layers``, or the output
            folder is not empty.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    from engine.models.loader import resolve_model_path

    source = resolve_model_path(model_path)
    target = Path(output_dir).expanduser()
    if target.exists() and not target.is_dir():
        raise UserError(f"{target} is a file; give a new folder for the expanded model.")
    if target.exists() and any(target.iterdir()):
        raise UserError(f"{target} is not empty; give a new folder for the expanded model.")
    config = AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    num_layers = getattr(config, "num_hidden_layers", None)
    if not num_layers:
        raise UserError(f"{model_path} has no `num_hidden_layers` in its config; block expansion needs a Llama-style "
                        "decoder (Llama, Mistral, Qwen2/3, Yi).")
    if num_expand <= 0 or num_layers % num_expand:
        raise UserError(f"--num-expand must be a positive divisor of the model's {num_layers} layers (got "
                        f"{num_expand}).")
    _make_folder(target)  # before the model loads: a folder that cannot be made is said at once
    model = AutoModelForCausalLM.from_pretrained(source, dtype="auto", trust_remote_code=trust_remote_code,
                                                 use_kernels=False)  # no hub code fetched, as the loader
    state = expanded_state_dict(model.state_dict(), num_layers, num_expand)
    config.num_hidden_layers = num_layers + num_expand
    expanded = AutoModelForCausalLM.from_config(config, dtype=model.dtype, trust_remote_code=trust_remote_code)
    missing, unexpected = expanded.load_state_dict(state, strict=False)
    missing = [key for key in missing if not key.endswith("lm_head.weight")]  # tied heads come with the embeddings
    if missing or unexpected:
        raise UserError(f"{model_path}'s weights do not map onto the expanded model (missing {missing[:3]}, "
                        f"unexpected {unexpected[:3]}); block expansion needs a Llama-style decoder.")
    if getattr(config, "tie_word_embeddings", False):
        expanded.tie_weights()
    try:
        expanded.save_pretrained(target)
        AutoTokenizer.from_pretrained(source, trust_remote_code=trust_remote_code).save_pretrained(target)
    except OSError as exc:
        from engine.write_denied import write_error

        raise (write_error(exc, target, then="expand again into a new folder") or exc) from None
    logger.info("Expanded %d layers to %d in %s.", num_layers, num_layers + num_expand, target)
    return target


def _make_folder(target: Path) -> None:
    from engine.write_denied import make_new_folder

    make_new_folder(target, str(target), "give a new folder for the expanded model.", then="expand again")
