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
