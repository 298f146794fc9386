"""Chat templates: exact renders, token masks, thinking, Jinja export and the tokenizer-template fallback."""

from __future__ import annotations

import pytest

from engine.templates import TEMPLATES, Template, TemplateError, get_template, list_templates

CONVERSATION = [
    {"role": "user", "content": "Hi"},
    {"role": "assistant", "content": "Hello!"},
    {"role": "user", "content": "How are you?"},
    {"role": "assistant", "content": "Fine."},
]

EXPECTED = {
    "default": "System: Be brief.\nHuman: Hi\nAssistant: Hello!</s>\nHuman: How are you?\nAssistant: Fine.</s>\n",
    "empty": "Be brief.HiHello!How are you?Fine.",
    "chatml": (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
        "<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\nFine.<|im_end|>\n"
    ),
    "qwen": (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
        "<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\nFine.<|im_end|>\n"
    ),
    "qwen3": (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
        "<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
        "Fine.<|im_end|>\n"
    ),
    "qwen3_nothink": (
        "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello!"
        "<|im_end|>\n<|im_start|>user\nHow are you?<|im_end|>\n<|im_start|>assistant\nFine.<|im_end|>\n"
    ),
    "llama3": (
        "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
        "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
        "Hello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHow are you?<|eot_id|>"
        "<|start_header_id|>assistant<|end_header_id|>\n\nFine.<|eot_id|>"
    ),
    "mistral": "<s>[INST] Be brief.\n\nHi[/INST] Hello!</s>[INST] How are you?[/INST] Fine.</s>",
    "gemma3": (
        "<bos><start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello!<end_of_turn>\n"
        "<start_of_turn>user\nHow are you?<end_of_turn>\n<start_of_turn>model\nFine.<end_of_turn>\n"
    ),
    "gemma4": (
        "<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
        "<|turn>user\nHow are you?<turn|>\n<|turn>model\nFine.<turn|>\n"
    ),
    "gemma4n": (
        "<bos><|turn>system\n<|think|>Be brief.<turn|>\n<|turn>user\nHi<turn|>\n<|turn>model\nHello!<turn|>\n"
        "<|turn>user\nHow are you?<turn|>\n<|turn>model\nFine.<turn|>\n"
    ),
    "glm4": "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\nHello!<|user|>\nHow are you?<|assistant|>\nFine.",
    "phi4": (
        "<|im_start|>system<|im_sep|>Be brief.<|im_end|><|im_start|>user<|im_sep|>Hi<|im_end|>"
        "<|im_start|>assistant<|im_sep|>Hello!<|im_end|><|im_start|>user<|im_sep|>How are you?<|im_end|>"
        "<|im_start|>assistant<|im_sep|>Fine.<|im_end|>"
    ),
    "deepseek3": (
        "<｜begin▁of▁sentence｜>Be brief.<｜User｜>Hi<｜Assistant｜>Hello!<｜end▁of▁sentence｜><｜User｜>How are you?"
        "<｜Assistant｜>Fine.<｜end▁of▁sentence｜>"
    ),
}

# The trained text of each reply (what the model learns to write), per template.
REPLIES = {
    "default": (" Hello!</s>\n", " Fine.</s>\n"),
    "empty": ("Hello!", "Fine."),
    "chatml": ("Hello!<|im_end|>\n", "Fine.<|im_end|>\n"),
    "qwen": ("Hello!<|im_end|>\n", "Fine.<|im_end|>\n"),
    "qwen3": ("Hello!<|im_end|>\n", "<think>\n\n</think>\n\nFine.<|im_end|>\n"),
    "qwen3_nothink": ("Hello!<|im_end|>\n", "Fine.<|im_end|>\n"),
    "llama3": ("Hello!<|eot_id|>", "Fine.<|eot_id|>"),
    "mistral": (" Hello!</s>", " Fine.</s>"),
    "gemma3": ("Hello!<end_of_turn>\n", "Fine.<end_of_turn>\n"),
    "gemma4": ("Hello!<turn|>\n", "Fine.<turn|>\n"),
    "gemma4n": ("Hello!<turn|>\n", "Fine.<turn|>\n"),
    "glm4": ("\nHello!", "\nFine."),
    "phi4": ("Hello!<|im_end|>", "Fine.<|im_end|>"),
    "deepseek3": ("Hello!<｜end▁of▁sentence｜>", "Fine.<｜end▁of▁sentence｜>"),
}


def test_every_template_has_expectations():
    from engine.templates.vision import VISION_TEMPLATES  # checked string by string in test_templates_vision.py

    assert set(EXPECTED) == set(TEMPLATES) - set(VISION_TEMPLATES) == set(REPLIES)
    assert list_templates() == list(TEMPLATES)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_render_exact(name):
    assert get_template(name).render(CONVERSATION, system="Be brief.") == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_token_masks(name, chat_tokenizer):
    """Each pair's response ids decode to exactly the reply text; prompt + response ids rebuild the render."""
    template = get_template(name)
    pairs = template.encode_multiturn(chat_tokenizer, CONVERSATION, system="Be brief.")
    assert len(pairs) == 2
    eos = chat_tokenizer.eos_token_id
    for (prompt, response), reply in zip(pairs, REPLIES[name]):
        body = response[:-1] if template.append_eos else response
        if template.append_eos:
            assert response[-1] == eos
        assert chat_tokenizer.decode(body) == reply
        assert prompt, "every reply has a prompt before it"
    rebuilt = "".join(chat_tokenizer.decode(p) + chat_tokenizer.decode(r[:-1] if template.append_eos else r)
                      for p, r in pairs)
    assert rebuilt == template.render(CONVERSATION, system="Be brief.", tokenizer=chat_tokenizer)


def test_exact_ids_qwen(chat_tokenizer):
    tok = chat_tokenizer
    pairs = get_template("qwen").encode_multiturn(tok, CONVERSATION[:2])
    expected_prompt = tok.encode(
        "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n"
        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", add_special_tokens=False)
    assert pairs == [(expected_prompt, tok.encode("Hello!<|im_end|>\n", add_special_tokens=False))]
    assert tok.convert_tokens_to_ids("<|im_end|>") in pairs[0][1]


def test_generation_prompts(chat_tokenizer):
    prompt = CONVERSATION[:3]
    assert get_template("llama3").render(prompt, add_generation_prompt=True).endswith(
        "How are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert get_template("qwen3").render(prompt, add_generation_prompt=True).endswith("<|im_start|>assistant\n")
    assert get_template("qwen3", enable_thinking=False).render(prompt, add_generation_prompt=True).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert get_template("gemma4").render(prompt, add_generation_prompt=True).endswith("<turn|>\n<|turn>model\n")
    assert get_template("gemma4", enable_thinking=False).render(prompt).startswith(
        "<bos><|turn>system\nYou are a helpful assistant.<turn|>\n")
    ids = get_template("chatml").encode_prompt(chat_tokenizer, prompt)
    assert chat_tokenizer.decode(ids).endswith("How are you?<|im_end|>\n<|im_start|>assistant\n")
    with pytest.raises(TemplateError, match="must end with a user"):
        get_template("chatml").encode_prompt(chat_tokenizer, CONVERSATION)


def test_default_system_and_system_message():
    qwen = get_template("qwen")
    assert qwen.render(CONVERSATION[:1]).startswith("<|im_start|>system\nYou are Qwen, created by Alibaba Cloud.")
    as_message = qwen.render([{"role": "system", "content": "Custom."}] + CONVERSATION[:2])
    assert as_message == qwen.render(CONVERSATION[:2], system="Custom.")
    assert get_template("qwen", default_system="Other.").render(CONVERSATION[:1]).startswith(
        "<|im_start|>system\nOther.<|im_end|>")
    assert get_template("chatml").render(CONVERSATION[:2]).startswith("<|im_start|>user\nHi")
    with pytest.raises(TemplateError, match="only come first"):
        qwen.render(CONVERSATION[:1] + [{"role": "system", "content": "late"}])


# ------------------------------------------------------------------------------------------------- thinking
def test_qwen3_thinking_history_and_current():
    template = get_template("qwen3")
    conversation = [
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "<think>\nold thoughts\n</think>\n\nA1"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "A2", "thinking": "new thoughts"},
    ]
    assert template.render(conversation) == (
        "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nnew thoughts\n</think>\n\nA2<|im_end|>\n"
    )
    segments = get_template("qwen3", enable_thinking=False).segments(conversation)
    trained = [text for text, is_reply in segments if is_reply]
    assert trained == ["A1<|im_end|>\n", "A2<|im_end|>\n"]
    assert segments[-2] == ("<|im_start|>assistant\n<think>\n\n</think>\n\n", False)


def test_gemma4_thinking_and_split():
    template = get_template("gemma4")
    rendered = template.render([{"role": "user", "content": "q"}, {"role": "assistant", "content": "A",
                                                                     "thinking": "hmm"}], system="S")
    assert rendered == ("<bos><|turn>system\n<|think|>S<turn|>\n<|turn>user\nq<turn|>\n<|turn>model\n"
                        "<|channel>thought\nhmm<channel|>A<turn|>\n")
    assert template.split_thinking("<|channel>thought\nplan<channel|>Answer") == ("plan", "Answer")
    assert template.split_thinking("Just an answer") == ("", "Just an answer")
    assert template.parse_reply("<|channel>thought\nplan<channel|>Answer<turn|>") == ("Answer", [])


def test_qwen3_split_thinking_and_parse_reply():
    template = get_template("qwen3")
    assert template.split_thinking("<think>\nplan\n</think>\n\nAnswer") == ("plan", "Answer")
    assert template.split_thinking("plan\n</think>\n\nAnswer") == ("plan", "Answer")
    text = '<think>\nx\n</think>\n\nLet me check.\n<tool_call>\n{"name": "f", "arguments": {"a": 1}}\n</tool_call>'
    assert template.parse_reply(text) == ("Let me check.", [{"name": "f", "arguments": {"a": 1}}])


# ---------------------------------------------------------------------------------------------------- tools
TOOLS = [{"name": "get_weather", "description": "Weather of a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}},
                         "required": ["city"]}}]
TOOL_CONVERSATION = [
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "function", "content": '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'},
    {"role": "observation", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "21 degrees."},
]


def test_qwen_tool_conversation():
    rendered = get_template("qwen").render(TOOL_CONVERSATION, tools=TOOLS)
    assert "# Tools\n\nYou may call one or more functions to assist with the user query." in rendered
    assert ('<tools>\n{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city"'
            in rendered)
    assert ('<|im_start|>assistant\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n'
            "</tool_call><|im_end|>\n") in rendered
    assert '<|im_start|>user\n<tool_response>\n{"temp": 21}\n</tool_response><|im_end|>\n' in rendered


def test_gemma4_tool_conversation():
    rendered = get_template("gemma4").render(TOOL_CONVERSATION, tools=TOOLS)
    assert ("declaration:get_weather{description:<|\"|>Weather of a city<|\"|>,parameters:{properties:{city:"
            "{description:<|\"|>City<|\"|>,type:<|\"|>STRING<|\"|>}},required:[<|\"|>city<|\"|>],"
            "type:<|\"|>OBJECT<|\"|>}}") in rendered
    assert "<|turn>model\n<|tool_call>call:get_weather{city:<|\"|>Paris<|\"|>}<tool_call|><turn|>\n" in rendered
    assert '<|turn>tool\n{"temp": 21}<turn|>\n<|turn>model\n21 degrees.<turn|>\n' in rendered


def test_glm4_and_llama3_tool_conversation():
    glm = get_template("glm4").render(TOOL_CONVERSATION, tools=TOOLS)
    assert "# 可用工具\n\n## get_weather\n\n{" in glm
    assert '<|assistant|>get_weather\n{"city": "Paris"}<|observation|>\n{"temp": 21}<|assistant|>\n21 degrees.' in glm
    llama = get_template("llama3").render(TOOL_CONVERSATION, tools=TOOLS)
    assert '<|start_header_id|>assistant<|end_header_id|>\n\n{"name": "get_weather", "parameters": {"city": "Paris"}}' \
           '<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n{"temp": 21}<|eot_id|>' in llama


def test_openai_style_messages_are_accepted():
    openai = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "21 degrees."},
    ]
    template = get_template("qwen")
    assert template.render(openai, tools=TOOLS) == template.render(TOOL_CONVERSATION, tools=TOOLS)


def test_function_turn_with_prose_round_trips():
    template = get_template("qwen")
    message = {"role": "function", "content": '[{"name": "f", "arguments": {}}]', "text": "Checking."}
    reply = template.reply_text(message)
    assert reply == 'Checking.\n<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
    assert template.parse_reply(reply) == ("Checking.", [{"name": "f", "arguments": {}}])


def test_bad_tool_input_is_a_clear_error():
    with pytest.raises(TemplateError, match="tools"):
        get_template("qwen").render(CONVERSATION[:1], tools="{not json")
    with pytest.raises(TemplateError, match="tool-call turn"):
        get_template("qwen").render([CONVERSATION[0], {"role": "function", "content": "not json"}])
    with pytest.raises(TemplateError, match="tool_format"):
        get_template("qwen", tool_format="nope")


# ------------------------------------------------------------------------------------------------ tokenizer
def test_fix_tokenizer_adds_stop_word_and_sets_eos(tokenizer_factory):
    tokenizer = tokenizer_factory(markers=["<|im_start|>"])
    tokenizer.pad_token = None
    template = get_template("qwen")
    before = len(tokenizer)
    added = template.fix_tokenizer(tokenizer)
    assert added == 1 and len(tokenizer) == before + 1
    assert tokenizer.eos_token == "<|im_end|>"
    assert tokenizer.pad_token == "<|im_end|>"
    assert tokenizer.encode("<|im_end|>", add_special_tokens=False) == [tokenizer.eos_token_id]
    assert template.get_stop_token_ids(tokenizer) == [tokenizer.eos_token_id]
    assert template.fix_tokenizer(tokenizer) == 0


def test_stop_token_ids(chat_tokenizer):
    ids = get_template("llama3").get_stop_token_ids(chat_tokenizer)
    vocab = chat_tokenizer.get_vocab()
    assert ids == [chat_tokenizer.eos_token_id, vocab["<|eot_id|>"], vocab["<|eom_id|>"]]
    assert get_template("glm4").stop_words == ("<|user|>", "<|observation|>")


def test_unknown_template_names_nearest():
    with pytest.raises(TemplateError, match="Did you mean 'qwen' or 'qwen3'") as info:
        get_template("qwen2")
    assert "gemma4n" in str(info.value)
    assert get_template("  Qwen3 ").name == "qwen3"


def test_empty_name_needs_chat_template(tokenizer_factory):
    with pytest.raises(TemplateError, match="has no chat template.*Set `template`"):
        get_template(None, tokenizer_factory())
    with pytest.raises(TemplateError, match="no tokenizer"):
        get_template("", None)


# -------------------------------------------------------------------------------------------------- jinja
JINJA_CASES = [
    (CONVERSATION, False),
    (CONVERSATION[:3], True),
    ([{"role": "system", "content": "Be brief."}] + CONVERSATION, False),
    ([{"role": "system", "content": "Be brief."}] + CONVERSATION[:1], True),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "<think>\nt\n</think>\n\nA"},
      {"role": "user", "content": "q2"}, {"role": "assistant", "content": "B", "reasoning_content": "r"}], False),
    ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "A"}, {"role": "tool", "content": "42"}],
     True),
]


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_to_jinja_matches_render(name, tokenizer_factory):
    template = get_template(name)
    tokenizer = tokenizer_factory(chat_template=template.to_jinja())
    for messages, generation in JINJA_CASES:
        for thinking in (True, False):
            variant = get_template(name, enable_thinking=thinking)
            expected = variant.render(messages, add_generation_prompt=generation, tokenizer=tokenizer)
            rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                                     enable_thinking=thinking)
            assert rendered == expected, (name, messages, generation, thinking)


# ------------------------------------------------------------------------------------------------ fallback
def test_tokenizer_template_fallback_masks(tokenizer_factory):
    """A tokenizer whose chat template is qwen3's: the fallback finds the same trained replies as qwen3 itself,
    although that chat template rewrites history turns (thinking dropped), so prefixes do not line up."""
    tokenizer = tokenizer_factory(chat_template=TEMPLATES["qwen3"].to_jinja())
    fallback = get_template(None, tokenizer)
    assert fallback.reasoning and fallback.to_jinja() == tokenizer.chat_template
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nold\n</think>\n\nHello!"},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Fine.", "thinking": "be nice"},
    ]
    builtin = TEMPLATES["qwen3"]
    assert fallback.encode_multiturn(tokenizer, conversation, system="S") == builtin.encode_multiturn(
        tokenizer, conversation, system="S")
    assert fallback.encode_prompt(tokenizer, conversation[:3]) == builtin.encode_prompt(tokenizer, conversation[:3])
    trained = [text for text, is_reply in fallback.segments(conversation) if is_reply]
    assert trained == ["Hello!<|im_end|>\n", "<think>\nbe nice\n</think>\n\nFine.<|im_end|>\n"]


def test_tokenizer_template_fallback_prefix_stable(tokenizer_factory):
    tokenizer = tokenizer_factory(chat_template=TEMPLATES["llama3"].to_jinja())
    fallback = get_template("", tokenizer)
    pairs = fallback.encode_multiturn(tokenizer, CONVERSATION, system="Be brief.")
    assert [tokenizer.decode(r) for _, r in pairs] == list(REPLIES["llama3"])
    assert fallback.fix_tokenizer(tokenizer) == 0


def test_template_is_a_frozen_dataclass():
    template = get_template("chatml")
    assert isinstance(template, Template)
    with pytest.raises(AttributeError):
        template.name = "other"  # type: ignore[misc]
    assert get_template("qwen3", enable_thinking=False) is not TEMPLATES["qwen3"]
    assert TEMPLATES["qwen3"].enable_thinking is True
