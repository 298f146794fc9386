"""The method keys (GaLore, RoPE scaling, the profiler, ...) are advanced fields of the Train tab."""

from __future__ import annotations

from app import forms, widgets
from app.tabs import train
from engine.config import build_config


def test_method_keys_are_advanced_train_fields_with_typed_widgets():
    keys = widgets.advanced_keys(train.ADVANCED_SECTIONS)
    assert {"use_galore", "loraplus_lr_ratio", "rope_scaling", "profile_modules", "oft_block_size"} <= set(keys)
    assert widgets.widget_kind("rope_scaling") == "dropdown"
    assert widgets.choices_of("rope_scaling") == ["none", "linear", "dynamic", "yarn", "llama3"]
    assert widgets.from_widget("rope_scaling", "none") is None
    assert widgets.widget_kind("use_galore") == "checkbox"
    assert widgets.widget_kind("profile_modules") == "text"


def test_form_values_with_a_method_build_a_valid_config():
    top = forms.TopValues.of("demo", "full", None, "chatml")
    fields = {key: widgets.from_widget(key, widgets.to_widget(key, None)) for key in ("loraplus_lr_ratio",)}
    fields.update({"use_galore": True, "galore_rank": 8, "rope_scaling": "linear",
                   "profile_modules": "*.layers.0.mlp"})
    mapping = forms.train_mapping(top, "sft", "examples/data", ["demo_identity"], [], fields)
    cfg = build_config(mapping)
    assert cfg.methods.use_galore and cfg.methods.galore_rank == 8 and cfg.methods.rope_scaling == "linear"
    assert cfg.finetuning.finetuning_type == "full" and cfg.methods.profile_modules == "*.layers.0.mlp"


def test_loading_a_config_names_the_keys_the_form_does_not_carry():
    from engine.config import all_keys

    keys = [k for k, (section, _) in all_keys().items() if section in train.ADVANCED_SECTIONS]
    mapping = {"model_name_or_path": "demo", "stage": "sft", "output_dir": "saves/x", "learning_rate": 1e-4,
               "run_name": "exp-7", "ld_alpha": 0.5, "save_only_model": False, "use_swanlab": False,
               "vllm_maxlen": 4096, "hf_hub_token": "hf_secret_value_123", "include_num_input_tokens_seen": True}
    message = train.loaded_message("en", "lf.yaml", mapping, keys)
    assert message.startswith("Loaded `lf.yaml`. Not in the form, so not loaded")
    assert "not loaded (Start would run without them): `run_name: exp-7`, `ld_alpha: 0.5`, `hf_hub_token`." in message
    assert "hf_secret_value_123" not in message and "lf-engine train lf.yaml" in message
    for quiet in ("learning_rate", "output_dir", "save_only_model", "use_swanlab", "vllm_maxlen", "include_num"):
        assert quiet not in message  # in the form, set for every run, or changing nothing
    assert train.loaded_message("zh", "a.yaml", {"learning_rate": 1e-4}, keys) == "已加载 `a.yaml`。"


def test_fsdp_settings_given_inline_reach_the_form_as_json_and_come_back_the_same():
    # a loaded YAML with `fsdp_config:` as a mapping (transformers' form): the text box shows JSON, Start sends it
    settings = {"fsdp_version": 2, "fsdp_offload_params": False}
    assert "fsdp_config" in widgets.advanced_keys(train.ADVANCED_SECTIONS)
    shown = widgets.to_widget("fsdp_config", settings)
    assert shown == '{"fsdp_version": 2, "fsdp_offload_params": false}'
    top = forms.TopValues.of("demo", "full", None, "chatml")
    mapping = forms.train_mapping(top, "sft", "examples/data", ["demo_identity"], [],
                                  {"fsdp": "full_shard auto_wrap", "fsdp_config": widgets.from_widget("fsdp_config", shown)})
    from engine.train.parallel.fsdp import resolve_fsdp

    cfg = build_config(mapping)
    assert resolve_fsdp(cfg.train.fsdp, cfg.train.fsdp_config)["offload_params"] is False
