"""Which attention implementation a model loads with, from the accelerator's type alone (no torch import).

:func:`engine.devices.pick_attention` applies these rules to the accelerator this process uses; the pre-flight
checks of a process that must not import torch (the board) apply them to the accelerator its environment report
names (:func:`engine.preflight.check` with ``device=``).
"""

from __future__ import annotations

import importlib.util

from engine.errors import ModelError

ATTENTION_ALIASES = {
    "auto": "auto", "": "auto", "none": "auto",
    "sdpa": "sdpa", "eager": "eager", "disabled": "eager",
    "fa2": "flash_attention_2", "flash_attention_2": "flash_attention_2",
    "fa3": "flash_attention_3", "flash_attention_3": "flash_attention_3",
}
FLASH_ATTENTION_DEVICES = ("cuda", "npu")


def choose_attention(requested: str | None, device_type: str | None, device_label: str = "") -> str:
    """The implementation for ``requested`` on a ``device_type`` accelerator (``cuda``, ``npu``, ``supa``, ``xpu``,
    ``mps``, ``cpu``; None: not known yet, so only the name is checked). On CUDA the FlashAttention package must be
    installed in this environment.

    Raises:
        ModelError: an unknown name, or FlashAttention where the device or its package is missing.
    """
    key = str(requested or "auto").strip().lower()
    if key not in ATTENTION_ALIASES:
        raise ModelError(f"Unknown attention `{requested}`; use auto, sdpa, eager, flash_attention_2 or "
                         "flash_attention_3.")
    choice = ATTENTION_ALIASES[key]
    if choice == "auto":
        return "sdpa"
    if not choice.startswith("flash_attention") or device_type is None:
        return choice
    label = device_label or device_type.upper()
    if device_type == "supa":
        raise ModelError(f"`{choice}` is not available on Biren SUPA (no FlashAttention build exists there); "
                         "use `flash_attn: sdpa` or `auto`.")
    if device_type not in FLASH_ATTENTION_DEVICES:
        raise ModelError(f"`{choice}` needs an NVIDIA GPU (or an Ascend NPU), not {label}; use "
                         "`flash_attn: sdpa` or `auto`.")
    if device_type == "cuda":
        package = "flash_attn" if choice == "flash_attention_2" else "flash_attn_interface"
        if importlib.util.find_spec(package) is None:
            pip_name = "flash-attn" if choice == "flash_attention_2" else "flash-attn-3 (flash_attn_interface)"
            raise ModelError(f"`{choice}` needs the `{package}` package, which is not installed; install "
                             f"{pip_name} or use `flash_attn: sdpa`.")
    elif choice == "flash_attention_3":
        raise ModelError("`flash_attention_3` is not available on Ascend NPUs; use `flash_attention_2` or `sdpa`.")
    return choice
