"""The strategy check before a run starts: estimated memory per device, and refusals that name the fix.

Strategies: ``single`` (one process), ``ddp`` (replicated, gradients all-reduced), ``fsdp2`` (parameters,
gradients and optimizer states sharded with ``fully_shard``), ``deepspeed_zero2`` (gradients and optimizer
states partitioned), ``deepspeed_zero3`` (parameters too) and ``ray`` (Ray Train workers running DDP).
The estimate is the usual back-of-the-envelope: weights + gradients + Adam states (+ fp32 master weights under
mixed precision), divided by the number of processes where the strategy shards them, plus activations.
"""

from __future__ import annotations

import importlib.util
import logging
import math
import os
from dataclasses import dataclass, field
from typing import Any

from engine.wording import counted

logger = logging.getLogger(__name__)

STRATEGIES = ("single", "ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3", "ray")
MULTI_PROCESS = ("ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3", "ray")
GIB = 2**30


@dataclass
class ModelShape:
    """What the estimate needs from a model config."""

    params: int
    hidden: int
    layers: int
    vocab: int
    heads: int
    linear_in_out: int  # sum of (in + out) features over the decoder's linear layers (LoRA size = rank × this)


@dataclass
class Plan:
    strategy: str
    nproc: int
    per_device_gb: float | None = None
    available_gb: float | None = None
    device: str = "cpu"
    breakdown: dict[str, float] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def model_shape(model_name_or_path: str) -> ModelShape:
    """Count a model's parameters from its config alone (an empty model on the meta device; no weights read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from engine.models.loader import resolve_model_path

    config = AutoConfig.from_pretrained(resolve_model_path(model_name_or_path))
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    params = sum(p.numel() for p in model.parameters())
    linear = 0
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear) and "lm_head" not in name:
            linear += module.in_features + module.out_features
    return ModelShape(params=params, hidden=int(getattr(text, "hidden_size", 0) or 0),
                      layers=int(getattr(text, "num_hidden_layers", 0) or 0),
                      vocab=int(getattr(text, "vocab_size", 0) or 0),
                      heads=int(getattr(text, "num_attention_heads", 1) or 1), linear_in_out=linear)


def _dtype_bytes(cfg: Any) -> tuple[float, bool]:
    """(bytes per stored weight, mixed precision?)."""
    tr = cfg.train
    if getattr(cfg.model, "quantization_bit", None):
        return cfg.model.quantization_bit / 8, False
    if tr.pure_bf16:
        return 2, False
    return 4, bool(tr.bf16 or tr.fp16)  # weights load in fp32 for training; autocast computes in 16 bits


def estimate(cfg: Any, shape: ModelShape, strategy: str, nproc: int) -> dict[str, float]:
    """Bytes per device by part: weights, gradients, optimizer, activations."""
    ft, tr = cfg.finetuning, cfg.train
    weight_bytes, mixed = _dtype_bytes(cfg)
    if ft.finetuning_type == "lora":
        trainable = ft.lora_rank * shape.linear_in_out
    elif ft.finetuning_type == "freeze":
        trainable = shape.params * max(1, abs(getattr(ft, "freeze_trainable_layers", 2))) / max(shape.layers, 1)
    else:
        trainable = shape.params
    weights = shape.params * weight_bytes + (trainable * 4 if ft.finetuning_type == "lora" else 0)
    grads = trainable * 4
    optim = trainable * (8 if "adam" in str(tr.optim) or ft.use_muon else 4)
    n = max(nproc, 1)
    if strategy in ("fsdp2", "deepspeed_zero3"):
        weights, grads, optim = weights / n, grads / n, optim / n
    elif strategy == "deepspeed_zero2":
        grads, optim = grads / n, optim / n
    seq = cfg.data.cutoff_len
    batch = tr.per_device_train_batch_size
    act_bytes = 2 if (mixed or tr.pure_bf16) else 4
    per_layer = seq * batch * shape.hidden * (2 if tr.gradient_checkpointing else 17) * act_bytes
    attention = 0 if tr.gradient_checkpointing else 2.5 * shape.heads * seq * seq * batch * act_bytes
    activations = shape.layers * (per_layer + attention) + batch * seq * shape.vocab * 4  # + fp32 logits
    return {"weights": weights, "gradients": grads, "optimizer": optim, "activations": activations}


@dataclass
class DeviceFacts:
    """What the check needs from this machine's devices: the preferred accelerator (``cpu`` when none), how many are
    visible, and the memory of one (bytes; None on the CPU, whose RAM :func:`_available` reads itself)."""

    type: str
    count: int
    memory: float | None = None


def device_facts() -> DeviceFacts:
    """This machine's :class:`DeviceFacts` (imports torch through :mod:`engine.devices`)."""
    from engine import devices

    acc = devices.get_accelerator()
    memory = None
    if acc.type != "cpu":
        try:
            memory = float(devices.memory_info(0)[1])
        except Exception:  # noqa: BLE001 - an unknown device: no figure
            memory = None
    return DeviceFacts(type=acc.type, count=acc.count, memory=memory)


def _available(device: str, nproc: int, memory: float | None) -> float | None:
    """Bytes each process can use: the accelerator's memory, or the machine's RAM shared by the processes."""
    if device != "cpu":
        return memory
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None
    return total / max(nproc, 1)


def check(cfg: Any, strategy: str, nproc: int, *, shape: ModelShape | None = None, shape_error: str | None = None,
          device: str | None = None, device_count: int | None = None, facts: DeviceFacts | None = None) -> Plan:
    """Refusals and the memory estimate for running ``cfg`` with ``strategy`` on ``nproc`` processes.

    ``facts`` (this machine's devices) and ``shape`` (the model's), or ``shape_error`` (why the model's shape could
    not be read), may come from elsewhere: the board reads both once in a subprocess and checks every form in its
    own process, which never imports torch. What is not given is read here (with torch)."""
    plan = Plan(strategy=strategy, nproc=nproc)
    if strategy not in STRATEGIES:
        plan.problems.append(f"Unknown strategy `{strategy}`; use one of {', '.join(STRATEGIES)}.")
        return plan
    facts = facts or device_facts()
    plan.device = device or facts.type
    count = device_count if device_count is not None else facts.count
    ft, model = cfg.finetuning, cfg.model
    if strategy == "single" and nproc != 1:
        plan.problems.append("A single-process run uses 1 process; set processes to 1, or pick DDP or FSDP2.")
    if strategy in MULTI_PROCESS and strategy != "ray" and nproc < 2:
        plan.problems.append(f"{strategy} needs at least 2 processes; raise the number of processes or pick single.")
    if plan.device != "cpu" and strategy != "ray" and nproc > count:
        plan.problems.append(f"{nproc} processes but only {counted(count, plan.device + ' device')} {'is' if count == 1 else 'are'} visible; use at most "
                             f"{count} processes (one per device), or make more devices visible.")
    if plan.device == "cpu" and nproc > (os.cpu_count() or 1):
        plan.notes.append(f"{nproc} processes on {os.cpu_count()} CPU cores: they will share cores (slow).")
    if strategy in ("fsdp2", "deepspeed_zero2", "deepspeed_zero3") and model.quantization_bit:
        plan.problems.append(f"{strategy} cannot shard a quantized model (`quantization_bit: "
                             f"{model.quantization_bit}`); remove `quantization_bit`, or pick DDP (QLoRA on each "
                             "device).")
    if strategy == "fsdp2" and plan.device == "cpu" and ft.stage not in ("pt", "sft"):
        plan.problems.append(f"FSDP2 on CPU processes is wired for stages pt and sft (this run is `{ft.stage}`); "
                             "pick DDP, or run on accelerators.")
    if strategy.startswith("deepspeed"):
        if importlib.util.find_spec("deepspeed") is None:
            plan.problems.append("DeepSpeed is not installed; `pip install 'lf-board[deepspeed]'`, or pick FSDP2.")
        if plan.device == "cpu":
            plan.problems.append("DeepSpeed ZeRO runs on accelerators only here (accelerate hands CPU runs to plain "
                                 "DDP); pick FSDP2 to shard on CPUs, or run on GPUs/NPUs.")
    if cfg.train.deepspeed:
        from engine.train.parallel import deepspeed as ds_check

        try:
            plan.problems.extend(ds_check.problems(ds_check.load(cfg.train.deepspeed), cfg, nproc))
        except ds_check.DeepSpeedConfigError as err:
            plan.problems.append(str(err))
    from engine.train.parallel import nd

    plan.problems.extend(nd.check(cfg, nproc, plan.device))
    if strategy == "ray" and importlib.util.find_spec("ray") is None:
        plan.problems.append("Ray is not installed; `pip install 'ray[train]'`, or pick DDP (torchrun) instead.")
    if getattr(model, "use_unsloth", False) and strategy != "single":
        plan.problems.append("Unsloth trains on one device only; pick single.")
    if shape is None and shape_error is None:
        try:
            shape = model_shape(model.model_name_or_path)
        except Exception as err:  # noqa: BLE001 - no config readable: no estimate, but the other checks stand
            shape_error = str(err)
    if shape is None:
        plan.notes.append(f"No memory estimate: the model config could not be read ({shape_error}).")
        return plan
    parts = estimate(cfg, shape, strategy, nproc)
    need = sum(parts.values())
    plan.breakdown = {k: round(v / GIB, 3) for k, v in parts.items()}
    plan.per_device_gb = round(need / GIB, 3)
    avail = _available(plan.device, nproc, facts.memory if plan.device == facts.type else None)
    plan.available_gb = round(avail / GIB, 2) if avail else None
    if avail and need > avail:
        fixes = []
        if ft.finetuning_type == "full":
            fixes.append("LoRA (`finetuning_type: lora`)")
        if strategy in ("single", "ddp", "ray", "deepspeed_zero2"):
            fixes.append("FSDP2 or DeepSpeed ZeRO-3 over more processes")
        if not cfg.train.gradient_checkpointing:
            fixes.append("`gradient_checkpointing: true`")
        fixes.append("a smaller `per_device_train_batch_size` or `cutoff_len`")
        plan.problems.append(f"Estimated {plan.per_device_gb:.2f} GiB per device but {plan.device} has "
                             f"{plan.available_gb:.2f} GiB; try {', '.join(fixes)}.")
    return plan


def launch_keys(strategy: str, nproc: int, *, repo_root: str, device: str = "cpu") -> dict[str, Any]:
    """Config keys a strategy sets (the launcher itself is torchrun or Ray)."""
    if strategy == "fsdp2":
        return {"fsdp": "full_shard auto_wrap", "fsdp_config": os.path.join(repo_root, "examples", "fsdp", "fsdp2.json")}
    if strategy == "deepspeed_zero2":
        return {"deepspeed": os.path.join(repo_root, "examples", "deepspeed", "ds_z2.json")}
    if strategy == "deepspeed_zero3":
        return {"deepspeed": os.path.join(repo_root, "examples", "deepspeed", "ds_z3.json")}
    if strategy == "ray":
        resource = {"CPU": 1} if device == "cpu" else {"GPU": 1}
        return {"use_ray": True, "ray_num_workers": nproc, "resources_per_worker": resource}
    return {}


def format_gb(value: float | None) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "?"
    return f"{value:.2f}"
