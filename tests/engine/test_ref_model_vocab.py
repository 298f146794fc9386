"""A DPO/KTO `ref_model` with another tokenizer than the trained model is refused, naming both models: at pre-flight
from the saved tokenizer files (exit status 2 before anything loads), and again when the reference loads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.cli import EXIT_USER_ERROR, main
from engine.errors import ModelError

PAIRS = [{"instruction": f"Pick {i}", "output": [f"good {i}", f"bad {i}"]} for i in range(4)]


def _tiny_model(folder: Path, tokenizer) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def ws(tmp_path_factory, tokenizer_factory):
    root = tmp_path_factory.mktemp("ref-vocab")
    _tiny_model(root / "policy", tokenizer_factory())
    _tiny_model(root / "same", tokenizer_factory())  # another model with the same tokenizer
    _tiny_model(root / "other", tokenizer_factory(markers=["<x>", "<y>"]))  # another vocabulary
    data = root / "data"
    data.mkdir()
    (data / "pairs.json").write_text(json.dumps(PAIRS), encoding="utf-8")
    (data / "dataset_info.json").write_text(json.dumps({"pairs": {"file_name": "pairs.json", "ranking": True}}),
                                            encoding="utf-8")
    (root / "dpo.yaml").write_text(
        f"model_name_or_path: {root / 'policy'}\ntemplate: chatml\nstage: dpo\ndo_train: true\nfinetuning_type: "
        f"lora\nlora_target: all\ndataset: pairs\ndataset_dir: {data}\ncutoff_len: 64\nmax_steps: 1\n"
        "per_device_train_batch_size: 2\nsave_strategy: 'no'\nreport_to: none\nplot_loss: false\n"
        f"output_dir: {root / 'out'}\noverwrite_output_dir: true\n", encoding="utf-8")
    return root


def _run(capsys, *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("stage", ["stage=dpo", "stage=kto"])
def test_a_reference_of_another_vocabulary_is_refused_before_training(ws, capsys, stage):
    code, err = _run(capsys, "train", str(ws / "dpo.yaml"), stage, f"ref_model={ws / 'other'}")
    assert code == EXIT_USER_ERROR, err
    assert f"`ref_model: {ws / 'other'}` has another vocabulary" in err
    assert f"`model_name_or_path: {ws / 'policy'}`" in err
    assert "remove `ref_model`" in err
    assert not (ws / "out").exists()  # refused at pre-flight, nothing trained


def test_check_names_the_mismatch_and_passes_a_reference_with_the_same_tokenizer(ws, capsys):
    code, err = _run(capsys, "check", str(ws / "dpo.yaml"), f"ref_model={ws / 'other'}")
    assert code == EXIT_USER_ERROR and "has another vocabulary" in err
    code, err = _run(capsys, "check", str(ws / "dpo.yaml"), f"ref_model={ws / 'same'}")
    assert code == 0, err
    code, err = _run(capsys, "check", str(ws / "dpo.yaml"), "pref_loss=orpo", f"ref_model={ws / 'other'}")
    assert code == 0, err  # ORPO scores with no reference: its ref_model is never loaded


def test_the_reference_is_checked_again_as_it_loads(ws, monkeypatch):
    """Where pre-flight could not read both tokenizers (a hub model not cached yet), the loaded reference's
    tokenizer is compared with the policy's before its weights load."""
    from engine.config import build_config
    from engine.models import load_tokenizer
    from engine.train import preference

    cfg = build_config({"model_name_or_path": str(ws / "policy"), "stage": "dpo", "ref_model": str(ws / "other")})
    policy = load_tokenizer(cfg.model)
    with pytest.raises(ModelError, match="has another vocabulary.*`model_name_or_path: .*policy`"):
        preference.load_ref_model(cfg, policy)
    same = build_config({"model_name_or_path": str(ws / "policy"), "stage": "dpo", "ref_model": str(ws / "same")})
    assert preference.load_ref_model(same, policy) is not None
    policy.add_special_tokens({"additional_special_tokens": ["<|new|>"]})  # as a template's stop word is added
    with pytest.raises(ModelError, match=r"has \d+ token embeddings, but the tokenizer of .* cannot score ids"):
        preference.load_ref_model(same, policy)  # (an index error in the reference's forward, where the id occurs)


def test_tokens_added_after_the_reference_vocabulary_are_no_mismatch():
    """A template's or `add_special_tokens` tokens take ids past the reference's last one: the ids the reference
    knows still mean the same tokens. Tokens only the reference has are no problem either."""
    from engine.models.vocab_match import too_few_rows, vocab_mismatch

    base = {"a": 0, "b": 1, "c": 2}
    assert vocab_mismatch({**base, "<new>": 3}, base, "p", "r") is None
    assert vocab_mismatch(base, {**base, "d": 3}, "p", "r") is None
    problem = vocab_mismatch({"a": 0, "x": 1, "c": 2}, base, "p", "r")
    assert "1 of its 3 tokens" in problem and "'x' is id 1 in `p` and none in `r`" in problem
    assert "'b' is id 1 in `p` and id 2 in `r`" in vocab_mismatch({"a": 0, "b": 1}, {"a": 0, "b": 2}, "p", "r")
    assert too_few_rows(3, 4, "p", "r") and too_few_rows(4, 4, "p", "r") is None


def test_a_reference_tokenizer_file_past_any_real_one_is_not_read_whole(tmp_path, monkeypatch):
    """The board checks a config in its own process: an outsized vocab.json (sparse here) in a reference model's
    folder was read whole and parsed; past the bound the files of tokenizer checks keep to, it is not read (the
    tokenizer's own load reports it in the job)."""
    import tracemalloc

    from engine.models.vocab_match import tokenizer_vocab
    from engine.templates import token_check

    monkeypatch.setattr(token_check, "MAX_TOKENIZER_BYTES", 1 << 20)
    with open(tmp_path / "vocab.json", "wb") as fh:
        fh.write(b'{"a": 0')
        fh.truncate(64 << 20)
    tracemalloc.start()
    try:
        assert tokenizer_vocab(tmp_path) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 8 << 20
    (tmp_path / "vocab.json").write_text('{"a": 0, "b": 1}')
    assert tokenizer_vocab(tmp_path) == {"a": 0, "b": 1}
