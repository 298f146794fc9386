"""LLaMA-Factory 0.9.5 keys that this engine has no field for: accepted at LLaMA-Factory's own default, refused
with the true reason (and the fix) at any other value.

A config that LLaMA-Factory accepts must never meet "Unknown key" here: a key it defines either works (it is a
field of :mod:`engine.config.schema`), or is named here with the value under which it changes nothing (its
default in LLaMA-Factory 0.9.5, where the feature is off) and what to do instead when it is set. Families of keys
(``kt_*``, ``sglang_*``, ``swanlab_*``) are refused as a family, whatever the member, since newer LLaMA-Factory
releases add members. The keys of LLaMA-Factory's benchmark command (``llamafactory-cli eval``) are refused at any
value: their names (``batch_size``, ``lang``, ``task``) are too generic to pass silently in a training config.

Secret-bearing keys (``swanlab_api_key`` and the hub tokens) never get here: :func:`engine.credentials.take_secrets`
takes them out first. The Lark keys hold a webhook secret, so their refusal does not quote the value.
"""

from __future__ import annotations

import math
from typing import Any

from engine.config.method_checks import is_set

_UNSET = object()

_TOKENS = ("New tokens initialised from descriptions are not supported here; list them in `add_special_tokens` "
           "(comma-separated; their rows start at the embeddings' mean plus noise, LLaMA-Factory's `noise_init`) and "
           "remove this key.")
_EXPORT_QUANT = ("Quantizing an export (GPTQ calibration) is not done here; remove the export_quantization_* keys "
                 "(`lf-engine export` writes the merged model in `infer_dtype`).")
_KT = "KTransformers is not available here; remove `use_kt` and the kt_* keys (FSDP2 or DeepSpeed shard large models)."
_SGLANG = "The SGLang inference backend is not available here; remove the sglang_* keys (chat uses transformers)."
_VLLM = "The vLLM inference backend is not available here; remove the vllm_* keys."
_SWANLAB = ("LLaMA-Factory's own SwanLab callback is not used here: set `report_to: swanlab` instead (transformers' "
            "SwanLab integration, which reads SWANLAB_PROJECT, SWANLAB_MODE, SWANLAB_LOG_DIR and SWANLAB_API_KEY "
            "from the environment) and remove the use_swanlab / swanlab_* keys.")
_LOSS = "{name} is not implemented here; remove `{key}` (the standard cross-entropy loss is used)."
_FP8 = "FP8 training is not available here; remove the fp8 keys (`bf16: true` or `fp16: true` train in mixed precision)."
_TRACE = ("torch's trace profiler is not wired here; remove the profiler keys (`profile_modules` times the modules you "
          "name and writes profile.json and profile.md to the run folder).")
_BENCH = ("belongs to LLaMA-Factory's benchmark command (`llamafactory-cli eval`: MMLU, C-Eval, CMMLU), which is not "
          "available here; remove it. `lf-engine eval` reports eval loss and perplexity, or BLEU/ROUGE with "
          "`do_predict: true`.")

# key -> (LLaMA-Factory 0.9.5's default, the refusal when the value differs from it)
AT_DEFAULT_ONLY: dict[str, tuple[Any, str]] = {
    # model
    "new_special_tokens_config": (None, _TOKENS),
    "init_special_tokens": ("noise_init", _TOKENS),
    "use_unsloth_gc": (False, "Unsloth's gradient checkpointing is not available here; remove it "
                              "(`gradient_checkpointing: true` uses PyTorch's own)."),
    "train_from_scratch": (False, "Training from randomly initialised weights is not supported here; start from a "
                                  "model's weights and remove `train_from_scratch`."),
    "offload_folder": ("offload", "Offloading weights to disk is not done here; remove `offload_folder`."),
    "use_kv_cache": (True, "Generation here always uses the KV cache; remove `use_kv_cache`."),
    "use_v1_kernels": (False, "LLaMA-Factory's v1 kernels are not available here; remove `use_v1_kernels` "
                              "(`enable_liger_kernel: true` fuses kernels on GPUs)."),
    "quantization_method": ("bnb", "Quantization here is bitsandbytes only (`quantization_method: bnb`, "
                                   "LLaMA-Factory's default); set it to bnb or remove it."),
    "quantization_device_map": (None, "The quantized model is placed on this process's device here; remove "
                                      "`quantization_device_map`."),
    "image_do_pan_and_scan": (False, "Gemma 3's pan-and-scan image crops are not made here; remove "
                                     "`image_do_pan_and_scan`."),
    "crop_to_patches": (False, "Cropping images to patches (InternVL) is not done here; remove `crop_to_patches`."),
    "export_quantization_dataset": (None, _EXPORT_QUANT),
    "export_quantization_nsamples": (128, _EXPORT_QUANT),
    "export_quantization_maxlen": (1024, _EXPORT_QUANT),
    "vllm_config": (None, _VLLM),
    # data
    "eval_num_beams": (None, "Set the beams of prediction with `num_beams` here, and remove `eval_num_beams`."),
    "ignore_pad_token_for_loss": (True, "Padding is never trained here (LLaMA-Factory's default); remove "
                                        "`ignore_pad_token_for_loss`."),
    "data_shared_file_system": (False, "Remove `data_shared_file_system`: it is not read here (the first process "
                                       "prepares the data and the others load it)."),
    # method
    "pref_bco_weight": (0.0, "The BCO term of DPO is not available here; remove `pref_bco_weight` (or set it to 0)."),
    "ref_model_adapters": (None, "Adapters on the reference model are not loaded here; merge them into a model "
                                 "folder first (`lf-engine export`) and give that folder as `ref_model`."),
    "ref_model_quantization_bit": (None, "The reference model is not quantized here; remove "
                                         "`ref_model_quantization_bit`."),
    "ld_alpha": (None, "LD-DPO's length weighting is not implemented here; remove `ld_alpha`."),
    "use_swanlab": (False, _SWANLAB),
    "use_mca": (False, "Megatron-Core training (MCA) is not available here; remove `use_mca` (FSDP2 or DeepSpeed "
                       "shard large models)."),
    "include_effective_tokens_per_second": (False, "Remove `include_effective_tokens_per_second`: every logged step "
                                                   "here reports real (non-padding) tokens per second."),
    # training (LLaMA-Factory's own, and Seq2SeqTrainingArguments', which LLaMA-Factory's extend)
    "master_addr": (None, "Give the rendezvous address to torchrun or accelerate (`--master-addr`, or MASTER_ADDR in "
                          "the environment) and remove `master_addr`."),
    "master_port": (None, "Give the rendezvous port to torchrun or accelerate (`--master-port`, or MASTER_PORT in "
                          "the environment) and remove `master_port`."),
    "fp8": (False, _FP8),
    "fp8_backend": ("auto", _FP8),
    "fp8_enable_fsdp_float8_all_gather": (False, _FP8),
    "enable_torch_profiler": (False, _TRACE),
    "profiler_output_dir": (None, _TRACE),
    "profiler_wait_steps": (1, _TRACE),
    "profiler_repeat": (1, _TRACE),
    "profiler_record_shapes": (True, _TRACE),
    "profiler_profile_memory": (True, _TRACE),
    "profiler_with_stack": (True, _TRACE),
    "generation_config": (None, "Set generation with `max_new_tokens`, `num_beams`, `temperature`, `top_p` and "
                                "`top_k` here, and remove `generation_config`."),
    "generation_max_length": (None, "Set the generation length with `max_new_tokens` here, and remove "
                                    "`generation_max_length`."),
    "generation_num_beams": (None, "Set the beams of prediction with `num_beams` here, and remove "
                                   "`generation_num_beams`."),
    "sortish_sampler": (False, "Batches here are already grouped by length (or padding-free); remove "
                               "`sortish_sampler`."),
    # families: LLaMA-Factory 0.9.5's members and defaults
    "use_kt": (False, _KT),
    "kt_weight_path": (None, _KT),
    "kt_expert_checkpoint_path": (None, _KT),
    "kt_use_lora_experts": (None, _KT),
    "kt_lora_expert_num": (None, _KT),
    "kt_lora_expert_intermediate_size": (None, _KT),
    "sglang_maxlen": (4096, _SGLANG),
    "sglang_mem_fraction": (0.7, _SGLANG),
    "sglang_tp_size": (-1, _SGLANG),
    "sglang_config": (None, _SGLANG),
    "sglang_lora_backend": ("triton", _SGLANG),
    "swanlab_project": ("llamafactory", _SWANLAB),
    "swanlab_workspace": (None, _SWANLAB),
    "swanlab_run_name": (None, _SWANLAB),
    "swanlab_mode": ("cloud", _SWANLAB),
    "swanlab_logdir": (None, _SWANLAB),
    "swanlab_lark_webhook_url": (None, _SWANLAB),
    "swanlab_lark_secret": (None, _SWANLAB),
}

# prefix -> refusal for any other member of the family (a newer LLaMA-Factory's, at any value)
FAMILIES = {"kt_": _KT, "sglang_": _SGLANG, "swanlab_": _SWANLAB, "vllm_": _VLLM, "fp8_": _FP8}

# LLaMA-Factory's benchmark-evaluation keys: refused at any value (see the module docstring)
BENCHMARK_KEYS = {
    "task": "", "task_dir": "", "n_shot": "", "lang": "", "save_dir": "", "download_mode": "",
    "batch_size": " (For training and evaluation batches set `per_device_train_batch_size` and "
                  "`per_device_eval_batch_size`.)",
}

# Megatron-Core's training keys (LLaMA-Factory's MCA mode, USE_MCA=1, takes them from mcore_adapter): any value
MEGATRON = ("Megatron-Core training (LLaMA-Factory's MCA mode, USE_MCA=1) is not available here; remove the Megatron "
            "keys (FSDP2 or DeepSpeed ZeRO shard large models; `cp_size` and `tp_size` are accelerate's N-D sizes).")
MEGATRON_KEYS = frozenset({
    "tensor_model_parallel_size", "pipeline_model_parallel_size", "context_parallel_size", "expert_model_parallel_size",
    "virtual_pipeline_model_parallel_size", "sequence_parallel", "use_distributed_optimizer", "overlap_grad_reduce",
    "overlap_param_gather", "bias_activation_fusion", "apply_rope_fusion", "moe_grouped_gemm",
    "moe_token_dispatcher_type", "recompute_granularity", "use_packed_sequences", "export_hf_on_finish",
})

# values never quoted back (they may hold a webhook or its secret)
HIDDEN_VALUES = {"swanlab_lark_webhook_url", "swanlab_lark_secret"}

# LLaMA-Factory keys whose every value trains the same here; key -> the note printed when it is set
SAME_RESULT = {
    "use_reentrant_gc": "`use_reentrant_gc`: activation checkpointing here is always non-reentrant (PyTorch's "
                        "recommended form); the gradients are the same as with LLaMA-Factory's reentrant default.",
    "low_cpu_mem_usage": "`low_cpu_mem_usage`: weights always load lazily here (transformers 5 reads no such switch; "
                         "LLaMA-Factory's `false` only loads them on the CPU before they move to the device), so the "
                         "model is the same at either value.",
}

# LLaMA-Factory keys with no field here that engine.config.loader applies itself (adapter_folder: joined to each
# adapter path; max_length: see max_length_problems)
APPLIED = frozenset({"adapter_folder", "max_length"})

# the LLaMA-Factory 0.9.5 defaults of the keys refused only when set (engine.config.method_checks.REFUSED_WHEN_SET)
REFUSED_WHEN_SET_DEFAULTS: dict[str, Any] = {
    "vllm_maxlen": 4096, "vllm_gpu_util": 0.7, "vllm_max_lora_rank": 32,
    "ppo_buffer_size": 1, "ppo_epochs": 4, "ppo_target": 6.0, "reward_model_type": "lora",
}


def refused_key_is_off(key: str, value: Any) -> bool:
    """For a key of ``REFUSED_WHEN_SET``: whether ``value`` leaves it off (false, 0, empty) or at LLaMA-Factory's
    default, which is what happens here anyway."""
    if not is_set(value):
        return True
    return key in REFUSED_WHEN_SET_DEFAULTS and is_default(value, REFUSED_WHEN_SET_DEFAULTS[key])


def handles(key: str) -> bool:
    """Whether ``key`` is one of LLaMA-Factory's keys named here."""
    return (key in AT_DEFAULT_ONLY or key in BENCHMARK_KEYS or key in SAME_RESULT or key in MEGATRON_KEYS
            or key in APPLIED or any(key.startswith(prefix) for prefix in FAMILIES))


def is_default(value: Any, default: Any) -> bool:
    """Whether a YAML value equals LLaMA-Factory's default (``null`` and an empty text count as None, ``"true"``
    as True, ``"4096"`` as 4096, text compared without case)."""
    if isinstance(value, str):
        text = value.strip()
        if default is None:
            return text.lower() in ("", "null", "none", "~")
        if isinstance(default, bool):
            return text.lower() == str(default).lower()
        if isinstance(default, (int, float)):
            try:
                return math.isclose(float(text), float(default))
            except ValueError:
                return False
        return text.lower() == str(default).lower()
    if default is None or isinstance(default, bool) or value is None or isinstance(value, bool):
        return value is default or (value is None and default is None)
    if isinstance(value, (int, float)) and isinstance(default, (int, float)):
        return math.isclose(float(value), float(default))
    return False


def problem(key: str, value: Any) -> str | None:
    """The refusal for ``key: value`` (a key :func:`handles`), or None when it changes nothing here."""
    found = problems([(key, value)])
    return found[0] if found else None


def problems(items: list[tuple[str, Any]]) -> list[str]:
    """The refusals for these ``(key, value)`` pairs (keys :func:`handles`); keys refused for the same reason share
    one line, e.g. all the Megatron keys of a config."""
    by_reason: dict[str, list[str]] = {}
    for key, value in items:
        reason = _reason(key, value)
        if reason is not None:
            shown = f"`{key}`" if key in HIDDEN_VALUES else f"`{key}: {_short(value)}`"
            by_reason.setdefault(reason, []).append(shown)
    out = []
    for reason, shown in by_reason.items():
        if reason.startswith(" "):  # the benchmark keys' reason reads on from the key
            out.append(f"{', '.join(shown)}{reason}")
        else:
            out.append(f"{', '.join(shown)}: {reason}")
    return out


def _reason(key: str, value: Any) -> str | None:
    if key in SAME_RESULT or key in APPLIED:
        return None
    if key in BENCHMARK_KEYS:
        return f" {_BENCH}{BENCHMARK_KEYS[key]}"
    if key in MEGATRON_KEYS:
        return MEGATRON
    default, reason = AT_DEFAULT_ONLY.get(key, (_UNSET, None))
    if reason is None:
        return next(text for prefix, text in FAMILIES.items() if key.startswith(prefix))
    return None if is_default(value, default) else reason


def max_length_problems(mapping: dict[str, Any], notes: list[str]) -> list[str]:
    """LLaMA-Factory's generation ``max_length`` (prompt and reply together) counts only where ``max_new_tokens`` is
    not positive; with a positive one (its default, 1024) it is ignored there, and here (a note says so)."""
    value, new = mapping.get("max_length"), mapping.get("max_new_tokens", 1024)
    if value is None:
        return []
    if not _positive(value) or float(value) != int(value):
        return [f"`max_length: {_short(value)}` must be a whole number of tokens, as in LLaMA-Factory."]
    if _positive(new):
        if not is_default(value, 1024):
            notes.append(f"`max_length: {_short(value)}` is ignored: `max_new_tokens` ({new}) sets the reply's "
                         "length, as in LLaMA-Factory.")
        return []
    return [f"`max_length: {_short(value)}` with `max_new_tokens: {_short(new)}`: LLaMA-Factory then caps prompt "
            "and reply together at max_length; here the reply's own length is set: give `max_new_tokens` the most "
            "tokens a reply may have (LLaMA-Factory's default is 1024) and remove `max_length`."]


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value > 0


def note(key: str, value: Any) -> str | None:
    """What to tell the user about a key that trains the same at any value (None: nothing)."""
    return SAME_RESULT.get(key)


def _short(value: Any) -> str:
    text = str(value)
    return text if len(text) <= 60 else text[:57] + "..."


# Files of LLaMA-Factory's that are not training configs, told apart by keys only they have
ACCELERATE_KEYS = ("compute_environment", "distributed_type", "main_training_function", "num_machines",
                   "machine_rank", "rdzv_backend")
V1_KEYS = ("model", "model_class", "train_dataset", "micro_batch_size", "peft_config", "dist_config",
           "kernel_config", "sample_backend")


def foreign_file_problem(mapping: dict[str, Any]) -> str | None:
    """The one refusal for an accelerate config or a LLaMA-Factory v1 config given as a training config."""
    keys = {str(key) for key in mapping}
    accelerate = [key for key in ACCELERATE_KEYS if key in keys]
    if len(accelerate) >= 2:
        return (f"This is an accelerate config file (it has {', '.join(f'`{k}`' for k in accelerate)}), not a "
                "training config; LLaMA-Factory passes it to `accelerate launch --config_file`. Here give the "
                "training config (model, dataset, method) instead, and launch several processes with torchrun: "
                "`torchrun --nproc-per-node N -m engine train TRAINING.yaml`, with FSDP set in the training config "
                "(`fsdp`, `fsdp_config`; see examples/sft_full_fsdp2_demo.yaml).")
    if keys and all(key.startswith("<") and key.endswith(">") for key in keys):
        return ("This is a file of new special tokens and their descriptions (LLaMA-Factory's "
                "`new_special_tokens_config`), not a training config; initialising tokens from descriptions is not "
                "supported here: list the tokens in a training config's `add_special_tokens` instead.")
    v1 = [key for key in V1_KEYS if key in keys]
    if len(v1) >= 2 and "model_name_or_path" not in keys:
        return (f"This is a LLaMA-Factory v1 config (it has {', '.join(f'`{k}`' for k in v1)}; the experimental "
                "format run with USE_V1=1), which is not read here. Write it with LLaMA-Factory's standard keys: "
                + "; ".join(_v1_translations(mapping)) + ".")
    return None


def _v1_translations(mapping: dict[str, Any]) -> list[str]:
    """How each part of this v1 file is written with the standard keys (only the parts it has)."""
    peft = mapping.get("peft_config") if isinstance(mapping.get("peft_config"), dict) else {}
    dist = mapping.get("dist_config") if isinstance(mapping.get("dist_config"), dict) else {}
    said = ["`model_name_or_path` for `model`"] if "model" in mapping else []
    if "export_dir" in peft:  # an export (merge) config: its adapter and target sit in peft_config
        said.append("`adapter_name_or_path`, `export_dir` and `export_size` at the top level for those in "
                    "`peft_config`, then `lf-engine export`")
        return said
    if "train_dataset" in mapping:
        said.append("`dataset` (a name in dataset_info.json) for `train_dataset`, with `stage: sft` and "
                    "`do_train: true`")
    if "micro_batch_size" in mapping:
        said.append("`per_device_train_batch_size` for `micro_batch_size`")
    if "global_batch_size" in mapping:
        said.append("`gradient_accumulation_steps` (times the batch size and the processes) for `global_batch_size`")
    if peft.get("name") == "freeze":
        said.append("`finetuning_type: freeze` with `freeze_trainable_layers`, `freeze_trainable_modules` and "
                    "`freeze_extra_modules` for `peft_config`")
    elif peft:
        said.append(f"`finetuning_type: {peft.get('name') or 'lora'}` with `lora_rank` (for `r`), `lora_alpha`, "
                    "`lora_dropout` and `lora_target` (for `target_modules`) for `peft_config`")
    elif "train_dataset" in mapping:
        said.append("`finetuning_type: full` (a v1 config without `peft_config` trains every weight)")
    if isinstance(mapping.get("quant_config"), dict):
        said.append("`quantization_bit` for `quant_config`")
    if dist.get("name") == "deepspeed":
        said.append("`deepspeed` (the JSON file's path) for `dist_config`")
    elif dist.get("name"):
        said.append("`fsdp: full_shard auto_wrap` with an FSDP2 `fsdp_config` for `dist_config`"
                    + (" (and `cp_size` for its context parallelism)" if "cp_size" in dist else ""))
    if "batching_strategy" in mapping:
        said.append("`max_tokens_per_batch` for `batching_strategy: dynamic_batching` (padding-free batches are "
                    "the default here)")
    return said


WHOLE_VAL_SIZE = ("`val_size: 1.0` is the fraction 1.0 of the rows: all held out, none left to train on; "
                  "LLaMA-Factory refuses it too. Give a fraction below 1 (`val_size: 0.1` holds out a tenth) or a "
                  "row count without a decimal point (`val_size: 1` holds out one row).")


INTERLEAVE_ONCE = ("`mix_strategy: interleave_once` (each row drawn once, without replacement) is one of LLaMA-Factory "
                   "0.9.5's choices, but the `datasets` it requires (4.0.0 at most) has no such stopping strategy, so "
                   "its run stops on it (\"all_exhausted_without_replacement is not supported\"). Use `interleave_over` "
                   "(until every dataset is used up, repeating rows of the shorter ones), `interleave_under` (until the "
                   "first one is used up) or `concat`.")


def whole_fraction(value: Any) -> bool:
    """Whether ``val_size`` was written as the fraction 1.0: LLaMA-Factory reads a value up to 1 as a fraction and
    above 1 as a count, by its value as written, so ``1.0`` asks ``datasets`` for a split that leaves no training row
    (refused there) while the whole number ``1`` holds out one row."""
    return isinstance(value, float) and value == 1.0

