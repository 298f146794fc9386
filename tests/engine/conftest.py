"""Shared fixtures for engine tests."""

from __future__ import annotations

from pathlib import Path

import pytest

FIXTURE_DATA = Path(__file__).resolve().parent.parent / "fixtures" / "data"

# Every marker of the built-in templates, so each is one token in the test tokenizer.
TEMPLATE_MARKERS = [
    "<|im_start|>", "<|im_end|>", "<|im_sep|>", "<|begin_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
    "<|eot_id|>", "<|eom_id|>", "<start_of_turn>", "<end_of_turn>", "<|turn>", "<turn|>", "<|think|>", "<|channel>",
    "<channel|>", "<|tool_call>", "<tool_call|>", '<|"|>', "[gMASK]", "<sop>", "<|system|>", "<|user|>",
    "<|assistant|>", "<|observation|>", "<｜begin▁of▁sentence｜>", "<｜User｜>", "<｜Assistant｜>",
    "<｜end▁of▁sentence｜>", "<think>", "</think>", "<tool_call>", "</tool_call>", "[INST]", "[/INST]",
]
_CORPUS = [
    "Hello! How are you? I am fine, thank you.",
    "The weather in Paris is sunny and warm today.",
    "You are a helpful assistant. Answer the question briefly.",
    "system user assistant model tool response function arguments name",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}',
    "Two plus two is four. 0123456789",
]


def make_tokenizer(markers: list[str] | None = None, chat_template: str | None = None):
    """A tiny byte-level BPE tokenizer (BOS <s>, EOS </s>, PAD <pad>) with ``markers`` as special tokens."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    specials = ["<s>", "</s>", "<pad>"] + list(TEMPLATE_MARKERS if markers is None else markers)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(_CORPUS, trainer=trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                        clean_up_tokenization_spaces=False)
    if chat_template is not None:
        tokenizer.chat_template = chat_template
    return tokenizer


@pytest.fixture(scope="session")
def chat_tokenizer():
    """A shared tiny tokenizer knowing every template marker (do not modify it in tests)."""
    return make_tokenizer()


@pytest.fixture
def fresh_tokenizer():
    """A new tiny tokenizer per test, for tests that modify it."""
    return make_tokenizer()


@pytest.fixture(scope="session")
def fixture_data_dir() -> Path:
    """tests/fixtures/data: small datasets in every supported layout with a dataset_info.json."""
    return FIXTURE_DATA


@pytest.fixture(scope="session")
def tokenizer_factory():
    """``make_tokenizer(markers=None, chat_template=None)`` for tests that need a custom tokenizer."""
    return make_tokenizer


@pytest.fixture
def library_logs_to_caplog():
    """Send transformers' log records to the root logger (pytest's handlers) instead of its own stderr handler.

    That handler keeps the ``sys.stderr`` of the test that first configured it; once that test's capture is closed,
    later warnings print "--- Logging error ---" with a traceback into the current test's captured stderr.
    """
    from transformers.utils import logging as hf_logging

    hf_logging.disable_default_handler()
    hf_logging.enable_propagation()
    yield
    hf_logging.disable_propagation()
    hf_logging.enable_default_handler()
