"""Our rendering of a plain conversation equals the model's own chat template, where LLaMA-Factory's format agrees
with it.

The official Jinja templates come from the installed ``trl`` package (``trl/chat_templates``: byte copies of the
templates that models ship); nothing of them is stored here. Where LLaMA-Factory deliberately differs from the
official template, we follow LLaMA-Factory and do not test equality: gemma4/gemma4n (``<|think|>`` in the system
slot and an empty thought on the reply), deepseekr1 and deepseek3's later revisions (the official template pre-fills
``<think>\\n``), glm4_moe (``<think></think>`` on history turns), gpt_oss (harmony channels and dated system text),
and phi (the official template closes a conversation with an extra ``<|end|>``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from golden.tokenizers import load

from engine.templates import get_template

try:
    import trl

    OFFICIAL = Path(trl.__file__).parent / "chat_templates"
except ImportError:  # pragma: no cover - trl is a dependency
    OFFICIAL = Path("/nonexistent")

SYSTEM = [{"role": "system", "content": "You are a helpful assistant."}]
CHAT = [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi there."},
        {"role": "user", "content": "How are you?"}, {"role": "assistant", "content": "I am fine."}]

# (our template, official file, with a system message, conversations: "full" and/or "prompt")
CASES = [
    ("qwen", "qwen2_5", True, ("full", "prompt")),
    ("qwen3", "qwen3", True, ("full", "prompt")),
    ("qwen3_nothink", "qwen3_instruct_2507", True, ("full", "prompt")),
    ("llama3", "llama3", True, ("full", "prompt")),
    ("gemma", "gemma", False, ("full", "prompt")),
    ("gemma2", "gemma", False, ("full", "prompt")),
    ("gemma3", "gemma3", True, ("full", "prompt")),
    ("cohere", "cohere", True, ("full", "prompt")),
    ("deepseek3", "deepseekv3", True, ("full",)),
    ("phi", "phi3", True, ("prompt",)),
]


@pytest.mark.parametrize(("name", "official", "with_system", "shapes"), CASES)
def test_render_equals_the_models_chat_template(name, official, with_system, shapes):
    path = OFFICIAL / f"{official}.jinja"
    if not path.is_file():
        pytest.skip(f"{path} is not installed")
    tokenizer = load("family", name)
    template = get_template(name)
    template.fix_tokenizer(tokenizer)
    tokenizer.chat_template = path.read_text(encoding="utf-8")
    for system in ([[]] + ([SYSTEM] if with_system else [])):
        for shape in shapes:
            messages = system + (CHAT if shape == "full" else CHAT[:-1])
            generation = shape == "prompt"
            expected = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
            assert template.render_oneturn(messages, tokenizer=tokenizer, add_generation_prompt=generation) == expected
            if shape == "full" and not template.reasoning:  # reasoning: training keeps history thoughts (LF)
                assert template.render(messages, tokenizer=tokenizer) == expected, "training render too"
