"""Scale-out keys: Ray Train (LLaMA-Factory's names), accelerate's N-D ParallelismConfig sizes, HyperParallel.

Kept apart from ``schema.py`` (one section among the others in ``SECTIONS``); the field helper mirrors
``schema.opt`` so that this module imports nothing from the config package.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal


def _opt(default: Any, help: str, *, min: float | None = None, advanced: bool = True) -> Any:
    meta: dict[str, Any] = {"help": help, "advanced": advanced}
    if min is not None:
        meta["min"] = min
    return field(default=default, metadata=meta)


@dataclass
class ParallelArgs:
    """How a run spreads over processes beyond plain torchrun DDP/FSDP/DeepSpeed."""

    use_ray: bool = _opt(False, "Run the training through Ray Train (TorchTrainer); `USE_RAY=1` does the same.")
    ray_run_name: str | None = _opt(None, "Ray run name: results go to `<ray_storage_path>/<ray_run_name>`.")
    ray_storage_path: str = _opt("./saves", "Where Ray Train stores its results.")
    ray_storage_filesystem: Literal[None, "s3", "gs", "gcs"] = _opt(None, "Remote storage for Ray results (pyarrow).")
    ray_num_workers: int = _opt(1, "Ray training workers (one per device).", min=1)
    resources_per_worker: dict | str | None = _opt(None, 'Resources of each Ray worker, e.g. {"GPU": 1} (default: one GPU, or one CPU).')
    placement_strategy: Literal["SPREAD", "PACK", "STRICT_SPREAD", "STRICT_PACK"] = _opt(
        "PACK", "How Ray places the workers on the cluster's nodes.")
    ray_init_kwargs: dict | str | None = _opt(None, "Arguments for `ray.init` (a mapping), e.g. {\"address\": \"auto\"}.")
    dp_replicate_size: int = _opt(1, "N-D parallelism: data-parallel replicas (HSDP when combined with shards).", min=1)
    dp_shard_size: int = _opt(1, "N-D parallelism: ranks a model is sharded over (FSDP2).", min=1)
    tp_size: int = _opt(1, "N-D parallelism: tensor-parallel ranks.", min=1)
    cp_size: int = _opt(1, "N-D parallelism: context-parallel ranks (the sequence is split across them).", min=1)
    use_hyper_parallel: bool = _opt(False, "Use the optional HyperParallel backend (full fine-tuning, pt/sft only).")
    hyper_parallel_args: str | None = _opt(None, "JSON file of HyperParallel strategy arguments (tp_size, ...).")
    hyper_parallel_cp_size: int = _opt(1, "Context-parallel size used by HyperParallel.", min=1)


_EXAMPLE = {"resources_per_worker": '{"GPU": 1}', "ray_init_kwargs": '{"num_cpus": 8}'}


def _mapping(value: Any, key: str, problems: list[str]) -> dict | None:
    """A mapping given as YAML or as JSON text."""
    import json

    from engine.json_text import loads

    if value is None or isinstance(value, dict):
        return value
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            parsed = loads(value)
        except json.JSONDecodeError as err:
            problems.append(f"`{key}` is not valid JSON ({err.msg}); write it like {_EXAMPLE.get(key, '{}')}.")
            return None
        return parsed
    problems.append(f"`{key}: {value!r}` must be a mapping, e.g. {_EXAMPLE.get(key, '{}')}.")
    return None


RAY_KEYS = ("ray_num_workers", "ray_run_name", "ray_storage_path", "ray_storage_filesystem", "resources_per_worker",
            "placement_strategy", "ray_init_kwargs")
"""The keys that only act when the run goes through Ray."""


def _shown(key: str, value: Any) -> str:
    """A Ray key as the note names it: a short scalar with its value; a mapping (``ray_init_kwargs`` may carry a
    runtime_env's tokens, ``resources_per_worker``) or a long text by its name alone."""
    text = str(value)
    return f"`{key}`" if isinstance(value, (dict, list)) or len(text) > 80 else f"`{key}: {text}`"


def _note_ray_keys_without_ray(cfg: Any) -> None:
    """A note for Ray keys set away from their defaults in a run that does not go through Ray: LLaMA-Factory's ray
    example (``ray_num_workers: 4``) is launched with USE_RAY=1, and without it both there and here the run is one
    plain process, which would otherwise pass without a word."""
    import os

    from engine.train.parallel.ray_check import WORKER_FLAG, use_ray

    if use_ray(cfg) or os.environ.get(WORKER_FLAG) == "1":
        return
    defaults = ParallelArgs()
    changed = [_shown(key, getattr(cfg.parallel, key)) for key in RAY_KEYS
               if getattr(cfg.parallel, key) != getattr(defaults, key)]
    if changed:
        cfg.notes.append(f"{', '.join(changed)} ignored: this run does not go through Ray. LLaMA-Factory reads the "
                         "Ray keys only with USE_RAY=1 in the environment (`USE_RAY=1 llamafactory-cli train ...`); "
                         "set `use_ray: true` (or USE_RAY=1) to train through Ray, or remove the key(s).")


def check_parallel(cfg: Any) -> list[str]:
    """Problems with the scale-out keys that do not depend on the machine (run from the config cross-checks)."""
    par, ft, tr = cfg.parallel, cfg.finetuning, cfg.train
    problems: list[str] = []
    resources = _mapping(par.resources_per_worker, "resources_per_worker", problems)
    if resources is not None:
        bad = [k for k, v in resources.items() if not isinstance(v, (int, float)) or isinstance(v, bool) or v < 0]
        if bad:
            problems.append(f"`resources_per_worker` needs non-negative numbers; fix {', '.join(map(str, bad))}.")
        par.resources_per_worker = resources
    par.ray_init_kwargs = _mapping(par.ray_init_kwargs, "ray_init_kwargs", problems)
    _note_ray_keys_without_ray(cfg)
    if par.use_hyper_parallel:
        if ft.stage not in ("pt", "sft"):
            problems.append(f"`use_hyper_parallel` supports stages pt and sft only (this config has `{ft.stage}`).")
        if ft.finetuning_type != "full":
            problems.append(f"`use_hyper_parallel` supports full fine-tuning only; set `finetuning_type: full` "
                            f"(not `{ft.finetuning_type}`) or turn HyperParallel off.")
        if cfg.model.quantization_bit:
            problems.append("`use_hyper_parallel` cannot train a quantized model; remove `quantization_bit`.")
        if cfg.model.use_unsloth:
            problems.append("`use_hyper_parallel` cannot be combined with Unsloth; remove `use_unsloth`.")
        if any("`mixture_of_depths`" in note for note in cfg.notes):
            problems.append("`use_hyper_parallel` cannot be combined with mixture-of-depths; remove `mixture_of_depths`.")
        if tr.deepspeed:
            problems.append("`use_hyper_parallel` replaces DeepSpeed; remove `deepspeed`.")
        if par.use_ray:
            problems.append("`use_hyper_parallel` runs under torchrun, not Ray; remove `use_ray`.")
    sizes = {"dp_replicate_size": par.dp_replicate_size, "tp_size": par.tp_size, "cp_size": par.cp_size}
    if any(v > 1 for v in sizes.values()) or par.dp_shard_size > 1:
        if tr.deepspeed:
            problems.append("N-D parallelism sizes (dp_shard_size, tp_size, cp_size, ...) use FSDP2; remove "
                            "`deepspeed` or the sizes.")
        if par.cp_size > 1 and not tr.fsdp:
            problems.append("`cp_size > 1` needs FSDP2: set `fsdp: full_shard auto_wrap` (with an FSDP2 fsdp_config).")
    problems.extend(_fsdp_problems(tr))
    return problems


def _fsdp_problems(tr: Any) -> list[str]:
    """What the trainer's arguments would refuse in `fsdp`, `fsdp_config` and the layer classes (an unknown option
    such as `fsdp: foo`, an FSDP1-only option with FSDP2, settings that are no JSON object, a file that is missing),
    found before the model loads instead of when the training arguments are built after it."""
    if not (tr.fsdp or tr.fsdp_config or tr.fsdp_transformer_layer_cls_to_wrap):
        return []
    from engine.errors import UserError
    from engine.train.parallel.fsdp import resolve_fsdp

    try:
        resolve_fsdp(tr.fsdp, tr.fsdp_config, tr.fsdp_transformer_layer_cls_to_wrap)
    except UserError as err:
        return [str(err)]
    return []
