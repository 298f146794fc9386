"""The method keys (GaLore, RoPE scaling, the profiler, ...) are advanced fields of the Train tab."""

from __future__ import annotations

import gradio as gr

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


def test_loading_a_config_points_out_a_misspelt_key_and_names_an_unreadable_file(board, tmp_path):
    """A loaded file's `learning_rat: 0.1` was listed with `run_name` as "not in the form" only, as if left out on
    purpose; a broken YAML file was reported in English on a Chinese page, under gradio's temporary path."""
    from engine.config import all_keys

    keys = [k for k, (section, _) in all_keys().items() if section in train.ADVANCED_SECTIONS]
    mapping = {"model_name_or_path": "demo", "learning_rat": 0.1, "run_name": "exp-7", "lora_rnak": 8}
    message = train.loaded_message("zh", "x.yaml", mapping, keys)
    assert "`learning_rat`：是否想写 `learning_rate`？" in message and "`lora_rnak`：是否想写 `lora_rank`？" in message
    assert "run_name`：是否" not in message  # a real key of other tools, not a typo
    assert "`learning_rat`: did you mean `learning_rate`?" in train.loaded_message("en", "x.yaml", mapping, keys)

    from app.ui import build_ui

    demo = build_ui(board)
    loader = next(b for b in demo.blocks.values() if isinstance(b, gr.File) and '"train_load_file"' in str(b.label))
    fn = next(f for f in demo.fns.values() if (loader._id, "upload") in f.targets)
    broken = tmp_path / "gradio-copy" / "broken.yaml"
    broken.parent.mkdir()
    broken.write_text("model_name_or_path: demo\n  stage: [sft\n")
    out = fn.fn(str(broken), "zh")
    assert out[0].startswith("无法读取 `broken.yaml`，表单未改动：") and "gradio-copy" not in out[0], out[0]
    assert all(isinstance(v, type(gr.skip())) for v in out[1:])


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
