"""Cross-checks of the optional-method keys (:class:`engine.config.methods.MethodArgs`) against the rest of a config.

Each problem names the conflict and the fix; the rules follow LLaMA-Factory's own argument checks where it has them.
"""

from __future__ import annotations

import importlib.util
from typing import Any

# use_* key -> (import name, pip name) of the package that implements the optimizer
OPTIMIZER_PACKAGES = {
    "use_galore": ("galore_torch", "galore-torch"),
    "use_apollo": ("apollo_torch", "apollo-torch"),
    "use_badam": ("badam", "badam"),
    "use_adam_mini": ("adam_mini", "adam-mini"),
}


# report_to value -> (import names, any of which works; pip name)
TRACKER_PACKAGES = {
    "tensorboard": (("tensorboard", "tensorboardX"), "tensorboard"),
    "wandb": (("wandb",), "wandb"),
    "mlflow": (("mlflow",), "mlflow"),
    "swanlab": (("swanlab",), "swanlab"),
    "comet_ml": (("comet_ml",), "comet-ml"),
    "clearml": (("clearml",), "clearml"),
    "trackio": (("trackio",), "trackio"),
}


def tracker_problems(report_to: str | None) -> list[str]:
    """A refusal for each tracker in ``report_to`` whose package is not installed."""
    problems = []
    for name in [t.strip() for t in str(report_to or "").split(",") if t.strip()]:
        if name not in TRACKER_PACKAGES:
            continue
        modules, pip_name = TRACKER_PACKAGES[name]
        if not any(importlib.util.find_spec(m) is not None for m in modules):
            problems.append(f"`report_to: {name}` needs the `{pip_name}` package, which is not installed: "
                            f"`pip install {pip_name}` (or `pip install 'lf-board[trackers]'`), or set "
                            "`report_to: none`.")
    return problems


# LLaMA-Factory keys this engine accepts only when off: set, each is refused with the reason (not silently ignored).
REFUSED_WHEN_SET = {
    "shift_attn": "LongLoRA's shift short attention is not implemented here; remove it (`rope_scaling` extends the "
                  "context).",
    "mixture_of_depths": "Mixture-of-depths conversion is not implemented here; remove it.",
    "upcast_layernorm": "Up-casting frozen norm layers is not implemented here; remove it (trainable weights are "
                        "already kept in float32).",
    "upcast_lmhead_output": "Up-casting the output head's logits is not implemented here; remove it (the training "
                            "loss is computed in float32).",
    "push_to_hub": "Uploading to a hub is not done by this engine; remove it and upload output_dir yourself.",
    "logging_dir": "transformers 5 has no logging directory setting; remove it (trackers write under output_dir or "
                   "where their own settings say, e.g. MLFLOW_TRACKING_URI).",
    "print_param_status": "Per-parameter status is not printed here; remove it (the trainable and total parameter "
                          "counts are in the log and the run's start event).",
    "moe_aux_loss_coef": "The router auxiliary-loss coefficient is not set here; remove it (the model's own "
                         "`router_aux_loss_coef` applies).",
    "flash_attn_kwargs": "Extra flash-attention arguments are not passed here; remove it (`flash_attn` picks the "
                         "attention implementation).",
    "image_resolution": "LLaMA-Factory renamed it; use `image_max_pixels` (pixels, e.g. 262144 for 512 x 512).",
    "video_resolution": "LLaMA-Factory renamed it; use `video_max_pixels` (pixels, e.g. 16384 for 128 x 128).",
    "infer_backend_kwargs": "Only the transformers inference backend is available here; remove it.",
    "vllm_maxlen": "The vLLM inference backend is not available here; remove the vllm_* keys.",
    "vllm_gpu_util": "The vLLM inference backend is not available here; remove the vllm_* keys.",
    "vllm_enforce_eager": "The vLLM inference backend is not available here; remove the vllm_* keys.",
    "vllm_max_lora_rank": "The vLLM inference backend is not available here; remove the vllm_* keys.",
    **{key: "PPO is not available (TRL has no PPO trainer here); remove the ppo_* keys and use `stage: grpo` or "
            "`rloo` with `reward_model`." for key in ("ppo_buffer_size", "ppo_epochs", "ppo_score_norm",
                                                      "ppo_target", "ppo_whiten_rewards")},
    **{key: "The reward model's kind and precision are read from its folder here (an `rm` run's output_dir); "
            "remove it." for key in ("reward_model_adapters", "reward_model_quantization_bit",
                                     "reward_model_type")},
}


def is_set(value: Any) -> bool:
    """Whether a YAML value turns a switch on (true, a non-zero number, text other than false/none)."""
    if isinstance(value, str):
        return value.strip().lower() not in ("", "false", "no", "off", "0", "none", "null")
    return bool(value)


def missing_package(key: str) -> str | None:
    """The refusal for ``key`` (``use_galore``...) when its package cannot be imported here, else None."""
    module, pip_name = OPTIMIZER_PACKAGES[key]
    if importlib.util.find_spec(module) is not None:
        return None
    return (f"`{key}: true` needs the `{pip_name}` package, which is not installed: `pip install "
            f"'lf-board[methods]'` (or `pip install {pip_name}`), or remove `{key}`.")


def each_dataset_problems(cfg: Any) -> list[str]:
    """``eval_on_each_dataset`` where it cannot work here (implemented for sft, pt, kto, rm and dpo)."""
    ft, tr = cfg.finetuning, cfg.train
    if ft.stage not in ("sft", "pt", "kto", "dpo", "rm"):
        return [f"`eval_on_each_dataset: true` evaluates each dataset on its own for stage sft, pt, rm, dpo or kto here; "
                f"this config has `stage: {ft.stage}`. Remove it (its evaluation then covers all of `eval_dataset` together)."]
    if tr.predict_with_generate and (tr.do_eval or tr.eval_strategy not in (None, "no")):
        return ["`eval_on_each_dataset: true` with `predict_with_generate: true` (an evaluation that generates) is not "
                "implemented here; remove one of them (`do_predict` scores generated replies of all of "
                "`eval_dataset`)."]
    if not cfg.data.eval_dataset:
        cfg.notes.append("`eval_on_each_dataset: true` applies to `eval_dataset`, which is not set: the evaluation "
                         "split of `val_size` is evaluated as one set.")
    return []


def lf_trains_sigmoid(loss: str) -> str:
    """The note for dpo's hinge and ipo losses: LLaMA-Factory 0.9.5 calls TRL 0.24's ``dpo_loss`` without its
    ``loss_type``, so TRL's default (sigmoid) is what it trains and evaluates for both."""
    averaged = " on log-probabilities averaged over each reply's tokens" if loss == "ipo" else ""
    return (f"`pref_loss: {loss}` trains the {loss} loss here. LLaMA-Factory 0.9.5 trains the sigmoid loss{averaged} "
            f"for it (its DPO trainer calls TRL's `dpo_loss` without the loss type), so the same config gives other "
            f"losses and results there" + (": use `pref_loss: sigmoid` for what it trains." if loss == "hinge" else "."))


def method_checks(cfg: Any) -> list[str]:
    """Problems with the method keys of a built config (empty when all is well)."""
    m, ft, tr = cfg.methods, cfg.finetuning, cfg.train
    problems: list[str] = []
    problems += early_stopping_problems(cfg)
    if ft.stage == "dpo" and ft.pref_loss in ("hinge", "ipo"):
        cfg.notes.append(lf_trains_sigmoid(ft.pref_loss))
    weighted = [key for key in ("use_dft_loss", "use_eaft_loss", "use_asft_loss") if getattr(m, key)]
    if len(weighted) > 1:
        problems.append(f"{' and '.join(f'`{k}`' for k in weighted)} are different losses of the same tokens; "
                        "choose one.")
    if cfg.data.eval_on_each_dataset:
        problems += each_dataset_problems(cfg)
    if ft.compute_accuracy and tr.predict_with_generate:  # LLaMA-Factory refuses the pair too
        problems.append("`compute_accuracy: true` and `predict_with_generate: true` cannot be used together (as in "
                        "LLaMA-Factory): an evaluation that generates scores BLEU/ROUGE instead of next-token accuracy. "
                        "Remove one of them.")
    if ft.compute_accuracy and ft.stage != "sft":
        problems.append(f"`compute_accuracy: true` scores the supervised model's next tokens in evaluation (stage "
                        f"sft); this config has `stage: {ft.stage}`. Remove it, or set `stage: sft`.")
    for key in weighted:
        if ft.stage != "sft":
            problems.append(f"`{key}: true` weights the supervised loss (stage sft); this config has `stage: "
                            f"{ft.stage}`. Remove it, or set `stage: sft`.")
    lora = ft.finetuning_type == "lora"
    optimizers = [key for key in OPTIMIZER_PACKAGES if getattr(m, key)]
    if len(optimizers) > 1:
        problems.append(f"{' and '.join(f'`{k}`' for k in optimizers)} cannot be combined; choose one optimizer.")
    for key in optimizers:
        if lora:
            problems.append(f"`{key}: true` trains the weights themselves; it cannot be combined with "
                            "`finetuning_type: lora` (use `full` or `freeze`).")
        if ft.use_muon:
            problems.append(f"`{key}` and `use_muon` cannot be combined; choose one optimizer.")
        missing = missing_package(key)
        if missing:
            problems.append(missing)
    for key in ("galore", "apollo"):
        if getattr(m, f"use_{key}") and getattr(m, f"{key}_layerwise") and tr.gradient_accumulation_steps != 1:
            problems.append(f"`{key}_layerwise: true` steps each layer during the backward pass, so it needs "
                            f"`gradient_accumulation_steps: 1` (this config has {tr.gradient_accumulation_steps}).")
    if m.use_apollo and m.apollo_scale_front:
        problems.append("`apollo_scale_front: true` is not available through transformers' APOLLO optimizer used "
                        "here; remove it (the scaling is applied after the norm-growth limiter).")
    if m.use_badam and ft.finetuning_type == "freeze":
        problems.append("`use_badam` chooses which layers train, block by block, so it needs `finetuning_type: full` "
                        "(with `freeze` it would unfreeze the frozen layers).")
    if m.use_badam and m.badam_mode == "ratio" and m.badam_update_ratio <= 1e-6:
        problems.append("`badam_update_ratio` must be above 0 with `badam_mode: ratio`.")
    if m.loraplus_lr_ratio is not None:
        if not lora:
            problems.append(f"`loraplus_lr_ratio` is only valid for LoRA training (this config has "
                            f"`finetuning_type: {ft.finetuning_type}`).")
        elif ft.use_muon:
            problems.append("`loraplus_lr_ratio` and `use_muon` cannot be combined; choose one optimizer.")
    if ft.pissa_init and lora:
        if not m.pissa_convert:
            problems.append("`pissa_convert: false` would save a PiSSA adapter that gives wrong weights on the "
                            "original base model (chat, eval, export); remove it, adapters are saved converted.")
        if ft.stage == "kto" or (ft.stage == "dpo" and ft.pref_loss not in ("orpo", "simpo") and not ft.ref_model):
            problems.append(f"`pissa_init` cannot be used with `stage: {ft.stage}` here: PiSSA changes the base "
                            "weights that serve as the reference model; remove `pissa_init` or use pref_loss "
                            "orpo/simpo.")
    if ft.finetuning_type == "oft":
        for key in ("use_dora", "use_rslora", "pissa_init"):
            if getattr(ft, key):
                problems.append(f"`{key}` is only valid for LoRA training, not `finetuning_type: oft`.")
        if m.oft_rank == 0 and m.oft_block_size == 0:
            problems.append("OFT needs `oft_rank` or `oft_block_size` above 0.")
        if m.oft_rank and m.oft_block_size:
            problems.append("Set only one of `oft_rank` and `oft_block_size` (the other follows from the layer "
                            "size); set the other to 0.")
    elif ft.finetuning_type != "lora":
        for key in ("use_dora", "use_rslora", "pissa_init"):
            if getattr(ft, key):
                problems.append(f"`{key}` is only valid for LoRA training (this config has "
                                f"`finetuning_type: {ft.finetuning_type}`).")
    problems += tracker_problems(tr.report_to)
    if m.use_modelscope_hub and m.use_openmind_hub:
        problems.append("`use_modelscope_hub` and `use_openmind_hub` cannot both be true; choose one hub.")
    return problems


def early_stopping_problems(cfg: Any) -> list[str]:
    """``early_stopping_steps`` needs evaluations to compare and the best checkpoint kept (transformers' callback
    stops at the patience and loads the best checkpoint at the end, as in LLaMA-Factory)."""
    tr, patience = cfg.train, cfg.methods.early_stopping_steps
    if not patience:
        return []
    if tr.eval_strategy == "no":
        return [f"`early_stopping_steps: {patience}` compares evaluations: set `eval_strategy: steps` (or epoch) and "
                "`eval_dataset` or `val_size`, or remove `early_stopping_steps`."]
    if tr.save_strategy not in (tr.eval_strategy, "best"):
        return [f"`early_stopping_steps` keeps the best checkpoint, so checkpoints must be saved when evaluating: set "
                f"`save_strategy: {tr.eval_strategy}` (it is `{tr.save_strategy}`)."]
    eval_steps = tr.eval_steps or tr.logging_steps
    if tr.eval_strategy == "steps" and tr.save_strategy == "steps" and tr.save_steps % eval_steps:
        return [f"`early_stopping_steps` keeps the best checkpoint, so `save_steps` ({tr.save_steps}) must be a "
                f"multiple of `eval_steps` ({eval_steps}); set `save_steps: {eval_steps}` for instance."]
    return []
