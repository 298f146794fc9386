"""A reward model's new value head: one plain line instead of transformers' load report, which stays for anything
else a checkpoint lacks."""

from __future__ import annotations

import logging

import pytest
import torch

from engine.config import build_config
from engine.models import load_model
from engine.models.load_report import head_only_keys


@pytest.fixture(scope="module")
def tiny_llama(tmp_path_factory):
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=32, pad_token_id=0)
    torch.manual_seed(0)
    model = LlamaForCausalLM(config)
    whole = tmp_path_factory.mktemp("whole")
    model.save_pretrained(whole)
    lacking = tmp_path_factory.mktemp("lacking")  # the final norm's weight left out of the checkpoint
    model.save_pretrained(lacking, state_dict={k: v for k, v in model.state_dict().items() if k != "model.norm.weight"})
    return whole, lacking


@pytest.fixture
def transformers_log():
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.DEBUG)
    handler.emit = records.append
    library = logging.getLogger("transformers")
    library.addHandler(handler)
    yield records
    library.removeHandler(handler)


def _load_reward(path, caplog):
    cfg = build_config({"model_name_or_path": str(path), "finetuning_type": "lora", "stage": "rm"})
    with caplog.at_level(logging.INFO, logger="engine.models.loader"):
        return load_model(cfg.model, cfg.finetuning, is_trainable=True, train_args=cfg.train)


def test_a_new_value_head_is_said_in_one_line(tiny_llama, transformers_log, caplog):
    model = _load_reward(tiny_llama[0], caplog)
    assert type(model.base_model.model).__name__ == "LlamaForSequenceClassification"
    assert not [r for r in transformers_log if "LOAD REPORT" in r.getMessage()]
    assert "Reward model: the value head (score.weight) is not in the checkpoint" in caplog.text
    assert not logging.getLogger("transformers.modeling_utils").filters  # the filter is gone after the load


def test_a_checkpoint_lacking_more_than_the_head_keeps_transformers_report(tiny_llama, transformers_log, caplog):
    _load_reward(tiny_llama[1], caplog)
    reports = [r.getMessage() for r in transformers_log if "LOAD REPORT" in r.getMessage()]
    assert len(reports) == 1 and "model.norm.weight" in reports[0] and "score.weight" in reports[0]
    assert head_only_keys(reports[0]) is None
    assert "Reward model: the value head" not in caplog.text


def test_head_only_keys_reads_only_value_head_reports():
    report = ("\x1b[1mLlamaForSequenceClassification LOAD REPORT\x1b[0m from: /m\nKey          | Status  | \n"
              "-------------+---------+-\nscore.weight | \x1b[31mMISSING\x1b[0m | \n\nNotes:\n- MISSING:\tnew")
    assert head_only_keys(report) == ["score.weight"]
    assert head_only_keys(report.replace("MISSING\x1b[0m |", "UNEXPECTED\x1b[0m |")) is None
    unused_lm_head = report.replace("score.weight |", "lm_head.weight | UNEXPECTED |\nscore.weight |")
    assert head_only_keys(unused_lm_head) == ["score.weight"]
    assert head_only_keys(unused_lm_head.replace("lm_head.weight", "model.norm.weight")) is None
    assert head_only_keys("Some other warning | with a bar") is None
