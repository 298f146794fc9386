"""``template`` left empty: the tokenizer's chat template read into slots exactly as LLaMA-Factory 0.9.5 does.

tests/golden/lf_parsed_templates.json.gz was written by LLaMA-Factory's own ``parse_template`` and
``encode_multiturn`` (``python -m tests.golden.generate_parsed``) for hand-written chat templates shaped like real
families' and for our built-in templates' exported Jinja, on three tokenizer setups. Ours must give the same ids for
every conversation, the same default system and template class, and refuse where LLaMA-Factory refuses.
"""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest
from golden import cases
from golden.tokenizers import tokenizer_for

from engine.templates import TEMPLATES, TemplateError, get_template
from engine.templates.parsed import added_characters

GOLDEN = json.loads(gzip.decompress((Path(__file__).resolve().parents[1] / "golden" /
                                     "lf_parsed_templates.json.gz").read_bytes()))
ENTRIES = [(name, setup) for name, entry in sorted(GOLDEN["templates"].items()) for setup in entry["setups"]]


@pytest.mark.parametrize(("name", "setup"), ENTRIES)
def test_same_ids_as_llamafactory_parse_template(name, setup):
    entry = GOLDEN["templates"][name]
    golden = entry["setups"][setup]
    tokenizer = tokenizer_for(setup, entry["chat_template"])
    if "error" in golden:
        with pytest.raises(TemplateError, match="cannot be read into slots.*Set `template`"):
            get_template("", tokenizer)
        return
    template = get_template("", tokenizer)
    template.fix_tokenizer(tokenizer)
    assert template.default_system == golden["default_system"]
    assert template.reasoning == golden["reasoning"]
    for case, conv in cases.conversations(template.thought_words).items():
        expected = golden["cases"][case]
        assert "error" not in expected, (case, expected)
        pairs = template.encode_multiturn(tokenizer, conv["messages"], conv["system"], conv["tools"])
        assert [[list(p), list(r)] for p, r in pairs] == expected["pairs"], (name, setup, case)


def test_golden_covers_default_system_reasoning_bos_and_refusals():
    setups = [s for e in GOLDEN["templates"].values() for s in e["setups"].values()]
    assert any(s.get("default_system") for s in setups)
    assert any(s.get("reasoning") for s in setups)
    assert any("error" in s for s in setups)
    assert len(ENTRIES) >= 30


def test_added_characters_is_llamafactorys_find_diff():
    assert added_characters("[S][/S][U]{c}", "[S]Be kind.[/S][U]{c}") == "Be kind."
    assert added_characters("<u>{c}", "<s>Hi</s><u>{c}") == "s>Hi</s><"  # greedy, as LLaMA-Factory matches
    assert added_characters("abc", "abcXYZ") == ""  # nothing after the last match of the shorter string
    assert added_characters("ac", "abXc") == "bX"


def test_no_chat_template_falls_back_to_empty_as_llamafactory(tokenizer_factory, caplog):
    with caplog.at_level(logging.WARNING, logger="engine.templates.parsed"):
        template = get_template(None, tokenizer_factory())
    assert template == TEMPLATES["empty"]
    assert "no chat template" in caplog.text and "`empty`" in caplog.text


def test_parsed_once_per_tokenizer_and_options_apply():
    tokenizer = tokenizer_for("special", GOLDEN["templates"]["chatml_default_system"]["chat_template"])
    first = get_template("", tokenizer)
    assert get_template("", tokenizer) is first
    assert get_template("", tokenizer, default_system="Be brief.").default_system == "Be brief."
    text = first.render([{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"}])
    assert text == ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                    "<|im_start|>assistant\nHello<|im_end|>\n")
    tokenizer.chat_template = GOLDEN["templates"]["reference"]["chat_template"]
    assert get_template("", tokenizer).default_system == ""  # a changed chat template is read again
