"""Checks run before a job starts, so that mistakes surface as one clear message instead of a traceback later.

``check(cfg, command)`` returns a list of problems (empty when all is well); each names the fix. It loads no
model weights: only small files (config.json, dataset_info.json, file sizes) are read.
"""

from __future__ import annotations

import json
import logging
import re
from pathlib import Path

from engine.config import RunConfig

logger = logging.getLogger(__name__)

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
BYTES_PER_DTYPE = {"float32": 4, "float16": 2, "bfloat16": 2, "float64": 8, "int8": 1}


def check(cfg: RunConfig, command: str = "train") -> list[str]:
    """Every problem found in the config for ``command`` (train, eval, export, chat, api)."""
    problems: list[str] = []
    problems += _check_model(cfg)
    problems += _check_template(cfg)
    if command in ("train", "eval"):
        problems += _check_data(cfg, command)
        problems += _check_output(cfg, command)
        problems += _check_precision(cfg)
        if command == "train":
            problems += _check_memory(cfg)
    if command == "export":
        if not cfg.export.export_dir:
            problems.append("`export_dir` is not set: name the folder the merged model should go to.")
        if cfg.export.export_quantization_bit:
            problems.append("`export_quantization_bit` is not supported; remove it (export in float16/bfloat16).")
    return problems


def model_dir(cfg: RunConfig) -> Path | None:
    """The local folder of the base model, if it is one (the demo counts once built)."""
    name = cfg.model.model_name_or_path
    if name == "demo":
        return None
    p = Path(name).expanduser()
    return p if p.is_dir() else None


def _check_model(cfg: RunConfig) -> list[str]:
    problems = []
    name = cfg.model.model_name_or_path
    if not name:
        return ["`model_name_or_path` is empty: give a local model folder, a hub id, or `demo`."]
    if name != "demo":
        p = Path(name).expanduser()
        if p.exists() and not p.is_dir():
            problems.append(f"`model_name_or_path: {name}` is a file; give the model's folder.")
        elif p.is_dir() and not (p / "config.json").is_file():
            problems.append(f"`model_name_or_path: {name}` has no config.json; is it a Hugging Face model folder?")
        elif not p.exists() and not HUB_ID.match(name):
            problems.append(f"`model_name_or_path: {name}` does not exist; check the path (or use `demo`).")
    for adapter in filter(None, (cfg.model.adapter_name_or_path or "").split(",")):
        a = Path(adapter.strip()).expanduser()
        if not a.is_dir():
            problems.append(f"`adapter_name_or_path: {adapter}` does not exist; give an adapter folder.")
        elif not (a / "adapter_config.json").is_file():
            problems.append(f"`adapter_name_or_path: {adapter}` has no adapter_config.json; is it a LoRA adapter?")
    return problems


def _check_template(cfg: RunConfig) -> list[str]:
    if not cfg.model.template:
        return []
    try:
        from engine.templates import list_templates
    except ImportError:
        return []
    names = list_templates()
    if cfg.model.template not in names:
        import difflib

        close = difflib.get_close_matches(cfg.model.template, names, n=1)
        hint = f" Did you mean `{close[0]}`?" if close else f" Valid: {', '.join(names)}."
        return [f"Unknown template `{cfg.model.template}`.{hint}"]
    return []


def _check_data(cfg: RunConfig, command: str) -> list[str]:
    from engine.data.registry import check_datasets

    problems = []
    stage = cfg.finetuning.stage
    if command == "train" and cfg.train.do_train and not cfg.data.dataset:
        problems.append("`dataset` is empty: name one or more datasets from dataset_info.json (comma separated).")
    if command == "eval" and not (cfg.data.eval_dataset or cfg.data.dataset):
        problems.append("Evaluation needs data: set `eval_dataset` (or `dataset` with `val_size`).")
    for key in ("dataset", "eval_dataset"):
        names = getattr(cfg.data, key)
        if names:
            problems += check_datasets(cfg.data.dataset_dir, names, stage, key=key)
    return problems


def _check_output(cfg: RunConfig, command: str) -> list[str]:
    from engine.errors import UserError
    from engine.train.workflow import check_output_dir, resolve_resume

    problems = []
    if command == "train":
        try:
            check_output_dir(cfg)
            resolve_resume(cfg)
        except UserError as err:
            problems.append(str(err))
    return problems


def _check_precision(cfg: RunConfig) -> list[str]:
    from engine import devices

    problems = []
    acc = devices.get_accelerator()
    if (cfg.train.bf16 or cfg.train.pure_bf16) and not devices.is_bf16_supported():
        problems.append(f"`bf16` is set but {acc.type} has no bfloat16 support here; use `fp16` or neither.")
    if cfg.train.fp16 and acc.type == "cpu":
        problems.append("`fp16: true` does not work on the CPU; remove it (use `bf16: true` or full precision).")
    return problems


def estimate_params(folder: Path) -> tuple[int, int] | None:
    """(parameter count, bytes per parameter) read from safetensors headers or config.json; None if unknown."""
    files = sorted(folder.glob("*.safetensors"))
    if files:
        count, width = 0, 4
        for f in files:
            try:
                with open(f, "rb") as fh:
                    size = int.from_bytes(fh.read(8), "little")
                    header = json.loads(fh.read(size))
            except (OSError, ValueError):
                return None
            for key, meta in header.items():
                if key == "__metadata__":
                    continue
                n = 1
                for d in meta.get("shape", []):
                    n *= d
                count += n
                width = {"F32": 4, "F16": 2, "BF16": 2, "F64": 8, "I8": 1, "U8": 1}.get(meta.get("dtype"), 4)
        return count, width
    return None


def _check_memory(cfg: RunConfig) -> list[str]:
    folder = model_dir(cfg)
    if folder is None:
        return []
    est = estimate_params(folder)
    if est is None:
        return []
    params, width = est
    from engine import devices

    free, total = devices.memory_info()
    if not total:
        return []
    method = cfg.finetuning.finetuning_type
    train_width = 2 if (cfg.train.bf16 or cfg.train.fp16 or cfg.train.pure_bf16) else 4
    if cfg.model.quantization_bit:
        weights = params * cfg.model.quantization_bit / 8
    else:
        weights = params * (train_width if devices.get_accelerator().type != "cpu" else 4)
    if method == "full":
        need = weights + params * (4 + 8)  # gradients + Adam moments in fp32
    elif method == "freeze":
        need = weights + params * 0.25 * 12
    else:
        need = weights * 1.1
    need += 0.5 * 2**30  # activations and runtime, a floor
    gib = 2**30
    if need > total:
        return [
            f"The model ({params / 1e9:.2f} B parameters) needs about {need / gib:.1f} GiB for {method} training but the "
            f"device has {total / gib:.1f} GiB in all. Use `finetuning_type: lora`, `quantization_bit: 4`, a smaller "
            "model, or DeepSpeed ZeRO-3 with offload (`deepspeed: examples/deepspeed/ds_z3_offload.json`)."
        ]
    if need > free:
        logger.warning("The model may not fit: about %.1f GiB needed, %.1f GiB free now.", need / gib, free / gib)
    return []
