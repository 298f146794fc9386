"""Chat replies: a stream never splits a multi-byte character; template stop words cut whole replies too."""

import random
import types

import pytest
import tinymodels
import torch

from engine.config import build_config
from engine.infer.chat import ChatModel, _ReplyStreamer
from engine.templates import get_template

MIXED = "Héllo wörld!\n你好，世界。😀 ok\nçà et là — “quoted” 日本語テキスト\n🎉🎉 end."


class ByteTokenizer:
    """Token i is the i-th byte chunk; decoding shows U+FFFD for incomplete characters, as byte-level BPE does."""

    def __init__(self, chunks):
        self.chunks = chunks

    def decode(self, ids, **kwargs):
        ids = [ids] if isinstance(ids, int) else ids
        return b"".join(self.chunks[i] for i in ids).decode("utf-8", errors="replace")


def stream_pieces(chunks, count=None):
    """The pieces a reply streamer hands out for tokens 0..count-1 (then the end of the stream)."""
    streamer = _ReplyStreamer(ByteTokenizer(chunks), [], skip_special_tokens=True)
    streamer.put(torch.tensor([0]))  # the prompt is skipped
    for index in range(count if count is not None else len(chunks)):
        streamer.put(torch.tensor([index]))
    streamer.end()
    return [piece for piece in streamer if piece]


def byte_chunks(text, seed):
    data, rng, chunks, i = text.encode("utf-8"), random.Random(seed), [], 0
    while i < len(data):
        size = rng.randint(1, 4)
        chunks.append(data[i:i + size])
        i += size
    return chunks


@pytest.mark.parametrize("seed", range(40))
def test_streamed_pieces_join_to_the_text_without_broken_characters(seed):
    pieces = stream_pieces(byte_chunks(MIXED, seed))
    assert "".join(pieces) == MIXED
    assert not any("\ufffd" in piece for piece in pieces)


def test_a_reply_cut_inside_a_character_never_shows_a_broken_one():
    # "ok 你" with the generation stopped (length limit) after the first byte of 你
    chunks = [b"ok ", "你".encode()[:1], "你".encode()[1:]]
    pieces = stream_pieces(chunks, count=2)
    assert "".join(pieces) == "ok " and not any("\ufffd" in p for p in pieces)


def test_chatml_stop_words_equal_llamafactory():
    # LLaMA-Factory's chatml: stop_words=["<|im_end|>", "<|im_start|>"]
    assert tuple(get_template("chatml").stop_words) == ("<|im_end|>", "<|im_start|>")


@pytest.fixture(scope="module")
def chat_model(tmp_path_factory):
    folder = tinymodels.build_tiny_model(tmp_path_factory.mktemp("tiny-polish"), extra_text=("user assistant",),
                                         max_positions=512)
    model = ChatModel(build_config({"model_name_or_path": str(folder), "template": "chatml", "do_sample": False,
                                    "max_new_tokens": 4}))
    yield model
    model.unload()


def test_non_streamed_reply_stops_at_a_spelled_out_turn_marker(chat_model):
    generation = chat_model.start([{"role": "user", "content": "Hi"}], max_new_tokens=1)
    generation.close()
    assert "<|im_start|>" in generation.stop_strings and "<|im_end|>" in generation.stop_strings
    # a small model writes the next turn's marker out of ordinary tokens: the reply must end before it
    ids = chat_model.tokenizer.encode("Sure<|im_start|>user\nmore", add_special_tokens=False,
                                      split_special_tokens=True)
    fake = types.SimpleNamespace(generated_ids=ids, stop_strings=generation.stop_strings, prompt_tokens=3,
                                 completion_tokens=len(ids), finish_reason="length")
    assert chat_model.finish(fake).text == "Sure"
