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


def test_prefetched_pieces_come_from_one_batch_with_the_same_ids(tokenizer, monkeypatch):
    from engine.templates.text_ids import prefetched

    expected = [tokenizer.encode(p, add_special_tokens=False) for p in PIECES]
    batches = []
    backend = tokenizer._tokenizer
    monkeypatch.setattr(tokenizer, "_tokenizer", _Spy(backend, batches))
    with prefetched(tokenizer, PIECES * 2):
        got = [text_ids(tokenizer, p) for p in PIECES]
        got[1].append(-1)  # callers own their lists: the memo is not changed through them
        assert text_ids(tokenizer, PIECES[1]) == expected[1]
    assert got[0] == expected[0] and got[2:] == expected[2:]
    assert batches == [len([p for p in PIECES if p])]  # one call, each distinct piece once
    assert module._MEMO == {}  # forgotten after the block


def test_prefetch_uses_the_offset_free_batch_call_and_falls_back_without_it(tokenizer, monkeypatch):
    from engine.templates.text_ids import prefetched

    expected = [tokenizer.encode(p, add_special_tokens=False) for p in PIECES]
    backend = tokenizer._tokenizer
    assert hasattr(backend, "encode_batch_fast")  # tokenizers >= 0.20 has it (pyproject asks >= 0.21)
    used = []

    class Older:  # a backend without encode_batch_fast
        def encode_batch(self, texts, **kwargs):
            used.append("encode_batch")
            return backend.encode_batch(texts, **kwargs)

        def __getattr__(self, name):
            if name == "encode_batch_fast":
                raise AttributeError(name)
            return getattr(backend, name)

    class Newer(Older):
        def encode_batch_fast(self, texts, **kwargs):
            used.append("encode_batch_fast")
            return backend.encode_batch_fast(texts, **kwargs)

    for spy, call in ((Newer(), "encode_batch_fast"), (Older(), "encode_batch")):
        monkeypatch.setattr(tokenizer, "_tokenizer", spy)
        with prefetched(tokenizer, PIECES):
            assert [text_ids(tokenizer, p) for p in PIECES] == expected
        assert used[-1] == call


class _Spy:
    """Counts the backend's batched calls (the offset-free ``encode_batch_fast`` where the backend has it)."""

    def __init__(self, backend, batches):
        self._backend, self._batches = backend, batches

    def encode_batch(self, texts, **kwargs):
        self._batches.append(len(texts))
        return self._backend.encode_batch(texts, **kwargs)

    def encode_batch_fast(self, texts, **kwargs):
        self._batches.append(len(texts))
        return self._backend.encode_batch_fast(texts, **kwargs)

    def __getattr__(self, name):
        return getattr(self._backend, name)


def test_the_thread_pool_is_on_only_for_the_batch_and_only_where_the_engine_turned_it_off(monkeypatch):
    import os

    seen = []
    monkeypatch.setenv("TOKENIZERS_PARALLELISM", "false")
    monkeypatch.setenv(module.DEFAULTED, "1")
    with module._parallel_batch():
        seen.append(os.environ["TOKENIZERS_PARALLELISM"])
    assert seen == ["true"] and os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.delenv(module.DEFAULTED)  # the user set it: left alone
    with module._parallel_batch():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"
    monkeypatch.setenv(module.DEFAULTED, "1")
    monkeypatch.setattr(module, "_MAIN_PID", -1)  # a forked worker: its inherited pool may be broken
    with module._parallel_batch():
        assert os.environ["TOKENIZERS_PARALLELISM"] == "false"


@pytest.mark.parametrize("stage", ["sft", "dpo", "rm", "kto"])
def test_every_stage_batches_its_pieces_with_the_same_ids(tokenizer, monkeypatch, stage):
    from engine.data.tokenize import TokenizeOptions, tokenize_examples
    from engine.templates import get_template

    template = get_template("chatml", tokenizer)
    rows = []
    for i in range(6):
        messages = [{"role": "user", "content": f"Hello, how are you? {i}"}]
        if stage == "sft":
            messages.append({"role": "assistant", "content": "The cat sat on the mat." * (i + 1)})
        if stage == "kto":
            messages.append({"role": "assistant", "content": "你好，世界。" * (i + 1)})
        rows.append({"messages": messages, "system": "Be brief." if i % 2 else None,
                     "chosen": {"role": "assistant", "content": "Hello, how are you?" * (i + 1)},
                     "rejected": {"role": "assistant", "content": "mat"}, "kto_tag": bool(i % 2)})
    opts = TokenizeOptions(cutoff_len=64)
    batches = []
    monkeypatch.setattr(tokenizer, "_tokenizer", _Spy(tokenizer._tokenizer, batches))
    batched = tokenize_examples(rows, stage, tokenizer, template, opts)
    assert len(batches) == 1  # one batched call for the whole chunk
    monkeypatch.setattr(module, "_direct_backend", lambda tok: None)  # plain encode, one piece at a time
    assert tokenize_examples(rows, stage, tokenizer, template, opts) == batched
