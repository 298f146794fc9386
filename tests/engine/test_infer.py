"""Chat (streaming, stop words, cancellation, tool calls), generation settings and the terminal chat."""

import io
import threading

import pytest
import tinymodels
import torch

from engine.config import build_config
from engine.infer.chat import ChatModel, Reply, _StopStrings, check_messages, reply_from_text
from engine.infer.generation import generation_kwargs

STOP_WORD = "<|im_end|>"


def build_tiny_model(folder):
    """The ChatML stop word ``<|im_end|>`` is token 0, so a model whose logits are all equal stops at once."""
    return tinymodels.build_tiny_model(folder, specials=(STOP_WORD, "<pad>", "</s>", "<|im_start|>"),
                                       extra_text=("user assistant",), max_positions=512)


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory):
    return build_tiny_model(tmp_path_factory.mktemp("tiny-chat-model"))


def make_cfg(model_dir, **extra):
    return build_config({"model_name_or_path": str(model_dir), "template": "chatml", "do_sample": False,
                         "max_new_tokens": 8, **extra})


@pytest.fixture(scope="module")
def chat_model(tiny_dir):
    model = ChatModel(make_cfg(tiny_dir))
    yield model
    model.unload()


HELLO = [{"role": "user", "content": "Hello"}]


# -- settings and helpers --------------------------------------------------------------------------------------


def test_generation_kwargs_greedy_and_sampling():
    cfg = build_config({"do_sample": False, "temperature": 0.5, "max_new_tokens": 7})
    greedy = generation_kwargs(cfg.generation, [3, 4], None)
    assert greedy["do_sample"] is False and greedy["max_new_tokens"] == 7
    assert greedy["temperature"] == 1.0 and greedy["eos_token_id"] == [3, 4] and greedy["pad_token_id"] == 3
    sampled = generation_kwargs(cfg.generation, [3], 0, {"do_sample": True, "top_p": 0.5, "top_k": 5})
    assert (sampled["do_sample"], sampled["temperature"], sampled["top_p"], sampled["top_k"]) == (True, 0.5, 0.5, 5)
    assert generation_kwargs(cfg.generation, [3], 0, {"do_sample": True, "temperature": 0})["do_sample"] is False
    assert generation_kwargs(build_config({"num_beams": 3}).generation, [3], 0, allow_beams=False)["num_beams"] == 1
    with pytest.raises(ValueError, match="Unknown generation setting `beam`"):
        generation_kwargs(cfg.generation, [3], 0, {"beam": 2})
    with pytest.raises(ValueError, match="max_new_tokens"):
        generation_kwargs(cfg.generation, [3], 0, {"max_new_tokens": 0})
    with pytest.raises(ValueError, match="top_p"):
        generation_kwargs(cfg.generation, [3], 0, {"top_p": 1.5})


def test_stop_strings_hold_back_partial_matches():
    stops = _StopStrings(["STOP"])
    assert stops.feed("Hello ST") == "Hello "  # "ST" may start the stop string
    assert stops.feed("O") == ""
    assert stops.feed("RE") == "STORE"  # it did not
    assert stops.feed(" and STOP here") == " and "
    assert stops.hit
    assert _StopStrings([]).feed("anything") == "anything"


def test_check_messages():
    assert check_messages([{"role": "user", "content": None}]) == [{"role": "user", "content": ""}]
    with pytest.raises(ValueError, match="non-empty list"):
        check_messages([])
    with pytest.raises(ValueError, match="role 'system'"):
        check_messages([{"role": "system", "content": "x"}, {"role": "user", "content": "y"}])
    with pytest.raises(ValueError, match="last message must come from the user"):
        check_messages([{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}])


def test_reply_from_text_parses_tool_calls_and_thinking():
    from engine.templates import get_template

    qwen = get_template("qwen")
    reply = reply_from_text(qwen, 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}'
                                  "\n</tool_call>")
    assert reply.text == "Checking."
    assert reply.tool_calls == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    thinking = reply_from_text(get_template("qwen3"), "<think>\nLet me see.\n</think>\n\nParis.")
    assert (thinking.thinking, thinking.text, thinking.tool_calls) == ("Let me see.", "Paris.", [])
    plain = reply_from_text(qwen, "Just text <|im_start|>", hidden_tokens=["<|im_start|>"])
    assert plain == Reply(text="Just text")


# -- chat on a tiny model ----------------------------------------------------------------------------------------


def test_chat_matches_plain_greedy_generate(chat_model, tiny_dir):
    from transformers import AutoModelForCausalLM

    reply = chat_model.chat(HELLO)
    prompt_ids = chat_model.encode(HELLO)
    assert prompt_ids == chat_model.template.encode_prompt(chat_model.tokenizer, HELLO)
    assert (reply.prompt_tokens, reply.completion_tokens, reply.finish_reason) == (len(prompt_ids), 8, "length")

    plain = AutoModelForCausalLM.from_pretrained(tiny_dir).eval()
    with torch.inference_mode():
        out = plain.generate(torch.tensor([prompt_ids]), max_new_tokens=8, do_sample=False,
                             eos_token_id=chat_model.stop_ids, pad_token_id=chat_model.tokenizer.pad_token_id)
    expected_ids = out[0, len(prompt_ids):].tolist()
    generation = chat_model.start(HELLO)
    streamed = "".join(generation)
    assert generation.generated_ids == expected_ids
    assert streamed == chat_model.tokenizer.decode(expected_ids, skip_special_tokens=True)
    assert reply.text == streamed.strip()


def test_stream_yields_pieces_and_honours_overrides(chat_model):
    pieces = list(chat_model.stream(HELLO, max_new_tokens=3))
    assert pieces and all(isinstance(p, str) for p in pieces)
    generation = chat_model.start(HELLO, max_new_tokens=3)
    generation.wait()
    assert generation.completion_tokens == 3
    assert "".join(pieces) == generation.text
    with pytest.raises(ValueError, match="temperature"):
        chat_model.chat(HELLO, temperature="hot")


def test_stop_word_ends_the_reply(tiny_dir):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(tiny_dir)
    with torch.no_grad():
        model.model.norm.weight.zero_()  # all logits equal: greedy picks token 0, the template's stop word
    cfg = make_cfg(tiny_dir)
    chat = ChatModel(cfg, model=model, tokenizer=AutoTokenizer.from_pretrained(tiny_dir))
    assert chat.tokenizer.convert_ids_to_tokens(0) == STOP_WORD and 0 in chat.stop_ids
    reply = chat.chat(HELLO)
    assert (reply.text, reply.completion_tokens, reply.finish_reason) == ("", 1, "stop")
    assert list(chat.stream(HELLO)) == []


def test_stop_strings_cut_the_reply(chat_model):
    full = chat_model.chat(HELLO, max_new_tokens=12)
    text = chat_model.start(HELLO, max_new_tokens=12)
    raw = "".join(text)
    assert len(raw) > 4
    stop = raw[2:4]
    cut = chat_model.chat(HELLO, max_new_tokens=12, stop=stop)
    assert cut.finish_reason == "stop"
    assert cut.text == raw[: raw.find(stop)].strip()
    assert cut.completion_tokens <= full.completion_tokens


def test_stop_event_and_early_exit_cancel_generation(chat_model):
    event = threading.Event()
    event.set()
    cancelled = chat_model.chat(HELLO, max_new_tokens=50, stop_event=event)
    assert cancelled.finish_reason == "cancelled"
    assert cancelled.completion_tokens == 1  # stopping criteria run after each new token

    generation = chat_model.start(HELLO, max_new_tokens=200)
    for _ in generation:
        break
    generation.close()
    assert not generation._thread.is_alive()
    assert generation.completion_tokens < 200
    assert generation.finish_reason == "cancelled"


def test_chat_model_loads_lora_adapters(tiny_dir, tmp_path):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(tiny_dir)
    torch.manual_seed(1)
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"],
                                                 init_lora_weights=False))
    peft_model.save_pretrained(tmp_path / "adapter")
    chat = ChatModel(make_cfg(tiny_dir, adapter_name_or_path=str(tmp_path / "adapter")))
    assert chat.model_name == f"{tiny_dir.name}+adapter"
    prompt = torch.tensor([chat.encode(HELLO)])
    with torch.inference_mode():
        expected = peft_model.eval()(input_ids=prompt).logits
        got = chat.model(input_ids=prompt).logits
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-4)
    chat.unload()
    assert chat.model is None


# -- terminal chat ------------------------------------------------------------------------------------------------


def test_single_query_returns_the_reply(chat_model, tiny_dir):
    from engine.infer.cli_chat import single_query

    expected = chat_model.chat(HELLO).text
    assert single_query(make_cfg(tiny_dir), "Hello") == expected
    assert single_query(chat_model.cfg, "Hello", chat_model=chat_model) == expected


def test_interactive_chat_streams_and_handles_commands(chat_model):
    from engine.infer.cli_chat import interactive_chat

    inputs = iter(["Hello", "clear", "   ", "Hello", "exit", "never read"])
    seen = []

    def read(prompt):
        seen.append(prompt)
        return next(inputs)

    out = io.StringIO()
    interactive_chat(chat_model.cfg, chat_model=chat_model, read=read, out=out)
    text = out.getvalue()
    reply = chat_model.chat(HELLO).text
    assert text.count("Assistant: ") == 2
    assert "The conversation was cleared." in text
    # Same reply both times: `clear` dropped the first exchange from the history.
    assert text.count(reply) >= 2
    assert len(seen) == 5 and chat_model.model is not None


def test_interactive_chat_quits_on_end_of_input(chat_model):
    from engine.infer.cli_chat import interactive_chat

    def read(prompt):
        raise EOFError

    out = io.StringIO()
    interactive_chat(chat_model.cfg, chat_model=chat_model, read=read, out=out)
    assert "Assistant:" not in out.getvalue()
