"""DeepSpeed ZeRO configs checked before launch, against the Trainer's batch sizes, precision and the world size.

transformers fills ``"auto"`` values from the training arguments; explicit values must agree with them, or
DeepSpeed fails (or silently trains a different batch) after the model has loaded. Every problem is reported
at once, each naming the key and the fix. When DeepSpeed is importable, transformers' own hand-off
(``HfTrainerDeepSpeedConfig.trainer_config_process``) is run on the config too.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Any

from engine.errors import UserError
from engine.wording import counted

OFFLOAD_DEVICES = ("cpu", "nvme", "none")


class DeepSpeedConfigError(UserError):
    """A DeepSpeed config that cannot work with this run."""


def load(path: str) -> dict[str, Any]:
    """The DeepSpeed config ``deepspeed: path`` names, read only as a regular file of a bounded size (this runs in
    the board's check too: a named pipe held it, a sparse file of gigabytes was read whole).

    Raises:
        DeepSpeedConfigError: missing, no regular file, outsized, unreadable, not JSON or no object, with the fix.
    """
    from engine.small_json import read_named_json

    return read_named_json("deepspeed", path, "DeepSpeed", "examples/deepspeed/ds_z3.json", DeepSpeedConfigError)


def _explicit(value: Any) -> bool:
    return value is not None and value != "auto"


def problems(ds: dict[str, Any], cfg: Any, world_size: int) -> list[str]:
    """Every inconsistency between a DeepSpeed config and the run (empty when it can work)."""
    tr = cfg.train
    out: list[str] = []
    zero = ds.get("zero_optimization") or {}
    if not isinstance(zero, dict):
        return ["`zero_optimization` must be a JSON object with a `stage`."]
    stage = zero.get("stage", 0)
    if stage not in (0, 1, 2, 3):
        out.append(f"`zero_optimization.stage: {stage}` is not a ZeRO stage; use 0, 1, 2 or 3.")
        stage = 0
    for key in ("offload_optimizer", "offload_param"):
        offload = zero.get(key)
        if offload is None:
            continue
        if not isinstance(offload, dict):
            out.append(f"`zero_optimization.{key}` must be an object like {{\"device\": \"cpu\"}}.")
            continue
        device = offload.get("device", "none")
        if device not in OFFLOAD_DEVICES:
            out.append(f"`zero_optimization.{key}.device: {device}` is unknown; use cpu, nvme or none.")
        if device == "nvme" and not offload.get("nvme_path"):
            out.append(f"`zero_optimization.{key}` offloads to nvme but has no `nvme_path`; add the folder.")
        if key == "offload_param" and device != "none" and stage != 3:
            out.append(f"`offload_param` needs ZeRO stage 3 (this config has stage {stage}); set `stage: 3` or "
                       "offload the optimizer only (`offload_optimizer`).")
        if key == "offload_optimizer" and device != "none" and stage == 0:
            out.append("`offload_optimizer` needs ZeRO stage 1, 2 or 3; raise `zero_optimization.stage`.")
    micro, accum, total = (ds.get("train_micro_batch_size_per_gpu"), ds.get("gradient_accumulation_steps"),
                           ds.get("train_batch_size"))
    if _explicit(micro) and micro != tr.per_device_train_batch_size:
        out.append(f"`train_micro_batch_size_per_gpu: {micro}` differs from `per_device_train_batch_size: "
                   f"{tr.per_device_train_batch_size}`; set it to \"auto\" or to the same number.")
    if _explicit(accum) and accum != tr.gradient_accumulation_steps:
        out.append(f"DeepSpeed `gradient_accumulation_steps: {accum}` differs from the run's "
                   f"{tr.gradient_accumulation_steps}; set it to \"auto\" or to the same number.")
    want = tr.per_device_train_batch_size * tr.gradient_accumulation_steps * world_size
    if _explicit(total) and total != want:
        out.append(f"`train_batch_size: {total}` must equal per-device batch × accumulation × processes = "
                   f"{tr.per_device_train_batch_size} × {tr.gradient_accumulation_steps} × {world_size} = {want}; "
                   "set it to \"auto\".")
    clip = ds.get("gradient_clipping")
    if _explicit(clip) and float(clip) != float(tr.max_grad_norm):
        out.append(f"`gradient_clipping: {clip}` differs from `max_grad_norm: {tr.max_grad_norm}`; set it to \"auto\".")
    for name, flag in (("bf16", tr.bf16 or tr.pure_bf16), ("fp16", tr.fp16)):
        enabled = (ds.get(name) or {}).get("enabled") if isinstance(ds.get(name), dict) else None
        if _explicit(enabled) and bool(enabled) != bool(flag):
            out.append(f"DeepSpeed `{name}.enabled: {str(enabled).lower()}` but the run has `{name}: "
                       f"{str(bool(flag)).lower()}`; set `{name}.enabled` to \"auto\".")
    if stage >= 2 and cfg.model.quantization_bit:
        out.append(f"ZeRO-{stage} cannot partition a quantized model (`quantization_bit: "
                   f"{cfg.model.quantization_bit}`); use ZeRO-0/1 or remove `quantization_bit`.")
    if stage == 3 and zero.get("stage3_gather_16bit_weights_on_model_save") is False:
        out.append("ZeRO-3 with `stage3_gather_16bit_weights_on_model_save: false` saves no loadable model (only "
                   "DeepSpeed shards); set it to true so rank 0 writes a whole model.")
    return out


def trainer_handoff(ds: dict[str, Any], training_args: Any) -> dict[str, Any]:
    """transformers' own DeepSpeed hand-off (fills "auto", checks mismatches); needs DeepSpeed installed."""
    from transformers.integrations.deepspeed import HfTrainerDeepSpeedConfig

    hf_ds = HfTrainerDeepSpeedConfig(json.loads(json.dumps(ds)))
    try:
        hf_ds.trainer_config_process(training_args)
    except ValueError as err:
        raise DeepSpeedConfigError(f"The DeepSpeed config does not match the training arguments: {err}") from None
    if hf_ds.mismatches:  # transformers only raises these once the model is built; report them now
        raise DeepSpeedConfigError("The DeepSpeed config does not match the training arguments:\n" +
                                   "\n".join(hf_ds.mismatches) + "\nSet those DeepSpeed values to \"auto\".")
    return hf_ds.config


CPU_REFUSAL = ("DeepSpeed ZeRO runs on accelerators only: on CPU processes accelerate ignores the DeepSpeed config "
               "and trains plain DDP. Use FSDP2 to shard on CPUs (`fsdp: full_shard auto_wrap`), or run on GPUs/NPUs.")


def preflight_problems(cfg: Any, world_size: int, device: str) -> list[str]:
    """The config checks for the pre-flight report (installation and file existence are checked there)."""
    path = cfg.train.deepspeed
    if not path or not Path(path).expanduser().exists():  # named as missing there; a pipe or folder by load()
        return []
    try:
        found = problems(load(path), cfg, world_size)
    except DeepSpeedConfigError as err:
        return [str(err)]
    return found + ([CPU_REFUSAL] if device == "cpu" else [])


def validate(cfg: Any, world_size: int, device: str | None = None) -> dict[str, Any] | None:
    """Load and check ``cfg.train.deepspeed`` (None when unset). Raises DeepSpeedConfigError with every problem.

    ``device`` ``"cpu"`` refuses the run: accelerate hands CPU runs to plain DDP and ignores the DeepSpeed config,
    so the run would silently not be what was asked for.
    """
    path = cfg.train.deepspeed
    if not path:
        return None
    ds = load(path)
    found = problems(ds, cfg, world_size)
    if device == "cpu":
        found.append(CPU_REFUSAL)
    if importlib.util.find_spec("deepspeed") is None:
        found.append("`deepspeed` is set but DeepSpeed is not installed: `pip install 'lf-board[deepspeed]'`.")
    if found:
        raise DeepSpeedConfigError(f"{counted(len(found), 'problem')} with `deepspeed: {path}`:\n" +
                                   "\n".join(f"  - {p}" for p in found))
    return ds
