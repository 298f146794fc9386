"""Form values in, validated config and exact command out: the pure logic behind the tabs (no gradio here).

Every tab turns its widgets into a flat LLaMA-Factory mapping with these helpers, validates it with the
engine's typed config (all problems at once) and the engine's pre-flight checks, and shows or submits the
exact YAML the engine will run.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from app import catalog

DATA_KEYS = ["cutoff_len", "max_samples", "val_size", "packing", "train_on_prompt", "mask_history"]
TRAIN_KEYS = [
    "learning_rate",
    "num_train_epochs",
    "max_steps",
    "per_device_train_batch_size",
    "gradient_accumulation_steps",
    "lr_scheduler_type",
    "lr_scheduler_kwargs",
    "warmup_ratio",
    "warmup_steps",
    "weight_decay",
    "max_grad_norm",
    "logging_steps",
    "save_steps",
    "save_strategy",
    "eval_strategy",
    "eval_steps",
    "per_device_eval_batch_size",
    "seed",
    "bf16",
    "fp16",
    "gradient_checkpointing",
    "resume_from_checkpoint",
    "plot_loss",
]
LORA_KEYS = ["lora_rank", "lora_alpha", "lora_dropout", "lora_target", "use_rslora", "use_dora"]
FREEZE_KEYS = ["freeze_trainable_layers", "freeze_trainable_modules"]
PREF_KEYS = ["pref_beta", "pref_ftx", "pref_loss"]
GENERATION_KEYS = ["max_new_tokens", "temperature", "top_p", "top_k", "repetition_penalty", "do_sample"]
EXPORT_KEYS = ["export_size", "export_device", "infer_dtype", "export_legacy_format"]
# keys the tabs set themselves (never shown as free widgets)
MANAGED_KEYS = {
    "model_name_or_path",
    "adapter_name_or_path",
    "template",
    "finetuning_type",
    "dataset",
    "eval_dataset",
    "dataset_dir",
    "output_dir",
    "overwrite_output_dir",
    "do_train",
    "do_eval",
    "do_predict",
    "predict_with_generate",
    "export_dir",
    "attn_implementation",
}
PREFERENCE_STAGES = ("dpo", "kto")


@dataclass
class TopValues:
    """The top bar's choices, shared by every tab."""

    model: str | None
    finetuning_type: str | None
    checkpoint: str | None
    template: str | None

    @classmethod
    def of(cls, model: Any, finetuning_type: Any, checkpoint: Any, template: Any) -> TopValues:
        def clean(v: Any) -> str | None:
            text = "" if v is None else str(v).strip()
            return text or None

        return cls(clean(model), clean(finetuning_type), clean(checkpoint), clean(template))


def model_mapping(top: TopValues, with_adapter: bool = True) -> dict[str, Any]:
    """model_name_or_path, adapter_name_or_path, template and finetuning_type from the top bar.

    A picked checkpoint that holds an adapter (``adapter_config.json``) is loaded on top of the model; one that
    holds full weights (``config.json``) replaces the model.
    """
    mapping: dict[str, Any] = {
        "model_name_or_path": top.model or "",
        "template": top.template,
        "finetuning_type": top.finetuning_type or "lora",
        "adapter_name_or_path": None,
    }
    if with_adapter and top.checkpoint:
        picked = Path(top.checkpoint)
        if (picked / "adapter_config.json").is_file():
            mapping["adapter_name_or_path"] = str(picked)
        elif (picked / "config.json").is_file():
            mapping["model_name_or_path"] = str(picked)
        else:
            mapping["adapter_name_or_path"] = str(picked)
    return mapping


def join_names(names: Any) -> str | None:
    """A dataset picker value (list or text) as LLaMA-Factory's comma-separated list."""
    if not names:
        return None
    if isinstance(names, str):
        names = names.split(",")
    items = [str(n).strip() for n in names if str(n).strip()]
    return ",".join(items) or None


def split_names(text: Any) -> list[str]:
    if not text:
        return []
    if isinstance(text, (list, tuple)):
        return [str(t) for t in text]
    return [part.strip() for part in str(text).split(",") if part.strip()]


def absolute_paths(mapping: dict[str, Any], cwd: Path | None = None) -> dict[str, Any]:
    """Make path-valued keys absolute when they exist relative to ``cwd``, so a run folder's config is portable."""
    cwd = cwd or Path.cwd()
    out = dict(mapping)
    for key in (
        "dataset_dir",
        "model_name_or_path",
        "adapter_name_or_path",
        "resume_from_checkpoint",
        "export_dir",
        "deepspeed",
    ):
        value = out.get(key)
        if not isinstance(value, str) or not value or value in ("demo", "true", "false") or key not in out:
            continue
        if key == "dataset_dir":
            from engine.data.registry import hub_dataset_dir

            if hub_dataset_dir(value):  # LLaMA-Factory's ONLINE / REMOTE:owner/repo, not folders
                continue
        out[key] = ",".join(_absolute(item.strip(), cwd, key in ("dataset_dir", "export_dir"))
                            for item in (value.split(",") if key == "adapter_name_or_path" else [value]))
    return out


def _absolute(text: str, cwd: Path, always: bool) -> str:
    """``text`` as typed when it is absolute (``~`` expanded), a hub id or anything else that is no folder here (a
    URL stays a URL: ``Path`` would turn ``https://x`` into ``https:/x``); a relative folder that exists under
    ``cwd`` (any relative path when ``always``) made absolute."""
    expanded = os.path.expanduser(text)  # text only: no slashes collapsed
    if os.path.isabs(expanded) or "\0" in text:  # a NUL: no path (resolve() raises); validation names it
        return expanded
    if "://" not in text and (always or _exists(cwd / text)):
        return str((cwd / text).resolve())
    return text


def _exists(path: Path) -> bool:
    """Path.exists that answers False for a name the OS refuses (too long): validation then says what is wrong."""
    try:
        return path.exists()
    except OSError:
        return False


@dataclass
class Checked:
    """The outcome of validating a form: the config (when valid) and every problem found."""

    config: Any | None
    mapping: dict[str, Any]
    problems: list[str]

    @property
    def ok(self) -> bool:
        return self.config is not None and not self.problems


def validate(mapping: dict[str, Any], command: str, run_folder: str | Path | None = None) -> Checked:
    """Build the engine's typed config (all problems together), then run its pre-flight checks for ``command``.

    ``run_folder``: the folder the run will write to (the board's runs always write to their own folder, whatever
    the config's ``output_dir`` says), checked as its ``output_dir``: what sits at the config's own, or at the
    engine's default ``saves/run`` when a form has none, is no reason to refuse it."""
    from engine.config import ConfigError, build_config
    from engine.errors import Problem

    if run_folder is not None:
        mapping = {**mapping, "output_dir": str(run_folder)}

    try:
        cfg = build_config(dict(mapping))  # names with hidden characters are refused there (code hidden_chars)
    except ConfigError as err:
        return Checked(None, mapping, list(err.problems))
    try:
        problems = catalog.preflight(cfg, command)
    except Exception as err:  # a checker bug must not hide the form
        problems = [Problem(f"The pre-flight check failed: {err}", "check_failed")]
    return Checked(cfg, mapping, problems)


def resolved_mapping(cfg: Any, output_dir: str | Path) -> dict[str, Any]:
    """The mapping a run folder's config.yaml holds: the validated config (non-default keys) and its output_dir."""
    mapping = yaml.safe_load(cfg.to_yaml(minimal=True)) or {}
    mapping["output_dir"] = str(output_dir)
    return mapping


def yaml_text(mapping: dict[str, Any]) -> str:
    """YAML exactly as the job manager writes it."""
    return yaml.safe_dump(mapping, sort_keys=False, allow_unicode=True)


def command_text(command: str, config_path: str | Path) -> str:
    """The CLI command that reproduces a job."""
    return f"lf-engine {command} {config_path}"


def train_mapping(
    top: TopValues, stage: Any, dataset_dir: Any, datasets: Any, eval_datasets: Any, fields: dict[str, Any]
) -> dict[str, Any]:
    """The Train tab's mapping: top bar + stage + data + the hyperparameter fields (already config values)."""
    mapping = model_mapping(top)
    mapping.update(
        {
            "stage": stage or "sft",
            "do_train": True,
            "dataset_dir": str(dataset_dir or ""),
            "dataset": join_names(datasets),
            "eval_dataset": join_names(eval_datasets),
        }
    )
    mapping.update(fields)
    if mapping["finetuning_type"] != "lora":
        for key in LORA_KEYS:
            mapping.pop(key, None)
    if mapping["finetuning_type"] != "freeze":
        for key in FREEZE_KEYS:
            mapping.pop(key, None)
    if mapping["stage"] not in PREFERENCE_STAGES:
        for key in PREF_KEYS:
            mapping.pop(key, None)
    return absolute_paths(mapping)


def eval_mapping(top: TopValues, mode: str, dataset_dir: Any, datasets: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """The Evaluate tab's mapping: ``eval`` gives loss and perplexity, ``predict`` generates and scores."""
    mapping = model_mapping(top)
    mapping.update(
        {
            "stage": "sft",
            "do_train": False,
            "do_eval": mode == "eval",
            "do_predict": mode == "predict",
            "predict_with_generate": mode == "predict",
            "dataset_dir": str(dataset_dir or ""),
            "eval_dataset": join_names(datasets),
        }
    )
    mapping.update(fields)
    return absolute_paths(mapping)


def chat_mapping(top: TopValues, fields: dict[str, Any], with_adapter: bool = True) -> dict[str, Any]:
    """A chat server's mapping: the model (with or without the picked adapter) and sampling defaults."""
    mapping = model_mapping(top, with_adapter=with_adapter)
    mapping.update(fields)
    return absolute_paths(mapping)


def export_mapping(top: TopValues, export_dir: Any, fields: dict[str, Any]) -> dict[str, Any]:
    """The Export tab's mapping: merge the picked adapter into the model and write it to ``export_dir``."""
    mapping = model_mapping(top)
    mapping["export_dir"] = str(export_dir or "").strip() or None
    mapping.update(fields)
    return absolute_paths(mapping)
