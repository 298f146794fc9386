"""A model folder's config.json is read only up to engine.models.registry.MAX_CONFIG_BYTES: one from elsewhere can be
a sparse file of gigabytes that takes no disk (1 GB held the board 17 s and 2.1 GB of memory per reading)."""

import json
import logging
import os
import time

from engine.models import registry
from engine.models.prequantized import prequantized_problem
from engine.preflight import _check_model_folder


def test_a_huge_sparse_config_json_is_refused_by_its_size_without_being_read(tmp_path, caplog):
    config = tmp_path / "config.json"
    with open(config, "wb") as fh:
        fh.truncate(1 << 30)  # 1 GB of nothing on disk
    start = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="engine.models.registry"):
        assert registry.default_template(str(tmp_path)) is None and registry.model_media(str(tmp_path)) == ()
    problems = _check_model_folder(str(tmp_path), tmp_path)
    assert time.monotonic() - start < 5  # each read took seconds, with gigabytes of memory
    assert "1,073,741,824 bytes, more than any model's config.json" in problems[0]
    assert "copy it again from the original model" in problems[0]
    assert "more than any model's config.json" in caplog.text
    assert prequantized_problem("m", config) is None


def test_a_config_json_past_the_limit_is_not_taken(tmp_path, monkeypatch):
    config = {"model_type": "qwen2_vl", "quantization_config": {"quant_method": "bitsandbytes"}, "pad": "x" * 300}
    (tmp_path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    assert registry.default_template(str(tmp_path)) == "qwen2_vl"
    monkeypatch.setattr(registry, "MAX_CONFIG_BYTES", 200)
    assert registry.default_template(str(tmp_path)) is None
    size = os.path.getsize(tmp_path / "config.json")
    assert f"{size:,} bytes, more than any model's config.json (at most 200 are read)" in \
        _check_model_folder(str(tmp_path), tmp_path)[0]


def test_a_config_json_that_is_no_regular_file_is_not_waited_for(tmp_path):
    os.mkfifo(tmp_path / "config.json")  # is_file() says no: never opened
    assert registry.read_local_config(tmp_path) is None
    assert prequantized_problem("m", tmp_path / "config.json") is None  # opened without waiting, then refused


def test_the_boards_prequantized_check_does_not_wait_on_a_pipe(tmp_path):
    """The board asks it on Start and on every live check, in its own process: a named pipe for config.json held
    that handler for good (the model check had already said the folder has no config.json)."""
    from types import SimpleNamespace

    from app.prequantized import prequantized_problems

    os.mkfifo(tmp_path / "config.json")
    cfg = SimpleNamespace(model=SimpleNamespace(model_name_or_path=str(tmp_path), cache_dir=None, model_revision=None))
    assert prequantized_problems(cfg) == []


def test_an_adapters_config_and_a_tokenizers_files_are_read_within_bounds(tmp_path):
    """The pre-flight check reads adapter_config.json (the adapter picked on the form, a checkpoint from elsewhere)
    and, for ChatGLM3 / Yuan, the tokenizer's JSON files, in the board's own process."""
    from types import SimpleNamespace

    from engine.checkpoints import adapter_config_problem, read_adapter_config
    from engine.templates import token_check

    os.mkfifo(tmp_path / "adapter_config.json")
    assert read_adapter_config(tmp_path) == {}  # waited for a writer for good
    (tmp_path / "adapter_config.json").unlink()
    with open(tmp_path / "adapter_config.json", "wb") as fh:
        fh.truncate(1 << 30)
    start = time.monotonic()
    assert read_adapter_config(tmp_path) == {}
    assert "too large to be one" in adapter_config_problem(tmp_path)
    assert time.monotonic() - start < 5

    (tmp_path / "tokenizer_config.json").write_text(json.dumps({"unk_token": "<unk>"}), encoding="utf-8")
    with open(tmp_path / "tokenizer.json", "wb") as fh:
        fh.truncate(1 << 30)
    start = time.monotonic()
    assert token_check.missing_template_tokens(SimpleNamespace(template="chatglm3"), tmp_path) == []
    assert time.monotonic() - start < 5
    # a tokenizer of a few MB is still read: without an unk token, the named tokens it lacks are reported
    (tmp_path / "tokenizer_config.json").write_text("{}", encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text(json.dumps({"model": {"vocab": {"a": 0}}, "pad": "x" * (4 << 20)}))
    assert "no such token" in token_check.missing_template_tokens(SimpleNamespace(template="chatglm3"), tmp_path)[0]


def test_weights_that_are_a_named_pipe_are_named_not_waited_on(tmp_path):
    """``lf-engine check`` (and the board's live check and Start, in its own process) held for good on a model
    folder whose model.safetensors is a named pipe: the memory estimate opened it to read its header."""
    import pytest

    from engine.preflight_memory import estimate_params
    from engine.safetensors_header import HeaderError, read_header

    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}), encoding="utf-8")
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    os.mkfifo(tmp_path / "model.safetensors")
    with pytest.raises(HeaderError, match="not a regular file"):
        read_header(tmp_path / "model.safetensors")
    assert estimate_params(tmp_path) is None
    problems = _check_model_folder(str(tmp_path), tmp_path)
    assert problems == [f"`model_name_or_path: {tmp_path}` holds model.safetensors, which is no regular file (a pipe, "
                        "a device, a socket or a folder); copy the weight files again from the original model."]


def test_a_huge_sparse_weights_index_is_named_without_being_read(tmp_path):
    from engine.checkpoints import weights_problem

    with open(tmp_path / "model.safetensors.index.json", "wb") as fh:
        fh.truncate(1 << 30)
    start = time.monotonic()
    assert weights_problem(tmp_path) == "model.safetensors.index.json is 1,073,741,824 bytes, more than any weights index"
    assert time.monotonic() - start < 5
