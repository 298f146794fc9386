"""What parallelism is actually in effect, read from the prepared model and the process group (not the config).

The result goes into ``run.json`` as ``"parallel": {"strategy", "world_size", "sharded", "backend", ...}`` and
into the ``start`` event, so the board shows the strategy a run really used.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def _process_group() -> tuple[int, str | None]:
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), str(dist.get_backend())
    return 1, None


def _dtensor_params(model: Any) -> tuple[int, int, list[int]]:
    """(parameters that are DTensors sharded over a mesh dim, all parameters, mesh shape of the first one)."""
    try:
        from torch.distributed.tensor import DTensor, Shard
    except ImportError:  # pragma: no cover - torch without distributed
        return 0, 0, []
    sharded = total = 0
    mesh: list[int] = []
    for param in model.parameters():
        total += 1
        if isinstance(param, DTensor) and any(isinstance(p, Shard) for p in param.placements):
            sharded += 1
            if not mesh:
                mesh = list(param.device_mesh.shape)
    return sharded, total, mesh


def _numel_per_rank(model: Any) -> list[int]:
    """Elements of the parameters each rank holds locally (a collective call: every rank must make it)."""
    import torch.distributed as dist

    local = sum(int(getattr(p, "to_local", lambda p=p: p)().numel()) for p in model.parameters())
    if not (dist.is_available() and dist.is_initialized()):
        return [local]
    gathered: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(gathered, local)
    return [int(n) for n in gathered]


def describe(model: Any, wrapped: Any = None) -> dict[str, Any]:
    """The strategy in effect for ``model`` (the Trainer's ``model``) and ``wrapped`` (its ``model_wrapped``)."""
    world_size, backend = _process_group()
    info: dict[str, Any] = {"strategy": "single", "world_size": world_size, "sharded": False, "backend": backend}
    wrapped = wrapped if wrapped is not None else model
    kind = type(wrapped).__name__
    if kind == "DeepSpeedEngine":
        stage = int(getattr(wrapped, "zero_optimization_stage", lambda: 0)() or 0)
        info.update(strategy=f"deepspeed_zero{stage}", sharded=stage >= 1, zero_stage=stage)
        return info
    sharded, total, mesh = _dtensor_params(model)
    if sharded:
        info.update(strategy="fsdp2", sharded=True, sharded_params=sharded, params=total, mesh=mesh,
                    rank_numel=_numel_per_rank(model))
        return info
    try:
        from torch.distributed.fsdp import FullyShardedDataParallel
        from torch.nn.parallel import DistributedDataParallel
    except ImportError:  # pragma: no cover
        return info
    if isinstance(wrapped, FullyShardedDataParallel):
        info.update(strategy="fsdp1", sharded=True)
    elif isinstance(wrapped, DistributedDataParallel):
        info.update(strategy="ddp")
    elif world_size > 1:
        info.update(strategy="replicated")  # several processes, each with a whole unwrapped copy
    return info


def summary(info: dict[str, Any] | None) -> str:
    """A one-line text for the board: ``FSDP2 · 2 processes · sharded · gloo``."""
    if not info:
        return ""
    names = {"single": "single process", "ddp": "DDP", "fsdp2": "FSDP2", "fsdp1": "FSDP1",
             "replicated": "replicated"}
    strategy = str(info.get("strategy", ""))
    label = names.get(strategy) or strategy.replace("deepspeed_zero", "DeepSpeed ZeRO-")
    parts = [label, f"{info.get('world_size', 1)} process(es)", "sharded" if info.get("sharded") else "not sharded"]
    if info.get("backend"):
        parts.append(str(info["backend"]))
    if info.get("launcher"):
        parts.append(f"via {info['launcher']}")
    return " · ".join(parts)
