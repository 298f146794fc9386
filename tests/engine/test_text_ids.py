"""Text pieces tokenized through the Rust backend directly: the same ids as ``encode(add_special_tokens=False)``,
and ``encode`` itself wherever the direct path would not be exactly that."""

from __future__ import annotations

import pytest
from tinymodels import tiny_model_and_tokenizer

from engine.templates import text_ids as module
from engine.templates.text_ids import text_ids

PIECES = ["", "Hello, how are you?", "<|im_start|>user\nhi<|im_end|>\n", " leading space", "你好，世界。",
          "\n\n", "tabs\tand  spaces ", "<|im_end|>", "a" * 300, "mixed <|im_start|> inside text"]


@pytest.fixture
def tokenizer():
    return tiny_model_and_tokenizer()[1]


def _calls(monkeypatch, tokenizer) -> list:
    calls = []
    original = tokenizer.encode
    monkeypatch.setattr(tokenizer, "encode", lambda *a, **k: calls.append(1) or original(*a, **k))
    return calls


def test_same_ids_as_encode_through_the_backend(tokenizer, monkeypatch):
    expected = [tokenizer.encode(p, add_special_tokens=False) for p in PIECES]
    calls = _calls(monkeypatch, tokenizer)
    assert [text_ids(tokenizer, p) for p in PIECES] == expected
    assert calls == []  # the direct path ran


def test_split_special_tokens_is_honoured(tokenizer):
    tokenizer.split_special_tokens = True
    expected = [tokenizer.encode(p, add_special_tokens=False) for p in PIECES]
    assert expected != [tokenizer.encode(p, add_special_tokens=False, split_special_tokens=False) for p in PIECES]
    assert [text_ids(tokenizer, p) for p in PIECES] == expected


def test_encode_where_the_backend_truncates_or_the_class_overrides_encoding(tokenizer, monkeypatch):
    tokenizer._tokenizer.enable_truncation(max_length=3)  # encode would switch it off for its own call
    calls = _calls(monkeypatch, tokenizer)
    assert text_ids(tokenizer, "Hello, how are you?") == tokenizer.encode("Hello, how are you?",
                                                                          add_special_tokens=False)
    assert len(text_ids(tokenizer, "Hello, how are you?")) > 3 and calls

    class Custom(type(tokenizer)):
        def _encode_plus(self, *args, **kwargs):
            return super()._encode_plus(*args, **kwargs)

    assert not module._plain_encode_path(Custom)
    assert module._plain_encode_path(type(tiny_model_and_tokenizer()[1]))
