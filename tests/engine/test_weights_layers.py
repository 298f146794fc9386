"""A model folder whose config.json names more decoder layers than its weights hold is refused before it loads:
transformers fills the missing layers with random values and goes on (a copy of the demo model whose config.json
named 400 layers beside weights of 4 trained to "completed"), and a config naming a million layers would take their
memory before anything said why."""

import json

import numpy as np
from safetensors.numpy import save_file

from engine.preflight import _check_model_folder
from engine.weights_layers import layer_count_problem


def folder_with(tmp_path, config, layers=4, prefix="model.layers"):
    tensors = {f"{prefix}.{i}.mlp.up_proj.weight": np.zeros((2, 2), np.float32) for i in range(layers)}
    tensors["model.embed_tokens.weight"] = np.zeros((4, 2), np.float32)
    save_file(tensors, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    return tmp_path


def test_a_config_naming_more_layers_than_the_weights_hold_is_refused_with_both_counts(tmp_path):
    folder = folder_with(tmp_path, {"model_type": "llama", "num_hidden_layers": 1_000_000})
    problems = _check_model_folder(str(folder), folder)
    assert len(problems) == 1
    assert "names 1,000,000 layers (num_hidden_layers), but its weights hold 4" in problems[0]
    assert "999,996 would be made up at random" in problems[0] and "Copy config.json again" in problems[0]


def test_weights_that_match_or_cannot_be_told_pass(tmp_path):
    assert layer_count_problem(folder_with(tmp_path, {}), {"num_hidden_layers": 4}, "k", "n") is None
    assert layer_count_problem(tmp_path, {"num_hidden_layers": 3}, "k", "n") is None  # an extra (MTP) layer
    assert layer_count_problem(tmp_path, {"num_hidden_layers": 9, "text_config": {}}, "k", "n") is None  # composite
    assert layer_count_problem(tmp_path, {"num_hidden_layers": "9"}, "k", "n") is None  # the config check says it
    gpt2 = tmp_path / "gpt2"
    gpt2.mkdir()
    folder_with(gpt2, {}, layers=2, prefix="transformer.h")
    assert "but its weights hold 2" in layer_count_problem(gpt2, {"num_hidden_layers": 12}, "k", "n")
    plain = tmp_path / "mamba"
    plain.mkdir()
    folder_with(plain, {}, layers=2, prefix="backbone.blocks")  # no layer names this check knows
    assert layer_count_problem(plain, {"num_hidden_layers": 12}, "k", "n") is None
