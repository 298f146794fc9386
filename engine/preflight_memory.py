"""Pre-flight: whether a model can fit where a job will run it, estimated from its saved weights' headers.

A rough estimate (the weights, gradients and Adam moments for what trains, a floor for the rest), meant to refuse
what cannot possibly fit before anything loads, and to warn when the memory free now may not be enough.
"""

from __future__ import annotations

import logging
from pathlib import Path

from engine.config import RunConfig
from engine.safetensors_header import HeaderError, read_header

logger = logging.getLogger(__name__)


def estimate_params(folder: Path) -> tuple[int, int] | None:
    """(parameter count, bytes per parameter) read from safetensors headers or config.json; None if unknown."""
    files = sorted(folder.glob("*.safetensors"))
    if files:
        count, width = 0, 4
        for f in files:
            try:
                header = read_header(f)
            except HeaderError:
                return None  # the model check names a damaged file
            for tensor in header.tensors.values():
                n = 1
                for d in tensor.shape:
                    n *= d
                count += n
                width = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I8": 1, "U8": 1}.get(tensor.dtype, 4)
        return count, width
    return None


class _Place:
    """Where the job will run: from the device facts the board was given (its environment report, collected in a
    subprocess: the board never imports torch), or from torch here (the CLI, and the job's own check)."""

    def __init__(self, device: dict | None) -> None:
        self.given = device is not None
        if self.given:
            self.type, self.label = str(device.get("type") or ""), str(device.get("label") or device.get("type"))
            self.memory, self.bf16 = device.get("memory"), bool(device.get("bf16"))
        else:
            from engine import devices

            acc = devices.get_accelerator()
            self.type, self.label, self.memory, self.bf16 = acc.type, acc.label, None, None

    def memory_info(self) -> tuple[int, int]:
        """(free, total) bytes of the accelerator; (0, 0) when the given facts hold none."""
        if not self.given:
            from engine import devices

            return devices.memory_info()
        memory = self.memory
        return (int(memory[0]), int(memory[1])) if isinstance(memory, (list, tuple)) and len(memory) == 2 else (0, 0)

    def bf16_supported(self) -> bool:
        if self.bf16 is None:
            from engine import devices

            self.bf16 = devices.is_bf16_supported()
        return self.bf16


def _memory_budget(cfg: RunConfig, command: str, place: _Place) -> tuple[int, int, str]:
    """(free, total) bytes where the model will sit, and a phrase naming that place."""
    on_cpu = place.type == "cpu" or (command == "export" and cfg.export.export_device == "cpu")
    if on_cpu:
        import psutil

        vm = psutil.virtual_memory()
        return int(vm.available), int(vm.total), "this machine has"
    free, total = place.memory_info()
    return free, total, f"the {place.label} device has"


def _memory_need(cfg: RunConfig, command: str, params: int, stored_width: int, place: _Place) -> tuple[float, int]:
    """(bytes a job needs, bytes per weight): the weights, plus gradients and Adam moments for what trains, plus
    a floor for activations and the runtime. A rough estimate, meant to catch what cannot possibly fit."""
    on_accelerator = place.type != "cpu"
    if command == "train":
        half = cfg.train.bf16 or cfg.train.fp16 or cfg.train.pure_bf16
        width = 2 if (half and on_accelerator) or cfg.train.pure_bf16 else 4
    else:
        requested = (cfg.model.infer_dtype or "auto").lower()
        width = 4 if requested in ("float32", "fp32") or (requested == "auto" and not on_accelerator) else 2
        if command == "export" and requested == "auto":
            width = stored_width  # export keeps the stored dtype
    if cfg.model.quantization_bit:
        weights = params * cfg.model.quantization_bit / 8
    else:
        weights = params * width
    method = cfg.finetuning.finetuning_type
    if command == "export":
        need = weights * 2.2  # the merged model, and the saved one reloaded to verify it
    elif command != "train":
        need = weights * 1.1
    elif method == "full":
        need = weights + params * (4 + 8)  # gradients + Adam moments in fp32
    elif method == "freeze":
        need = weights + params * 0.25 * 12
    else:
        need = weights * 1.1
    return need + 0.5 * 2**30, width


def _memory_fixes(cfg: RunConfig, command: str, width: int, acc: _Place) -> list[str]:
    fixes = []
    if command == "train" and cfg.finetuning.finetuning_type != "lora":
        fixes.append("`finetuning_type: lora`")
    if acc.type in ("cuda", "xpu", "npu") and not cfg.model.quantization_bit:
        fixes.append("`quantization_bit: 4`")
    if command != "train" and width == 4 and acc.bf16_supported():
        fixes.append("`infer_dtype: bfloat16`")
    fixes.append("a smaller model")
    if command == "train" and acc.type in ("cuda", "npu") and not cfg.train.deepspeed:
        fixes.append("DeepSpeed ZeRO-3 with offload (`deepspeed: examples/deepspeed/ds_z3_offload.json`)")
    if acc.type == "cpu":
        fixes.append("a machine with more memory or a GPU")
    return fixes


def check_memory(cfg: RunConfig, command: str, folder: Path | None, device: dict | None = None) -> list[str]:
    """Refuse a model (in ``folder``, when it is here) that cannot fit where it will run; warn when it may not fit in
    what is free now. ``device``: the facts of the accelerator, as :func:`engine.preflight.check` takes them (then
    torch is not imported; ``{}``, facts not known yet: no estimate); None: ask torch."""
    if command not in ("train", "chat", "api", "export", "eval") or (device is not None and not device.get("type")):
        return []
    est = estimate_params(folder) if folder is not None else None
    if est is None:
        return []
    params, stored_width = est
    place = _Place(device)
    free, total, where = _memory_budget(cfg, command, place)
    if not total:
        return []
    need, width = _memory_need(cfg, command, params, stored_width, place)
    gib = 2**30
    doing = {"train": f"{cfg.finetuning.finetuning_type} training", "export": "export"}.get(command, "inference")
    if need > total:
        fixes = _memory_fixes(cfg, command, width, place)
        options = ", ".join(fixes[:-1]) + f" or {fixes[-1]}" if len(fixes) > 1 else fixes[0]
        return [
            f"The model ({params / 1e9:.2f} B parameters) needs about {need / gib:.1f} GiB for {doing}, but {where} "
            f"{total / gib:.1f} GiB in all. Use {options}."
        ]
    if need > free:
        logger.warning("The model may not fit: about %.1f GiB needed, %.1f GiB free now.", need / gib, free / gib)
    return []
