"""LLaMA Pro: `lf-engine expand` adds zero-output blocks (the model computes what it did), and `use_llama_pro`
trains only those blocks, as LLaMA-Factory selects them (freeze tuning, and LoRA targets)."""

from __future__ import annotations

import json
import logging

import pytest
import torch

from engine.cli import main
from engine.config import ConfigError, load_config
from engine.models.adapters import llama_pro_layers
from engine.models.block_expansion import expanded_state_dict


def test_the_expanded_blocks_are_every_strideth_layer_as_llama_factory_picks_them():
    assert list(llama_pro_layers(12, 4)) == [2, 5, 8, 11]  # 8 layers + 4 expanded: one after every 2 originals
    assert list(llama_pro_layers(6, 2)) == [2, 5]
    from engine.models.adapters import ModelError

    with pytest.raises(ModelError, match="does not fit this model's 12 layers"):
        llama_pro_layers(12, 5)


def test_expansion_names_copies_and_zeroes_the_output_projections():
    state = {f"model.layers.{i}.{name}": torch.full((2,), float(i + 1)) for i in range(4)
             for name in ("self_attn.o_proj.weight", "self_attn.q_proj.weight", "mlp.down_proj.weight")}
    state["model.embed_tokens.weight"] = torch.ones(3)
    out = expanded_state_dict(state, 4, 2)
    assert [k for k in out if k.endswith("q_proj.weight")] == [f"model.layers.{i}.self_attn.q_proj.weight"
                                                                for i in range(6)]
    assert out["model.layers.2.self_attn.q_proj.weight"].tolist() == [2.0, 2.0]  # a copy of layer 1
    assert out["model.layers.2.self_attn.o_proj.weight"].tolist() == [0.0, 0.0]
    assert out["model.layers.2.mlp.down_proj.weight"].tolist() == [0.0, 0.0]
    assert out["model.layers.5.self_attn.q_proj.weight"].tolist() == [4.0, 4.0] and "model.embed_tokens.weight" in out


def test_an_expanded_model_computes_what_the_original_did_and_trains_only_its_new_blocks(tmp_path, capsys, caplog):
    from transformers import AutoModelForCausalLM

    from engine.demo import ensure_demo_model

    demo = ensure_demo_model()
    layers = json.loads((demo / "config.json").read_text())["num_hidden_layers"]
    target = tmp_path / "pro"
    assert main(["expand", "demo", str(target), "--num-expand", str(layers)]) == 0
    assert json.loads((target / "config.json").read_text())["num_hidden_layers"] == 2 * layers
    ids = torch.tensor([[5, 17, 42, 7, 99, 3]])
    with torch.no_grad():
        before = AutoModelForCausalLM.from_pretrained(demo, dtype=torch.float32)(ids).logits
        after = AutoModelForCausalLM.from_pretrained(target, dtype=torch.float32)(ids).logits
    assert torch.allclose(before, after, atol=1e-4)
    assert main(["expand", "demo", str(target), "--num-expand", "1"]) != 0  # not an empty folder
    assert "not empty" in capsys.readouterr().err

    out = tmp_path / "run"
    caplog.set_level(logging.INFO, logger="engine")
    assert main(["train", "examples/sft_full_demo.yaml", f"model_name_or_path={target}", "finetuning_type=freeze",
                 "use_llama_pro=true", f"freeze_trainable_layers={layers}", f"output_dir={out}", "max_steps=1",
                 "save_strategy=no", "plot_loss=false"]) == 0
    expected = list(llama_pro_layers(2 * layers, layers))
    assert any(f"layers {expected} of model.layers trainable" in r.getMessage() for r in caplog.records)

    cfg = load_config(None, {"model_name_or_path": str(target), "stage": "sft", "finetuning_type": "lora",
                             "dataset": "demo_sft", "output_dir": str(out), "use_llama_pro": True,
                             "freeze_trainable_layers": layers})
    from engine.models import load_model

    model = load_model(cfg.model, cfg.finetuning, is_trainable=True)
    adapted = {int(name.split(".layers.")[1].split(".")[0]) for name, _ in model.named_parameters() if "lora_A" in name}
    assert adapted == set(expected)


def test_an_output_that_cannot_be_a_folder_is_refused_before_the_model_loads(tmp_path, capsys, monkeypatch):
    """`lf-engine expand demo FILE` loaded the model and expanded it, then ended in a NotADirectoryError traceback;
    a bad --num-expand leaves no folder behind."""
    from transformers import AutoModelForCausalLM

    from engine.cli import EXIT_USER_ERROR

    monkeypatch.setattr(AutoModelForCausalLM, "from_pretrained", lambda *a, **k: pytest.fail("the model loaded"))
    (tmp_path / "a_file").write_text("x")
    for given, words in ((tmp_path / "a_file", "is a file; give a new folder"),
                         (tmp_path / "a_file" / "sub", "cannot be made: Not a directory; give a new folder")):
        assert main(["expand", "demo", str(given), "--num-expand", "1"]) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert words in err and "Traceback" not in err, err
    assert main(["expand", "demo", str(tmp_path / "odd"), "--num-expand", "0"]) == EXIT_USER_ERROR
    assert "positive divisor" in capsys.readouterr().err and not (tmp_path / "odd").exists()


def test_use_llama_pro_is_a_key_now():
    assert load_config(None, {"model_name_or_path": "demo", "finetuning_type": "freeze", "use_llama_pro": True,
                              "dataset": "demo_sft", "output_dir": "o"}).finetuning.use_llama_pro
    with pytest.raises(ConfigError, match="Unknown key"):
        load_config(None, {"model_name_or_path": "demo", "use_lama_pro": True})
