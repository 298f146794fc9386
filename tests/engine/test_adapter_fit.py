"""An adapter whose layer names this model does not have (trained on another model family, e.g. a vision-language
model's `model.language_model.layers` against a text model's `model.layers`) loads none of its weights: PEFT only
warns, and export, chat and eval went on with the untrained adapter (an export 'passed' and was the base model)."""

import json
import logging
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from engine.cli import EXIT_USER_ERROR, main


def _tiny(folder: Path, tokenizer) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _adapter(model: Path, folder: Path, rename=lambda key: key) -> Path:
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    torch.manual_seed(1)
    lora = get_peft_model(AutoModelForCausalLM.from_pretrained(model),
                          LoraConfig(r=4, target_modules=["q_proj", "v_proj"], init_lora_weights=False))
    lora.save_pretrained(folder)
    weights = load_file(folder / "adapter_model.safetensors")
    save_file({rename(key): value for key, value in weights.items()}, str(folder / "adapter_model.safetensors"))
    return folder


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, tokenizer_factory) -> Path:
    return _tiny(tmp_path_factory.mktemp("fit") / "model", tokenizer_factory())


def _export(model: Path, adapter: Path, out: Path) -> int:
    return main(["export", "-", f"model_name_or_path={model}", "template=chatml", f"adapter_name_or_path={adapter}",
                 "finetuning_type=lora", f"export_dir={out}"])


def test_an_adapter_of_another_model_family_is_refused(model_dir, tmp_path, capsys, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("{}\n"))
    adapter = _adapter(model_dir, tmp_path / "vlm-adapter",
                       lambda key: key.replace("model.layers.", "model.language_model.layers."))
    assert _export(model_dir, adapter, tmp_path / "merged") == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"Adapter `{adapter}` does not fit this model: none of its weights match a layer" in err, err
    assert "model.layers.0.self_attn.q_proj.lora_A.default.weight" in err and "model_name_or_path" in err
    assert not (tmp_path / "merged").exists()


def test_an_adapter_that_fits_in_part_is_a_warning(model_dir, tmp_path, capsys, caplog, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("{}\n"))
    caplog.set_level(logging.WARNING, logger="engine")
    adapter = _adapter(model_dir, tmp_path / "half", lambda key: key.replace("layers.1.", "layers.7."))
    assert _export(model_dir, adapter, tmp_path / "merged") == 0, capsys.readouterr().err
    notes = [r.getMessage() for r in caplog.records if "fits this model only in part" in r.getMessage()]
    assert notes and "4 of its 8 weights have no layer here" in notes[0], notes


def test_a_fitting_adapter_loads_without_a_note(model_dir, tmp_path, capsys, caplog, monkeypatch):
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO("{}\n"))
    caplog.set_level(logging.WARNING, logger="engine")
    adapter = _adapter(model_dir, tmp_path / "good")
    assert _export(model_dir, adapter, tmp_path / "merged") == 0, capsys.readouterr().err
    assert not [r for r in caplog.records if "fits this model" in r.getMessage()]


def test_an_adapter_given_as_the_model_names_both_keys(tmp_path, capsys):
    """A LoRA run's output in `model_name_or_path` (a common slip) says how to load it, not only 'no config.json'."""
    adapter = tmp_path / "sft-lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA", "base_model_name_or_path": "/models/base"}')
    config = tmp_path / "chat.yaml"
    config.write_text(f"model_name_or_path: {adapter}\ntemplate: chatml\n")
    assert main(["check", "--for", "chat", str(config)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert f"`model_name_or_path: {adapter}` is a LoRA adapter" in err, err
    assert f"`adapter_name_or_path: {adapter}` and `model_name_or_path: /models/base` (its base model)" in err
    demo_cache = tmp_path / "demo-model"  # a demo run's adapter names the demo's cache folder: `demo` is suggested
    demo_cache.mkdir()
    (demo_cache / "lf_demo.json").write_text("{}")
    (adapter / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA",
                                                             "base_model_name_or_path": str(demo_cache)}))
    assert main(["check", "--for", "chat", str(config)]) == EXIT_USER_ERROR
    assert "`model_name_or_path: demo` (its base model)" in capsys.readouterr().err


def test_a_ref_model_that_is_an_adapter_or_missing_is_named_before_training(tmp_path, capsys):
    """`ref_model` was loaded only after the policy model, and an adapter folder there was reported as
    '`model_name_or_path` ... has no config.json' (the wrong key)."""
    adapter = tmp_path / "sft-lora"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text('{"peft_type": "LORA"}')
    config = tmp_path / "dpo.yaml"
    config.write_text("model_name_or_path: demo\ntemplate: chatml\nstage: dpo\ndataset: demo_dpo\n"
                      f"dataset_dir: {Path(__file__).resolve().parents[2] / 'examples' / 'data'}\n"
                      f"output_dir: {tmp_path / 'out'}\n")
    for ref, words in ((adapter, "is a LoRA adapter, not a model"), (tmp_path / "nowhere", "is not a model folder")):
        assert main(["check", str(config), f"ref_model={ref}"]) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert f"`ref_model: {ref}` {words}" in err and "model_name_or_path" not in err, err


def test_a_reward_adapter_on_a_language_model_is_named(model_dir, tmp_path, capsys, caplog):
    """Chat, predict or the api with a `stage: rm` run's adapter merged its LoRA into the language model and
    dropped its score head without a word."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForSequenceClassification

    reward = get_peft_model(AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=1),
                            LoraConfig(task_type="SEQ_CLS", r=4, target_modules=["q_proj", "v_proj"]))
    reward.save_pretrained(tmp_path / "rm")
    caplog.set_level(logging.WARNING, logger="engine")
    config = tmp_path / "chat.yaml"
    config.write_text(f"model_name_or_path: {model_dir}\ntemplate: chatml\nadapter_name_or_path: {tmp_path / 'rm'}\n"
                      "max_new_tokens: 2\n")
    code = main(["chat", str(config), "--query", "hi"])
    assert code == 0, capsys.readouterr().err
    notes = [r.getMessage() for r in caplog.records if "is a reward model's (stage rm)" in r.getMessage()]
    assert notes and "score head is left out" in notes[0]
