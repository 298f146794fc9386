"""Chat against LLaMA-Factory 0.9.5's ChatModel (huggingface engine, greedy) on the demo model: the same prompt ids
for multi-turn conversations with a system prompt, with tools and with a tool call and its result, and the same
generated ids and reply text (tests/golden/lf_chat.json, from tests/golden/generate_chat.py)."""

import json
from pathlib import Path

import pytest

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "lf_chat.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(GOLDEN["templates"]))
def test_chat_prompts_and_greedy_replies_are_llamafactory_own(name):
    from engine.config import build_config
    from engine.demo import ensure_demo_model
    from engine.infer.chat import ChatModel

    chat = ChatModel(build_config({"model_name_or_path": str(ensure_demo_model()), "template": name,
                                   "do_sample": False, "max_new_tokens": GOLDEN["max_new_tokens"]}))
    for case, theirs in zip(GOLDEN["cases"], GOLDEN["templates"][name], strict=True):
        assert chat.encode(case["messages"], case["system"], case["tools"]) == theirs["prompt_ids"], case
        generation = chat.start(case["messages"], case["system"], case["tools"])
        generation.wait()
        generation.close()
        reply = chat.finish(generation)
        assert generation.generated_ids == theirs["generated_ids"], case
        assert reply.finish_reason == theirs["finish_reason"], case
        # the same text, special tokens left out (ours had kept ChatML's <|im_start|>), whitespace trimmed (ours
        # trims what LLaMA-Factory's engine returns as decoded)
        assert reply.text == theirs["text"].strip() and not reply.tool_calls, case
    chat.unload()
