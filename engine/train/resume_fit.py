"""Whether a checkpoint fits the run that resumes it: the same method (an adapter or the full weights), LoRA rank and
trained modules. Otherwise transformers fails deep inside its load, after the model and data have loaded, with a
shape or optimizer-group error and a traceback.

``check_fits`` compares what the checkpoint's files say before anything loads (the pre-flight check runs it too);
``guard_loads`` turns the errors of transformers' own checkpoint loads into a user error that names the settings the
checkpoint was saved with, for the mismatches the files alone do not show (another base model, other targets).
"""

from __future__ import annotations

import logging
import pickle
from pathlib import Path
from typing import Any

from engine.checkpoints import read_adapter_config, read_saved_config
from engine.config import RunConfig
from engine.errors import UserError

logger = logging.getLogger(__name__)
_WARNED: set[str] = set()

ADAPTER_FILES = ("adapter_model.safetensors", "adapter_model.bin")
FULL_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin", "pytorch_model.bin.index.json")
ADAPTER_METHODS = {"lora": "LORA", "oft": "OFT"}
# settings that decide which weights a run trains, and so the shapes of the checkpoint's weights and optimizer state
SHAPING = ("model_name_or_path", "finetuning_type", "lora_rank", "lora_target", "additional_target", "use_dora",
           "freeze_trainable_layers", "freeze_trainable_modules", "freeze_extra_modules", "use_llama_pro",
           "freeze_vision_tower", "freeze_multi_modal_projector", "freeze_language_model", "resize_vocab",
           "add_tokens", "add_special_tokens", "quantization_bit", "stage")


def _current(cfg: RunConfig) -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for section in (cfg.model, cfg.finetuning):
        flat.update(vars(section))
    return flat


def differences(cfg: RunConfig, folder: Path) -> list[str]:
    """``key: saved -> now`` for each weight-shaping setting the checkpoint was saved with that this run changes."""
    saved, now = read_saved_config(folder), _current(cfg)
    return [f"`{key}: {saved[key]}` (this run: `{now.get(key)}`)" for key in SHAPING
            if key in saved and key in now and saved[key] != now.get(key)]


def _refuse(value: Any, what: str, fix: str) -> UserError:
    return UserError(f"`resume_from_checkpoint: {value}` {what}. {fix} Or remove `resume_from_checkpoint` to start "
                     "a new run.")


def _note_missing_state(folder: Path) -> None:
    """transformers resumes without optimizer.pt or scheduler.pt and says nothing: the optimizer's moments start
    from zero, and the learning-rate schedule from its first step (warmup again) while the step count goes on."""
    names = {p.name for p in folder.iterdir()}
    missing = [] if any(n.startswith("optimizer") for n in names) else ["optimizer.pt (the optimizer's state)"]
    if "scheduler.pt" not in names:
        missing.append("scheduler.pt (the learning-rate schedule's position)")
    if not missing or any(n.startswith("global_step") for n in names) or f"state:{folder}" in _WARNED:
        return  # DeepSpeed keeps both in global_step*
    _WARNED.add(f"state:{folder}")
    logger.warning("`%s` has no %s: training resumes from its weights and step, but %s start anew.", folder,
                   " and no ".join(missing), "they" if len(missing) > 1 else "that")


def check_fits(cfg: RunConfig, folder: Path) -> None:
    """Refuse a checkpoint whose weights cannot be loaded into this run's setup (method, adapter type, LoRA rank)."""
    _note_missing_state(folder)
    ft = cfg.finetuning
    has_adapter = any((folder / name).is_file() for name in ADAPTER_FILES)
    has_full = any((folder / name).is_file() for name in FULL_FILES)
    saved = read_saved_config(folder)
    was = f"a `finetuning_type: {saved['finetuning_type']}` run" if isinstance(saved.get("finetuning_type"), str) \
        else "another run"
    fix = "Resume it with the settings it was trained with."
    if ft.finetuning_type in ADAPTER_METHODS and has_full and not has_adapter:
        raise _refuse(folder, f"holds full model weights (saved by {was}), but this run trains a "
                      f"`{ft.finetuning_type}` adapter", fix)
    if ft.finetuning_type not in ADAPTER_METHODS and has_adapter and not has_full:
        raise _refuse(folder, f"holds an adapter (saved by {was}), but this run trains "
                      f"`finetuning_type: {ft.finetuning_type}`", fix)
    if ft.finetuning_type not in ADAPTER_METHODS or not has_adapter:
        return
    adapter = read_adapter_config(folder)
    if not adapter:
        return  # the loader names an unreadable adapter_config.json
    peft_type, wanted = str(adapter.get("peft_type", "")).upper(), ADAPTER_METHODS[ft.finetuning_type]
    if peft_type and peft_type != wanted:
        article = "an" if peft_type[0] in "AEIOU" else "a"
        raise _refuse(folder, f"holds {article} {peft_type} adapter, but this run trains `finetuning_type: "
                      f"{ft.finetuning_type}`", fix)
    rank = adapter.get("r")
    if wanted == "LORA" and isinstance(rank, int) and rank and rank != ft.lora_rank:
        raise _refuse(folder, f"holds a LoRA adapter of rank {rank}, but this run has `lora_rank: {ft.lora_rank}`",
                      f"Set `lora_rank: {rank}` to resume it.")
    if isinstance(saved.get("stage"), str) and saved["stage"] != ft.stage and str(folder) not in _WARNED:
        _WARNED.add(str(folder))  # the pre-flight check and the run itself both resolve the resume: say it once
        logger.warning("`%s` was saved by a `stage: %s` run and this run is `stage: %s`: its weights, optimizer "
                       "state and step count carry over.", folder, saved["stage"], ft.stage)


def _unknown_state_keys(checkpoint: str) -> list[str]:
    """Keys of the checkpoint's trainer_state.json that this transformers' TrainerState does not take (a state
    saved by another version): its load stops on the first with a TypeError."""
    import dataclasses

    from transformers.trainer_callback import TrainerState

    from engine.checkpoints import StateUnread, read_state

    try:
        saved = read_state(checkpoint)  # a regular file of a bounded size
    except (OSError, ValueError, RecursionError, StateUnread):
        return []  # named by engine.checkpoints before the run
    known = {field.name for field in dataclasses.fields(TrainerState)}
    return sorted(str(key) for key in saved if key not in known) if isinstance(saved, dict) else []


def guard_loads(trainer: Any, cfg: RunConfig, checkpoint: str) -> None:
    """Report a checkpoint that transformers cannot load into this run as a user error, not a traceback."""
    import torch
    import transformers

    unknown = _unknown_state_keys(checkpoint)
    if unknown:
        shown = ", ".join(f"`{key[:60]}`" for key in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
        raise _refuse(checkpoint, f"has a trainer_state.json with keys transformers {transformers.__version__} does "
                      f"not know ({shown})", "It was saved by another transformers version: resume it with that "
                      "version, or delete those keys from the file.")

    def guarded(method: Any, fits: bool = True) -> Any:
        def load(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            except torch.OutOfMemoryError:
                raise
            except pickle.UnpicklingError:  # torch's own text advises weights_only=False, which would run that code
                raise _refuse(checkpoint, "holds a state file (optimizer.pt, scheduler.pt, rng_state.pth or the "
                              "weights) that is more than tensors: loading it would run code it carries, so it was "
                              "not loaded (a file from elsewhere, or damaged)", "Resume from a checkpoint your own "
                              "run saved.") from None
            except (RuntimeError, ValueError, KeyError) as err:
                if not fits:
                    raise
                first = next((line.strip() for line in str(err).splitlines() if line.strip()), type(err).__name__)
                changed = differences(cfg, Path(checkpoint))
                if changed:
                    saved = f" It was saved with {', '.join(changed)}"
                elif read_saved_config(Path(checkpoint)):
                    saved = " The settings saved beside it match this run's, so it may be damaged"
                elif (Path(checkpoint) / "lf_config.yaml").is_file():
                    saved = " Its lf_config.yaml, which would tell the settings it was saved with, cannot be read"
                else:
                    saved = " It has no lf_config.yaml that would tell the settings it was saved with"
                raise _refuse(checkpoint, f"does not fit this run: {first.rstrip('.')[:300]}.{saved}",
                              "Resume it with the model and method it was trained with.") from None
        return load

    for name in ("_load_from_checkpoint", "_load_optimizer_and_scheduler", "_load_rng_state"):
        if hasattr(trainer, name):
            setattr(trainer, name, guarded(getattr(trainer, name), fits=name != "_load_rng_state"))
