"""Which config keys mean something for which kind of run, for History's compare table.

The engine writes every run folder's config.yaml complete (every key, defaults included), so a predict run's config
holds ``lora_rank: 8`` and ``learning_rate: 5e-05`` although it trains nothing. Comparing it with a training run
key by key listed those unused defaults as differences. :func:`config_diff` compares a key only where it means
something for every compared run's kind, or where some run set it (a value other than the default); a run the key
does not apply to shows a note saying so instead of its unused default.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import yaml

EVAL_KINDS = ("eval", "predict")
TEMPLATE_KEYS = frozenset({"default_system", "enable_thinking", "preserve_thinking", "tool_format"})
"""Data keys that shape the chat template: a chat server and an export (which saves the template) use them too."""
MEDIA_KEYS = frozenset({"media_dir", "image_max_pixels", "image_min_pixels", "video_fps", "video_maxlen",
                        "video_max_pixels", "video_min_pixels", "audio_sampling_rate", "use_audio_in_video"})
"""Data keys a chat server also uses (the images, videos and audio of a conversation)."""
EVAL_FINETUNING_KEYS = frozenset({"stage", "compute_accuracy", "pref_beta", "pref_ftx", "pref_loss",
                                  "dpo_label_smoothing", "kto_chosen_weight", "kto_rejected_weight", "simpo_gamma",
                                  "ref_model"})
"""Finetuning keys an evaluation also reads (the stage's loss and its reference model)."""
EVAL_TRAIN_KEYS = frozenset({"output_dir", "overwrite_output_dir", "do_train", "do_eval", "do_predict",
                             "per_device_eval_batch_size", "predict_with_generate", "seed", "bf16", "fp16",
                             "pure_bf16", "report_to", "dataloader_num_workers", "ddp_timeout", "deepspeed", "fsdp",
                             "fsdp_config", "fsdp_transformer_layer_cls_to_wrap"})
"""Training-argument keys an evaluation or prediction also reads."""
ANY_KIND_METHOD_KEYS = frozenset({"rope_scaling", "use_modelscope_hub", "use_openmind_hub"})
"""Keys of the methods section that concern loading the model, so every kind of run."""
SAMPLING_STAGES = ("grpo", "rloo", "ppo")
"""Training stages that sample completions with the generation settings."""


def _sections() -> dict[str, str]:
    from engine.config.loader import all_keys

    return {key: section for key, (section, _) in all_keys().items()}


def applies(key: str, kind: str, cfg: dict[str, Any]) -> bool:
    """Whether ``key`` means something for a run of ``kind`` (``cfg``: that run's config, for its stage). A key
    outside the schema (a Hugging Face argument passed through), or a run of an unknown kind, counts as used."""
    section = _sections().get(key)
    if section is None or kind not in ("train", *EVAL_KINDS, "chat", "export"):
        return True
    if section == "model" or key == "finetuning_type" or key in ANY_KIND_METHOD_KEYS:
        return True
    if section == "data":
        return kind != "export" and (kind != "chat" or key in MEDIA_KEYS) or key in TEMPLATE_KEYS
    if section == "finetuning":
        return kind == "train" or (kind in EVAL_KINDS and key in EVAL_FINETUNING_KEYS)
    if section == "train":
        return kind == "train" or (kind in EVAL_KINDS and key in EVAL_TRAIN_KEYS)
    if section == "generation":
        return kind in ("predict", "chat") or (kind == "train" and cfg.get("stage") in SAMPLING_STAGES)
    if section == "export":
        return kind == "export"
    return kind == "train"  # methods and parallel: how a model is trained


def _same(a: Any, b: Any) -> bool:
    return yaml.safe_dump(a) == yaml.safe_dump(b)


def config_diff(configs: dict[str, dict[str, Any]], kinds: dict[str, str] | None = None,
                not_used: Callable[[str], str] = lambda kind: f"(not used by {kind} runs)") -> list[list[str]]:
    """Rows of [key, value in run 1, value in run 2, ...] for the keys whose values differ between runs.

    ``kinds`` maps a run id to its kind (train, eval, predict, chat, export); without it every key counts for
    every run. A key that some run's kind does not use is compared only where a run set it to other than its
    default, and that run's cell is ``not_used(kind)`` unless the run set it itself.
    """
    from engine.config.loader import RunConfig

    defaults = RunConfig().to_dict()
    ids = list(configs)
    kinds = kinds or {}
    keys: list[str] = []
    for cfg in configs.values():
        keys += [key for key in cfg if key not in keys and key != "output_dir"]
    rows = []
    for key in keys:
        used = {i: applies(key, kinds.get(i, ""), configs[i]) for i in ids}
        set_here = {i: key in configs[i] and not (key in defaults and _same(configs[i][key], defaults[key]))
                    for i in ids}
        if not all(used.values()) and not any(set_here.values()):
            continue  # defaults of a key that some of these runs never read
        cells, seen = [], set()
        for i in ids:
            value = configs[i].get(key)
            if used[i] or set_here[i]:
                cells.append("" if value is None else str(value))
                seen.add(yaml.safe_dump(value))
            else:
                cells.append(not_used(kinds[i]))
                seen.add("\0not used")
        if len(seen) > 1:
            rows.append([key, *cells])
    return rows
