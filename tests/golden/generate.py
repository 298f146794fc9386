"""Regenerate tests/golden/lf_templates.json.gz from LLaMA-Factory 0.9.5 itself (run from the repository root).

    python -m tests.golden.generate

Needs the LLaMA-Factory git mirror (``LF_MIRROR``); see ``lf_harness``. Tests only read the JSON it writes.
"""

from __future__ import annotations

import copy
import datetime as dt
import gzip
import hashlib
import json

from tests.golden import cases
from tests.golden.lf_harness import load_lf
from tests.golden.tokenizers import FAMILY_SPECIALS, SETUPS, load

FIXED_DATE = dt.datetime(2024, 7, 26)


def digest(ids: list) -> str:
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()[:16]


def tokenizer_state(tokenizer) -> dict:
    return {"eos": tokenizer.eos_token, "pad": tokenizer.pad_token, "bos": tokenizer.bos_token,
            "size": len(tokenizer), "specials": sorted(map(str, tokenizer.all_special_tokens))}


def template_entry(lf_template, name: str, conversations) -> dict:
    """LLaMA-Factory's encodings of every case of ``conversations(thought_words)`` for template ``name``."""
    base = lf_template.TEMPLATES[name]
    reasoning = isinstance(base, lf_template.ReasoningTemplate)
    convs = conversations(base.thought_words)
    entry: dict = {"reasoning": reasoning, "cases": {}, "tokenizer": {}}
    # (enable_thinking, discard history thoughts, preserve_thinking): preserve_thinking keeps history thoughts in
    # single-turn encodings, thinking on or off; enable_thinking None is LLaMA-Factory's mixed mode (key think=mixed)
    variants = ([(True, False, False), (False, False, False), (True, True, False), (True, False, True),
                 (False, False, True), (None, False, False), (None, True, False), (None, False, True)]
                if reasoning else [(True, False, False)])
    for setup in SETUPS:
        for thinking, discard, preserve in variants:
            tpl = copy.deepcopy(base)
            tpl.enable_thinking = thinking
            tpl.preserve_thinking = preserve
            tokenizer = load(setup, name)
            tpl.fix_special_tokens(tokenizer)
            entry["tokenizer"][setup] = tokenizer_state(tokenizer)
            for case, conv in convs.items():
                think = "mixed" if thinking is None else int(thinking)
                key = f"{case}|think={think}|discard={int(discard)}" + ("|preserve=1" if preserve else "")
                try:
                    pairs = tpl.encode_multiturn(tokenizer, copy.deepcopy(conv["messages"]), conv["system"],
                                                 conv["tools"], discard)
                    prompt, response = tpl.encode_oneturn(tokenizer, copy.deepcopy(conv["messages"]),
                                                          conv["system"], conv["tools"])
                except Exception as err:  # noqa: BLE001 - recorded: ours must fail too
                    entry["cases"].setdefault(key, {})[setup] = {"error": type(err).__name__}
                    continue
                if any(None in ids for pair in pairs for ids in pair) or None in prompt + response:
                    # a token slot the tokenizer lacks (ChatGLM3's role tokens in the plain setup): LLaMA-Factory
                    # writes None as its id and fails later; ours must refuse the conversation
                    entry["cases"].setdefault(key, {})[setup] = {"error": "NoneTokenId"}
                    continue

                def text(ids, tokenizer=tokenizer):
                    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)

                entry["cases"].setdefault(key, {})[setup] = {
                    "pairs_text": [[text(p), text(r)] for p, r in pairs],
                    "pairs_hash": digest([[p, r] for p, r in pairs]),
                    "pairs_len": [[len(p), len(r)] for p, r in pairs],
                    "oneturn_text": [text(prompt), text(response)],
                    "oneturn_hash": digest([prompt, response]),
                }
    return entry


def write_golden(out: dict, path: str) -> None:
    """``out`` as sorted, reproducible gzipped JSON at ``path``."""
    data = json.dumps(out, ensure_ascii=False, sort_keys=True).encode("utf-8")
    with open(path, "wb") as handle:
        handle.write(gzip.compress(data, compresslevel=9, mtime=0))
    print(f"wrote {path}")


def fix_date(tool_utils) -> None:
    """Make LLaMA-Factory's tool prompts write :data:`FIXED_DATE`."""
    class _FixedDatetime(dt.datetime):
        @classmethod
        def now(cls, tz=None):
            return FIXED_DATE

    tool_utils.datetime = _FixedDatetime


def main() -> None:
    load_lf()
    from llamafactory.data import template as lf_template
    from llamafactory.data import tool_utils

    fix_date(tool_utils)
    out: dict = {"date": FIXED_DATE.strftime("%d %b %Y"), "templates": {}, "tools": {}}
    for name in FAMILY_SPECIALS:
        out["templates"][name] = template_entry(lf_template, name, cases.conversations)
    for fmt_name in ("default", "qwen", "glm4", "llama3", "mistral", "gemma4", "glm4_moe", "qwen3_5", "ling", "minimax1",
                     "minimax2", "seed_oss", "lfm2"):
        utils = tool_utils.TOOLS[fmt_name]
        calls = [tool_utils.FunctionCall(c["name"], json.dumps(c["arguments"], ensure_ascii=False)) for c in cases.CALL]
        written = utils.function_formatter(calls)
        extracted = utils.tool_extractor(written)
        out["tools"][fmt_name] = {
            "declaration": utils.tool_formatter(copy.deepcopy(cases.TOOLS)),
            "calls": written,
            "extracted": [[c.name, json.loads(c.arguments)] for c in extracted] if isinstance(extracted, list) else None,
        }
    write_golden(out, "tests/golden/lf_templates.json.gz")


if __name__ == "__main__":
    main()
