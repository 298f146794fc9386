"""A GRPO/RLOO run samples from the prompt sft trains the same row's last reply on, with the same data options
(enable_thinking, preserve_thinking, default_system; mask_history is sft's only): the conversation is encoded turn by
turn as sft's is, so history replies keep their thoughts (or get the empty one with enable_thinking false). The
prompt had been one flattened single-turn encoding, which drops the history thoughts sft keeps."""

from __future__ import annotations

import itertools
import json

import pytest
from golden.tokenizers import load

from engine.config import build_config
from engine.data import configured_template, get_dataset
from engine.templates import get_template
from engine.train.rl import get_prompt_dataset

T = "<think>\n{}\n</think>\n\n"
ROWS = [
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": T.format("old") + "Hello."},
                  {"role": "user", "content": "2+2?"}, {"role": "assistant", "content": "4"}]},
    {"messages": [{"role": "user", "content": "Weather?"}, {"role": "assistant", "content": "Sunny."}],
     "system": "Be brief."},
]
OPTIONS = list(itertools.product((True, False), (False, True), (None, "You are kind.")))


def _config(folder, stage: str, **more):
    (folder / "rows.json").write_text(json.dumps(ROWS), encoding="utf-8")
    info = {"rows": {"file_name": "rows.json", "formatting": "openai", "columns": {"messages": "messages"}}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return build_config({"model_name_or_path": "unused", "dataset_dir": str(folder), "dataset": "rows",
                         "stage": stage, "template": "qwen3", "cutoff_len": 512, **more})


@pytest.mark.parametrize(("enable_thinking", "preserve_thinking", "default_system"), OPTIONS)
def test_rl_prompt_is_the_prompt_sft_trains_on(tmp_path, enable_thinking, preserve_thinking, default_system):
    tokenizer = load("family", "qwen3")
    options = {"enable_thinking": enable_thinking, "preserve_thinking": preserve_thinking,
               "default_system": default_system}
    sft = _config(tmp_path, "sft", **options)
    trained = get_dataset(sft, tokenizer, configured_template(sft, get_template("qwen3", tokenizer))).train
    rl = _config(tmp_path, "grpo", reward_funcs="length", **options)
    prompts = get_prompt_dataset(rl, tokenizer, get_template("qwen3", tokenizer)).train
    assert len(prompts) == len(trained) == len(ROWS)
    for prompt, ids, labels in zip(prompts["prompt_ids"], trained["input_ids"], trained["labels"]):
        assert ids[:len(prompt)] == prompt, tokenizer.decode(prompt)
        assert labels[len(prompt) - 1] == -100 and all(label != -100 for label in labels[len(prompt):])
