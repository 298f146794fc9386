"""Every key LLaMA-Factory 0.9.5 defines is known here: it works, or changes nothing at LLaMA-Factory's default and is
refused with the true reason at any other value. Never "Unknown key" for a config LLaMA-Factory accepts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import ConfigError, build_config, lf_keys
from engine.config.hf_values import hf_training_keys
from engine.config.loader import all_keys
from engine.config.method_checks import REFUSED_WHEN_SET
from engine.credentials import SECRET_KEYS

REPO = Path(__file__).resolve().parents[2]
LF = json.loads((REPO / "tests" / "fixtures" / "lf_0_9_5_keys.json").read_text(encoding="utf-8"))
BASE = {"model_name_or_path": "demo", "stage": "sft", "do_train": True, "finetuning_type": "lora",
        "dataset": "demo_alpaca", "dataset_dir": str(REPO / "examples" / "data"), "output_dir": "out",
        "report_to": "none"}
# keys whose LLaMA-Factory default cannot stand alone in a config (LLaMA-Factory refuses them too)
REQUIRED = {"model_name_or_path"}


def problems_of(mapping: dict) -> list[str]:
    try:
        build_config({**BASE, **mapping})
    except ConfigError as err:
        return list(err.problems)
    return []


def lf_default(value):
    return "reuse_dataset_if_exists" if isinstance(value, str) and value.startswith("<DownloadMode") else value


@pytest.mark.parametrize("key", sorted(set(LF["lf"]) - REQUIRED))
def test_each_llama_factory_key_at_its_default_is_accepted(key):
    problems = problems_of({key: lf_default(LF["lf"][key][1])})
    assert not any(p.startswith("Unknown key") for p in problems), problems
    if key in lf_keys.BENCHMARK_KEYS:  # llamafactory-cli eval's own keys: refused at any value, with the reason
        assert len(problems) == 1 and "llamafactory-cli eval" in problems[0]
    else:
        assert problems == []


def test_each_seq2seq_training_key_llama_factory_takes_is_known():
    known = set(all_keys()) | hf_training_keys() | set(REFUSED_WHEN_SET) | set(SECRET_KEYS)
    assert [key for key in LF["seq2seq"] if key not in known and not lf_keys.handles(key)] == []


@pytest.mark.parametrize("mapping, expected", [
    ({"quantization_method": "hqq"}, "`quantization_method: hqq`: Quantization here is bitsandbytes only"),
    ({"pref_bco_weight": 0.5}, "`pref_bco_weight: 0.5`: The BCO term of DPO is not available here"),
    ({"ld_alpha": 0.5}, "LD-DPO's length weighting is not implemented here"),
    ({"ignore_pad_token_for_loss": False}, "Padding is never trained here"),
    ({"use_kv_cache": "false"}, "always uses the KV cache"),
    ({"kt_cpu_activation": True}, "KTransformers is not available here"),  # a newer release's member of the family
    ({"use_swanlab": True}, "set `report_to: swanlab` instead"),
    ({"fp8": True}, "FP8 training is not available here"),
    ({"vllm_maxlen": 8192}, "The vLLM inference backend is not available here"),
    ({"ppo_epochs": 2}, "PPO is not available"),
    ({"batch_size": 8}, "per_device_train_batch_size"),
])
def test_a_value_other_than_llama_factorys_default_is_refused_with_the_reason(mapping, expected):
    problems = problems_of(mapping)
    assert len(problems) == 1 and expected in problems[0], problems


def test_defaults_written_in_any_spelling_are_accepted():
    assert problems_of({"vllm_maxlen": "4096", "ppo_target": 6, "reward_model_type": "LoRA", "use_kv_cache": "true",
                        "quantization_method": "BNB", "offload_folder": "offload", "kt_weight_path": "null",
                        "use_reentrant_gc": False, "sortish_sampler": False}) == []


def test_a_lark_secret_is_never_quoted_back():
    problems = problems_of({"swanlab_lark_secret": "s3cr3t-v4lue", "swanlab_lark_webhook_url": "https://x/hook/t0k3n"})
    assert len(problems) == 1 and "`swanlab_lark_secret`, `swanlab_lark_webhook_url`: " in problems[0]
    assert not any("s3cr3t" in p or "t0k3n" in p for p in problems)


def test_the_swanlab_api_key_is_a_secret_kept_out_of_the_config():
    cfg = build_config({**BASE, "swanlab_api_key": "sk-swan-123456"})
    assert cfg.secrets == {"SWANLAB_API_KEY": "sk-swan-123456"}
    assert "sk-swan-123456" not in cfg.to_yaml(minimal=False) + repr(cfg)
    assert any("SWANLAB_API_KEY" in note for note in cfg.notes)


def test_generation_max_length_counts_only_without_max_new_tokens_as_in_llama_factory():
    assert build_config({**BASE}).generation.max_new_tokens == 1024  # LLaMA-Factory's default
    cfg = build_config({**BASE, "max_length": 2048})  # ignored there while max_new_tokens is positive
    assert cfg.generation.max_new_tokens == 1024 and any("`max_length: 2048` is ignored" in n for n in cfg.notes)
    assert not any("max_length" in n for n in build_config({**BASE, "max_length": 1024}).notes)
    problems = problems_of({"max_new_tokens": -1, "max_length": 300})
    assert any("caps prompt and reply together at max_length" in p for p in problems), problems
    assert lf_keys.handles("max_length")
    assert problems_of({"max_length": "abc"}) == ["`max_length: abc` must be a whole number of tokens, as in "
                                                  "LLaMA-Factory."]


def test_temperature_0_decodes_greedily_as_in_llama_factorys_chat():
    from engine.infer.generation import generation_kwargs

    cfg = build_config({**BASE, "temperature": 0})
    kwargs = generation_kwargs(cfg.generation, [2], 0)
    assert kwargs["do_sample"] is False and kwargs["temperature"] == 1.0  # greedy, with neutral sampling values


def test_reentrant_checkpointing_says_what_happens_instead():
    cfg = build_config({**BASE, "use_reentrant_gc": True})
    assert any("non-reentrant" in note for note in cfg.notes)


@pytest.mark.parametrize("value", [True, False])
def test_low_cpu_mem_usage_says_it_changes_nothing(value):
    """transformers 5 loads weights lazily whatever the switch; the key was accepted and silently ignored."""
    cfg = build_config({**BASE, "low_cpu_mem_usage": value})
    assert any("`low_cpu_mem_usage`: weights always load lazily here" in note for note in cfg.notes)


def test_llamaboards_qlora_keys_and_a_chunk_size_build():
    cfg = build_config({**BASE, "quantization_bit": 4, "quantization_method": "bnb", "double_quantization": False,
                        "quantization_type": "fp4", "preprocessing_batch_size": 500})
    assert (cfg.model.quantization_type, cfg.model.double_quantization) == ("fp4", False)
    assert cfg.data.preprocessing_batch_size == 500
    assert problems_of({"quantization_type": "int4"})  # not a bitsandbytes 4-bit type


@pytest.mark.parametrize("mapping, expected", [
    ({"early_stopping_steps": 2}, "set `eval_strategy: steps`"),
    ({"early_stopping_steps": 2, "val_size": 0.1, "eval_strategy": "steps", "eval_steps": 3, "save_steps": 10},
     "`save_steps` (10) must be a multiple of `eval_steps` (3)"),
    ({"early_stopping_steps": 2, "val_size": 0.1, "eval_strategy": "epoch", "save_strategy": "steps"},
     "set `save_strategy: epoch`"),
])
def test_early_stopping_needs_evaluations_and_saves_that_match(mapping, expected):
    problems = problems_of(mapping)
    assert len(problems) == 1 and expected in problems[0], problems


def test_early_stopping_builds_with_matching_evaluation_and_saves():
    cfg = build_config({**BASE, "early_stopping_steps": 2, "val_size": 0.1, "eval_strategy": "steps",
                        "eval_steps": 5, "save_steps": 10})
    assert cfg.methods.early_stopping_steps == 2


def test_keys_refused_for_one_reason_share_one_line():
    problems = problems_of({"tensor_model_parallel_size": 2, "sequence_parallel": True, "use_kt": True,
                            "kt_cpu_activation": "retain"})
    assert len(problems) == 2
    assert problems[0].startswith("`tensor_model_parallel_size: 2`, `sequence_parallel: True`: Megatron-Core")
    assert problems[1].startswith("`use_kt: True`, `kt_cpu_activation: retain`: KTransformers")


@pytest.mark.parametrize("mapping, expected", [
    ({"compute_environment": "LOCAL_MACHINE", "distributed_type": "FSDP", "num_processes": 2},
     "This is an accelerate config file"),
    ({"model": "Qwen/Qwen3-4B", "train_dataset": "data/v1_sft_demo.yaml", "micro_batch_size": 1},
     "This is a LLaMA-Factory v1 config"),
    ({"<|START_OF_SVG|>": "Marks the beginning of an SVG document", "<|END_OF_SVG|>": "Marks the end"},
     "`new_special_tokens_config`"),
])
def test_files_that_are_not_training_configs_are_named(mapping, expected):
    with pytest.raises(ConfigError) as err:
        build_config(mapping)
    assert len(err.value.problems) == 1 and expected in err.value.problems[0]


@pytest.mark.parametrize("mapping, said, not_said", [
    # LLaMA-Factory 0.9.5's examples/v1/train_lora/export_lora.yaml: a merge, not a LoRA training
    ({"model": "Qwen/Qwen3-4B", "peft_config": {"name": "lora", "adapter_name_or_path": "./outputs/test_lora",
                                                 "export_dir": "./merge_lora_model", "export_size": 5}},
     ["`adapter_name_or_path`, `export_dir`", "lf-engine export"], ["do_train", "lora_rank", "train_dataset"]),
    # examples/v1/train_full/train_full_deepspeed.yaml: full fine-tuning over DeepSpeed
    ({"model": "Qwen/Qwen3-0.6B", "model_class": "llm", "train_dataset": "data/v1_sft_demo.yaml",
      "dist_config": {"name": "deepspeed", "config_file": "examples/deepspeed/ds_z3_config.json"}},
     ["`finetuning_type: full`", "`deepspeed` (the JSON file's path) for `dist_config`"], ["lora", "fsdp"]),
    # examples/v1/train_freeze/train_freeze_sft.yaml
    ({"model": "Qwen/Qwen3-4B", "train_dataset": "d.yaml", "global_batch_size": 4,
      "peft_config": {"name": "freeze", "freeze_trainable_layers": 2}, "dist_config": {"name": "fsdp2"}},
     ["`finetuning_type: freeze`", "`global_batch_size`", "`fsdp: full_shard auto_wrap`"], ["lora"]),
    # examples/v1/train_qlora/quantization.yaml
    ({"model": "Qwen/Qwen3-0.6B", "train_dataset": "d.yaml", "peft_config": {"name": "lora", "r": 16},
      "quant_config": {"name": "bnb", "quantization_bit": 4}},
     ["`finetuning_type: lora`", "`quantization_bit` for `quant_config`"], ["finetuning_type: full"]),
])
def test_a_v1_config_is_translated_as_it_is(mapping, said, not_said):
    """The v1 refusal told every v1 file to become a LoRA sft training (`finetuning_type: lora` ..., `do_train: true`),
    the export config and the full/DeepSpeed ones too, and left out the parts they do have."""
    with pytest.raises(ConfigError) as err:
        build_config(mapping)
    (problem,) = err.value.problems
    assert "LLaMA-Factory v1 config" in problem
    assert all(part in problem for part in said), problem
    assert not any(part in problem for part in not_said), problem


def test_a_file_that_is_not_a_training_config_is_named_with_overrides_too(tmp_path):
    """`key=value` overrides add training keys, which must not hide what the file is (16 "Unknown key" lines)."""
    import yaml

    from engine.config import load_config

    path = tmp_path / "tokens_cfg.yaml"
    path.write_text(yaml.safe_dump({"<|START_OF_SVG|>": "Marks the beginning", "<|END_OF_SVG|>": "Marks the end"}))
    with pytest.raises(ConfigError) as err:
        load_config(path, ["dataset_dir=data", "model_name_or_path=demo"])
    assert len(err.value.problems) == 1 and "`new_special_tokens_config`" in err.value.problems[0]


def test_adapter_folder_is_the_subfolder_of_each_adapter(tmp_path):
    cfg = build_config({**BASE, "adapter_name_or_path": f"{tmp_path}/a,{tmp_path}/b", "adapter_folder": "sub"})
    assert cfg.model.adapter_name_or_path == f"{tmp_path}/a/sub,{tmp_path}/b/sub"
    assert any("adapters are loaded from" in note for note in cfg.notes)
    assert "adapter_folder:" not in cfg.to_yaml(minimal=False)  # the saved config names the joined folders
    assert build_config({**BASE, "adapter_folder": None}).model.adapter_name_or_path is None
    problems = problems_of({"adapter_folder": "sub"})
    assert len(problems) == 1 and "`adapter_name_or_path`, which is empty" in problems[0]
