"""Every built-in template gives LLaMA-Factory 0.9.5's exact strings and token ids.

The golden file tests/golden/lf_templates.json.gz was produced by LLaMA-Factory's own template code
(``python -m tests.golden.generate``) for six conversation shapes (single turn with and without system, three
turns, a tool call with its result, an empty tool list, and thoughts in history and current turns), with thinking
on, off and mixed (``enable_thinking: null``) and with history thoughts discarded (reasoning templates), on three tokenizer setups (markers as plain
text, markers as special tokens, the family's own BOS/EOS). Each case checks the tokenizer after
``fix_tokenizer``, the multi-turn ids and texts, and the single-turn (preference) ids and texts.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
from functools import lru_cache
from pathlib import Path

import pytest
from golden import cases
from golden.tokenizers import SETUPS, load

from engine.templates import TEMPLATES, get_template, get_tool_format
from engine.templates import tool_formats as tool_formats_module

GOLDEN = Path(__file__).resolve().parents[1] / "golden" / "lf_templates.json.gz"


@lru_cache(maxsize=1)
def golden() -> dict:
    return json.loads(gzip.decompress(GOLDEN.read_bytes()).decode("utf-8"))


def _digest(ids) -> str:
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()[:16]


def _state(tokenizer) -> dict:
    return {"eos": tokenizer.eos_token, "pad": tokenizer.pad_token, "bos": tokenizer.bos_token,
            "size": len(tokenizer), "specials": sorted(map(str, tokenizer.all_special_tokens))}


@pytest.fixture(autouse=True)
def _fixed_date(monkeypatch):
    monkeypatch.setattr(tool_formats_module, "today", lambda: golden()["date"])


def test_at_least_forty_templates_all_checked():
    checked = set(golden()["templates"])
    assert len(checked) >= 40 and checked <= set(TEMPLATES)
    text_only = {name for name, template in TEMPLATES.items() if not template.modalities}
    # vision templates registered for their text turns only are checked, media rows included, with the vision ones
    from test_templates_vision import golden as vision_golden

    from engine.templates.vision_text_only import TEXT_ONLY_VISION_TEMPLATES

    vision_text = {template.name for template in TEXT_ONLY_VISION_TEMPLATES}
    assert vision_text <= set(vision_golden()["templates"])
    missing = text_only - checked - vision_text
    assert not missing, f"text templates without golden ids: {sorted(missing)}"


def check_template(name: str, entry: dict | None = None, conversations=cases.conversations) -> list[str]:
    """Differences between our encodings of ``name`` and LLaMA-Factory's (empty when identical).

    ``entry`` is the template's golden record (default: from lf_templates.json.gz), produced from the cases of
    ``conversations``.
    """
    entry = entry if entry is not None else golden()["templates"][name]
    assert TEMPLATES[name].reasoning == entry["reasoning"], f"{name}: reasoning flag differs from LLaMA-Factory"
    convs = conversations(TEMPLATES[name].thought_words)
    problems = []
    for key, per_setup in entry["cases"].items():
        case, think, discard, *preserve = key.split("|")  # preserve=1: preserve_thinking (reasoning templates)
        thinking = None if think == "think=mixed" else think.endswith("1")  # mixed: LLaMA-Factory's None
        discard, preserve = discard.endswith("1"), preserve == ["preserve=1"]
        conv = convs[case]
        template = get_template(name, enable_thinking=thinking, preserve_thinking=preserve)
        for setup in SETUPS:
            expected = per_setup[setup]
            tokenizer = load(setup, name)
            template.fix_tokenizer(tokenizer)
            if _state(tokenizer) != entry["tokenizer"][setup]:
                problems.append(f"{setup}: tokenizer after fix {_state(tokenizer)} != {entry['tokenizer'][setup]}")
                continue
            where = f"{name} {key} {setup}"
            if "error" in expected:
                with pytest.raises(Exception):  # noqa: B017 - LLaMA-Factory refuses this conversation too
                    template.encode_multiturn(tokenizer, copy.deepcopy(conv["messages"]), conv["system"],
                                              conv["tools"], discard)
                continue
            pairs = template.encode_multiturn(tokenizer, copy.deepcopy(conv["messages"]), conv["system"],
                                              conv["tools"], discard)

            def text(ids, tokenizer=tokenizer):
                return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

            got_text = [[text(p), text(r)] for p, r in pairs]
            if got_text != expected["pairs_text"]:
                problems.append(f"{where}: text\n  ours {got_text}\n  LF   {expected['pairs_text']}")
            elif _digest([[p, r] for p, r in pairs]) != expected["pairs_hash"]:
                problems.append(f"{where}: same text, different ids (text pieces tokenized differently)")
            segments = template.segments(conv["messages"], conv["system"], conv["tools"], tokenizer=tokenizer)
            if not discard and [s for s, _ in segments] != [t for pair in expected["pairs_text"] for t in pair]:
                problems.append(f"{where}: rendered segments differ from LF's text")
            if not discard:
                prompt, response = template.encode_oneturn(tokenizer, copy.deepcopy(conv["messages"]),
                                                           conv["system"], conv["tools"])
                if [text(prompt), text(response)] != expected["oneturn_text"]:
                    problems.append(f"{where}: oneturn text\n  ours {[text(prompt), text(response)]}\n"
                                    f"  LF   {expected['oneturn_text']}")
                elif _digest([prompt, response]) != expected["oneturn_hash"]:
                    problems.append(f"{where}: oneturn ids differ")
    return problems


@pytest.mark.parametrize("name", sorted(golden()["templates"]))
def test_template_matches_llamafactory(name):
    problems = check_template(name)
    assert not problems, "\n".join(problems[:6])


@pytest.mark.parametrize("fmt", sorted(golden()["tools"]))
def test_tool_format_matches_llamafactory(fmt):
    expected = golden()["tools"][fmt]
    ours = get_tool_format(fmt)
    assert ours.format_tools(cases.TOOLS) == expected["declaration"]
    assert ours.format_calls(cases.CALL) == expected["calls"]
    content, calls = ours.extract(expected["calls"])
    assert calls == cases.CALL
    if expected["extracted"] is not None:
        assert [[c["name"], c["arguments"]] for c in calls] == expected["extracted"]
