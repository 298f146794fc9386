"""`enable_thinking: null`: LLaMA-Factory 0.9.5's mixed mode for reasoning templates, accepted and tokenized as there.

LLaMA-Factory's ``DataArguments.enable_thinking`` is ``bool | None`` and its ``ReasoningTemplate`` tests it two ways
(src/llamafactory/data/template.py of v0.9.5): thoughts are removed only when it ``is False`` (lines 423, 448), and
a reply without a thought gets the empty block in its prompt, untrained, whenever it is falsy (``not
self.enable_thinking``, lines 431, 467). None therefore keeps and trains every thought a reply has, and puts the
empty block into the prompt of a reply without one. Per-template ids for every reasoning template are checked
against LLaMA-Factory's own in test_templates_lf.py (the ``think=mixed`` cases); here the rows of each stage.

The expected rows below were produced by LLaMA-Factory 0.9.5 itself (``tests/golden/compare_rows.py``'s
LLaMA-Factory side, with the committed ``family`` qwen3 test tokenizer saved to a folder) on the rows of
:func:`_dataset`; each row is kept as its text and the digest of its ids.
"""

from __future__ import annotations

import copy
import json

import pytest
from golden.stage_rows import digest, qwen3_rows
from golden.tokenizers import load

from engine.config import build_config, load_config
from engine.templates import get_template

T = "<think>\n{}\n</think>\n\n"
Q = "<|im_start|>user\n{}<|im_end|>\n<|im_start|>assistant\n"
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}


def _turns(*texts: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


def _dataset(folder) -> str:
    sft = [{"messages": _turns("Hi", T.format("Say hi.") + "Hello.")},
           {"messages": _turns("Hi", "Hello.")},
           {"messages": _turns("Hi", T.format("old") + "Hello.", "Bye", "Bye.")}]
    pref = [{"messages": _turns("Hi", T.format("old") + "Hello.", "Bye"),
             "chosen": {"role": "assistant", "content": T.format("Wave.") + "Bye."},
             "rejected": {"role": "assistant", "content": "Go."}}]
    kto = [{"messages": _turns("Hi", T.format("Say hi.") + "Hello."), "label": True},
           {"messages": _turns("Hi", "Go."), "label": False}]
    info = {"mixed_sft": {"file_name": "sft.json", "formatting": "sharegpt", "columns": {"messages": "messages"},
                          "tags": TAGS},
            "mixed_pref": {"file_name": "pref.json", "formatting": "sharegpt", "ranking": True, "tags": TAGS,
                           "columns": {"messages": "messages", "chosen": "chosen", "rejected": "rejected"}},
            "mixed_kto": {"file_name": "kto.json", "formatting": "sharegpt", "tags": TAGS,
                          "columns": {"messages": "messages", "kto_tag": "label"}}}
    for name, rows in (("sft", sft), ("pref", pref), ("kto", kto)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return str(folder)


# LLaMA-Factory 0.9.5, enable_thinking: null, template qwen3: (text, digest of the row's ids as compare_rows lists them)
LF_SFT = [  # text, trained pieces, digest of [input_ids, labels]
    (Q.format("Hi") + T.format("Say hi.") + "Hello.<|im_end|>\n",
     [T.format("Say hi.") + "Hello.<|im_end|>\n"], "644e8a7b263b92fe"),
    (Q.format("Hi") + T.format("") + "Hello.<|im_end|>\n", ["Hello.<|im_end|>\n"], "2eb821eb62cca485"),
    (Q.format("Hi") + T.format("old") + "Hello.<|im_end|>\n" + Q.format("Bye") + T.format("") + "Bye.<|im_end|>\n",
     [T.format("old") + "Hello.<|im_end|>\n", "Bye.<|im_end|>\n"], "be85c6dee3fe176d"),
]
_PREF_PROMPT = Q.format("Hi") + "Hello.<|im_end|>\n" + Q.format("Bye")  # history thought removed (no preserve_thinking)
LF_DPO = [  # chosen and rejected (prompt + answer): the rejected answer has no thought and gets no empty block,
    # since LLaMA-Factory's prompt is the chosen encoding's (processor/pairwise.py:47-48)
    ([_PREF_PROMPT + T.format("Wave.") + "Bye.<|im_end|>\n", _PREF_PROMPT + "Go.<|im_end|>\n"], "f2c8ef06e25710eb"),
]
LF_KTO = [  # the row and its KL pair (prompt + the partner's reply)
    ([Q.format("Hi") + T.format("Say hi.") + "Hello.<|im_end|>\n", Q.format("Hi") + T.format("") + "Go.<|im_end|>\n"],
     "f7a741bec2929455"),
    ([Q.format("Hi") + T.format("") + "Go.<|im_end|>\n", Q.format("Hi") + T.format("Say hi.") + "Hello.<|im_end|>\n"],
     "bcc6a5f36e8def19"),
]


def _rows(tmp_path, stage: str, dataset: str):
    cfg = build_config({"model_name_or_path": "unused", "dataset_dir": _dataset(tmp_path), "dataset": dataset,
                        "stage": stage, "template": "qwen3", "enable_thinking": None, "cutoff_len": 1024})
    return qwen3_rows(cfg)


def _text(tokenizer, ids) -> str:
    return tokenizer.decode(ids, skip_special_tokens=False, clean_up_tokenization_spaces=False)


def _trained(tokenizer, ids, labels) -> list[str]:
    pieces, run = [], []
    for token, label in zip(ids, labels):
        if label != -100:
            run.append(token)
        elif run:
            pieces.append(_text(tokenizer, run))
            run = []
    return pieces + ([_text(tokenizer, run)] if run else [])


def test_the_config_takes_null_and_keeps_it(tmp_path):
    cfg = build_config({"model_name_or_path": "unused", "template": "qwen3", "enable_thinking": None})
    assert cfg.data.enable_thinking is None
    saved = tmp_path / "config.yaml"
    saved.write_text(cfg.to_yaml(), encoding="utf-8")
    assert load_config(saved).data.enable_thinking is None  # a saved run config reproduces the run
    assert get_template("qwen3", enable_thinking=None).enable_thinking is None
    assert get_template("qwen3").enable_thinking is True  # left out: the template's own default


def test_sft_rows_are_llamafactorys(tmp_path):
    tokenizer, rows = _rows(tmp_path, "sft", "mixed_sft")
    assert [(_text(tokenizer, ids), _trained(tokenizer, ids, labels)) for ids, labels in rows] == [
        (text, trained) for text, trained, _ in LF_SFT]
    assert [digest(row) for row in rows] == [digest for *_, digest in LF_SFT]


@pytest.mark.parametrize(("stage", "dataset", "expected"), [("dpo", "mixed_pref", LF_DPO), ("kto", "mixed_kto", LF_KTO)])
def test_preference_rows_are_llamafactorys(tmp_path, stage, dataset, expected):
    tokenizer, rows = _rows(tmp_path, stage, dataset)
    assert [[_text(tokenizer, ids) for ids in row] for row in rows] == [texts for texts, _ in expected]
    assert [digest(row) for row in rows] == [digest for _, digest in expected]


def test_mixed_differs_from_on_and_off():
    """The three modes on one conversation: on trains an empty block, off drops thoughts, mixed does neither."""
    tokenizer = load("family", "qwen3")
    conversation = _turns("Hi", T.format("old") + "Hello.", "Bye", "Bye.")
    replies = {}
    for mode in (True, False, None):
        template = get_template("qwen3", enable_thinking=mode)
        template.fix_tokenizer(tokenizer)
        replies[mode] = [_text(tokenizer, r) for _, r in template.encode_multiturn(tokenizer, copy.deepcopy(
            conversation))]
    assert replies[True] == [T.format("old") + "Hello.<|im_end|>\n", T.format("") + "Bye.<|im_end|>\n"]
    assert replies[False] == ["Hello.<|im_end|>\n", "Bye.<|im_end|>\n"]
    assert replies[None] == [T.format("old") + "Hello.<|im_end|>\n", "Bye.<|im_end|>\n"]
