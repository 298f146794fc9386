"""N-D parallelism through accelerate's ``ParallelismConfig`` (data-parallel replicate/shard, tensor, context).

The sizes come from the config keys ``dp_replicate_size``, ``dp_shard_size``, ``tp_size`` and ``cp_size``; their
product must equal the number of processes. On CPU processes only plain sharding runs (``dp_shard_size`` equal to
the world size, which is FSDP2 itself); replication groups, tensor and context parallelism need accelerators
(their collectives and ring attention are device kernels) and are refused with that reason.
"""

from __future__ import annotations

from typing import Any

from engine.config.schema import packs_rows
from engine.errors import UserError

SIZE_KEYS = ("dp_replicate_size", "dp_shard_size", "tp_size", "cp_size")


def sizes(cfg: Any) -> dict[str, int]:
    return {key: int(getattr(cfg.parallel, key)) for key in SIZE_KEYS}


def requested(cfg: Any) -> bool:
    return any(v > 1 for v in sizes(cfg).values())


def check(cfg: Any, world_size: int, device: str) -> list[str]:
    """Problems with the N-D sizes for this world size and device (empty when none are set or they fit)."""
    if not requested(cfg):
        return []
    got = sizes(cfg)
    product = got["dp_replicate_size"] * got["dp_shard_size"] * got["tp_size"] * got["cp_size"]
    out = []
    if product != world_size:
        shown = " × ".join(f"{k} {v}" for k, v in got.items())
        out.append(f"The parallel sizes multiply to {product} ({shown}) but the run has {world_size} process(es); "
                   f"make the product equal the number of processes (e.g. dp_shard_size {world_size}).")
    if device == "cpu":
        for key in ("dp_replicate_size", "tp_size", "cp_size"):
            if got[key] > 1:
                out.append(f"`{key}: {got[key]}` needs accelerators (its collectives and attention kernels are device "
                           "kernels); on CPU processes use `dp_shard_size` (FSDP2) only. Run it on GPUs/NPUs.")
    if got["cp_size"] > 1 and packs_rows(cfg.finetuning.stage, cfg.data):
        out.append("`cp_size > 1` splits one sequence across ranks; it cannot be combined with `packing` here.")
    if got["cp_size"] > 1 and _multimodal(cfg):
        out.append("`cp_size > 1` splits each sequence across ranks, but a vision-language or audio model needs a "
                   "row's media features beside all their soft tokens (and its mask and positions whole); set "
                   "`cp_size: 1` (shard with `dp_shard_size`).")
    return out


def _multimodal(cfg: Any) -> bool:
    """Whether the config's model is a local (or demo) vision-language / audio model."""
    from pathlib import Path

    from engine.models.registry import read_local_config

    name = str(cfg.model.model_name_or_path or "").strip()
    if name.lower() == "demo-vlm":
        return True
    config = read_local_config(Path(name).expanduser()) if name and Path(name).expanduser().is_dir() else None
    return bool(config) and any(config.get(key) for key in ("vision_config", "audio_config", "thinker_config"))


def training_kwargs(cfg: Any, world_size: int, device: str) -> dict[str, Any]:
    """``{"parallelism_config": ParallelismConfig(...)}`` for TrainingArguments (or nothing). Raises UserError."""
    if not requested(cfg):
        return {}
    found = check(cfg, world_size, device)
    if found:
        raise UserError("N-D parallelism cannot run as set:\n" + "\n".join(f"  - {p}" for p in found))
    if device == "cpu":
        return {}  # dp_shard_size == world size: the FSDP2 path already shards over every process
    from accelerate.parallelism_config import ParallelismConfig

    got = sizes(cfg)
    kwargs: dict[str, Any] = dict(got)
    if got["cp_size"] > 1:
        kwargs["cp_backend"] = "torch"
    return {"parallelism_config": ParallelismConfig(**kwargs)}
