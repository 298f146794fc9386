"""Regenerate tests/golden/lf_parsed_templates.json.gz: configs without ``template`` (run from the repository root).

    python -m tests.golden.generate_parsed

LLaMA-Factory 0.9.5 reads a tokenizer's chat template into slots once (``parse_template``) when ``template`` is not
set. For each chat template below (hand-written ones shaped like real families' and our built-in templates'
exported Jinja) and each tokenizer setup, this records LLaMA-Factory's parsed default system, template class and
the ids of every parity conversation. Needs the LLaMA-Factory git mirror (see ``lf_harness``); tests only read the
JSON it writes.
"""

from __future__ import annotations

import copy

from tests.golden import cases
from tests.golden.generate import FIXED_DATE, fix_date, write_golden
from tests.golden.lf_harness import load_lf
from tests.golden.tokenizers import tokenizer_for

# Hand-written chat templates shaped like real ones (no repository's file is copied).
HANDWRITTEN = {
    # the benchmark's reference model (examples/benchmark/run_benchmark.py)
    "reference": (
        "{% for m in messages %}{% if m['role'] == 'system' %}<|system|>{{ m['content'] }}<|eos|>\n"
        "{% elif m['role'] == 'user' %}<|user|>{{ m['content'] }}<|eos|>\n"
        "{% elif m['role'] == 'assistant' %}<|assistant|>{{ m['content'] }}<|eos|>\n"
        "{% endif %}{% endfor %}{% if add_generation_prompt %}<|assistant|>{% endif %}"
    ),
    # ChatML that writes a default system prompt when the conversation has none (Qwen2.5-like)
    "chatml_default_system": (
        "{% if messages[0]['role'] != 'system' %}<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
        "{% endif %}{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
    # BOS written by the template, headers per role (Llama-3-like)
    "headers_with_bos": (
        "{{ bos_token }}{% for m in messages %}<|start_header_id|>{{ m['role'] }}<|end_header_id|>\n\n"
        "{{ m['content'] | trim }}<|eot_id|>{% endfor %}"
        "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
    ),
    # a reasoning template that opens an empty thought block in every reply without one (Qwen3-like)
    "thinking": (
        "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{% if m['role'] == 'assistant' and '<think>' not in "
        "m['content'] %}<think>\n\n</think>\n\n{% endif %}{{ m['content'] }}<|im_end|>\n{% endfor %}"
        "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
    ),
}
BUILT_IN = ("chatml", "qwen", "llama3", "gemma", "mistral", "default", "phi4", "deepseek3")
SETUPS = ("plain", "special", "bos")  # see tokenizer_for


def chat_templates() -> dict[str, str]:
    from engine.templates import get_template

    return {**HANDWRITTEN, **{f"builtin_{name}": get_template(name).to_jinja() for name in BUILT_IN}}


def main() -> None:
    load_lf()
    from llamafactory.data import template as lf_template
    from llamafactory.data import tool_utils

    fix_date(tool_utils)
    out: dict = {"date": FIXED_DATE.strftime("%d %b %Y"), "templates": {}}
    for name, jinja in chat_templates().items():
        entry: dict = {"chat_template": jinja, "setups": {}}
        for setup in SETUPS:
            tokenizer = tokenizer_for(setup, jinja)
            try:
                parsed = lf_template.parse_template(tokenizer)
            except Exception as err:  # noqa: BLE001 - recorded: ours must refuse too
                entry["setups"][setup] = {"error": f"{type(err).__name__}: {err}"}
                continue
            parsed.fix_special_tokens(tokenizer)
            result: dict = {"default_system": parsed.default_system,
                            "reasoning": isinstance(parsed, lf_template.ReasoningTemplate), "cases": {}}
            for case, conv in cases.conversations(parsed.thought_words).items():
                try:
                    pairs = parsed.encode_multiturn(tokenizer, copy.deepcopy(conv["messages"]), conv["system"],
                                                    conv["tools"])
                except Exception as err:  # noqa: BLE001 - recorded: ours must fail too
                    result["cases"][case] = {"error": type(err).__name__}
                    continue
                result["cases"][case] = {"pairs": [[list(p), list(r)] for p, r in pairs]}
            entry["setups"][setup] = result
        out["templates"][name] = entry
    write_golden(out, "tests/golden/lf_parsed_templates.json.gz")


if __name__ == "__main__":
    main()
