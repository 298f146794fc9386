"""tests/golden/sweep_lf_examples.py --only: a name that is no example of the tag is refused with the nearest names
(it used to be dropped silently, so the sweep checked nothing for it and said nothing)."""

from __future__ import annotations

import sys

import pytest

from tests.golden import sweep_lf_examples


def test_only_refuses_a_name_that_is_no_example(monkeypatch, tmp_path, capsys):
    names = ["train_lora/qwen3_lora_sft.yaml", "train_lora/qwen3_lora_dpo.yaml"]
    monkeypatch.setattr(sweep_lf_examples, "prepare", lambda *args: list(names))
    monkeypatch.setattr(sweep_lf_examples, "engine", lambda *args: pytest.fail("nothing should be checked"))
    monkeypatch.setattr(sys, "argv", ["sweep_lf_examples", "--work", str(tmp_path / "w"), "--models",
                                      str(tmp_path / "m"), "--only",
                                      "train_lora/qwen3_lora_dpo.yaml,train_lora/llama3_lora_sft.yaml"])
    with pytest.raises(SystemExit) as info:
        sweep_lf_examples.main()
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "--only names no example of v0.9.5: train_lora/llama3_lora_sft.yaml (did you mean " in err
    assert "train_lora/qwen3_lora_sft.yaml" in err and "qwen3_lora_dpo.yaml (" not in err
