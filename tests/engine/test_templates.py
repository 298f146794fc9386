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

# The trained text of each reply of CONVERSATION for a few templates (LLaMA-Factory's strings; every template is
# checked id by id against LLaMA-Factory in test_templates_lf.py).
REPLIES = {
    "llama3": ("Hello!<|eot_id|>", "Fine.<|eot_id|>"),
    "qwen3": ("<think>\n\n</think>\n\nHello!<|im_end|>\n", "<think>\n\n</think>\n\nFine.<|im_end|>\n"),
    "default": ("Hello!</s>\n", "Fine.</s>\n"),
    "empty": ("Hello!", "Fine."),
}


def test_registry_lists_every_template():
    assert list_templates() == list(TEMPLATES) and len(TEMPLATES) >= 40


@pytest.mark.parametrize("name", sorted(REPLIES))
def test_token_masks(name, chat_tokenizer):
    """Each pair's response ids decode to exactly the reply text; prompt + response ids rebuild the render."""
    template = get_template(name)
    pairs = template.encode_multiturn(chat_tokenizer, CONVERSATION, system="Be brief.")
    assert [chat_tokenizer.decode(r) for _, r in pairs] == list(REPLIES[name])
    rebuilt = "".join(chat_tokenizer.decode(p) + chat_tokenizer.decode(r) for p, r in pairs)
    assert rebuilt == template.render(CONVERSATION, system="Be brief.", tokenizer=chat_tokenizer)


def test_generation_prompts(chat_tokenizer):
    prompt = CONVERSATION[:3]
    assert get_template("llama3").render(prompt, add_generation_prompt=True).endswith(
        "How are you?<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n")
    assert get_template("qwen3").render(prompt, add_generation_prompt=True).endswith("<|im_start|>assistant\n")
    assert get_template("qwen3", enable_thinking=False).render(prompt, add_generation_prompt=True).endswith(
        "<|im_start|>assistant\n<think>\n\n</think>\n\n")
    assert get_template("gemma4").render(prompt, add_generation_prompt=True).endswith("<turn|>\n<|turn>model\n")
    assert get_template("gemma4", enable_thinking=False).render(prompt).startswith(
        "<bos><|turn>system\n<|think|>You are a helpful assistant.<turn|>\n"), "<|think|> is part of the system slot"
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
        "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\n<think>\nold thoughts\n</think>\n\nA1<|im_end|>\n"
        "<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\nnew thoughts\n</think>\n\nA2<|im_end|>\n"
    ), "multi-turn training keeps history thoughts, as LLaMA-Factory does"
    assert template.render_oneturn(conversation) == (
        "<|im_start|>user\nq1<|im_end|>\n<|im_start|>assistant\nA1<|im_end|>\n<|im_start|>user\nq2<|im_end|>\n"
        "<|im_start|>assistant\n<think>\nnew thoughts\n</think>\n\nA2<|im_end|>\n"
    ), "single-turn encodings drop history thoughts"
    segments = get_template("qwen3", enable_thinking=False).segments(conversation)
    trained = [text for text, is_reply in segments if is_reply]
    assert trained == ["A1<|im_end|>\n", "A2<|im_end|>\n"]
    assert segments[-2] == ("<|im_start|>user\nq2<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n", False)


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


def test_encoding_leaves_the_callers_messages_as_they_were():
    """Templates copy each message before writing its content (thinking inlined or stripped, tool calls as text);
    the rows a dataset hands over are never changed, nested values included."""
    import copy

    messages = [
        {"role": "system", "content": "S"},
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "<think>\nold\n</think>\n\nA1"},
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None,
         "tool_calls": [{"type": "function", "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "content": '{"temp": 21}'},
        {"role": "assistant", "content": "A2", "thinking": "new"},
    ]
    before = copy.deepcopy(messages)
    for name in ("qwen3", "qwen", "llama3"):
        template = get_template(name)
        template.render(messages, tools=TOOLS)
        template.render_oneturn(messages, tools=TOOLS)
        template.segments(messages, tools=TOOLS)
        assert messages == before, name


def test_function_turn_with_prose_round_trips():
    template = get_template("qwen")
    message = {"role": "function", "content": '[{"name": "f", "arguments": {}}]', "text": "Checking."}
    reply = template.reply_text(message)
    assert reply == 'Checking.<tool_call>\n{"name": "f", "arguments": {}}\n</tool_call>'
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


def test_empty_name_needs_a_tokenizer(tokenizer_factory):
    assert get_template(None, tokenizer_factory()) == TEMPLATES["empty"]  # LLaMA-Factory's fallback (see parsed)
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


TOKEN_SLOT_TEMPLATES = ("chatglm3", "yuan")  # write single tokens by name: no Jinja export, as in LLaMA-Factory


@pytest.mark.parametrize("name", sorted(set(TEMPLATES) - set(TOKEN_SLOT_TEMPLATES)))
def test_to_jinja_matches_render(name, tokenizer_factory):
    template = get_template(name)
    tokenizer = tokenizer_factory(chat_template=template.to_jinja())
    for messages, generation in JINJA_CASES:
        for thinking in (True, False, None):  # None: LLaMA-Factory's mixed mode
            variant = get_template(name, enable_thinking=thinking)
            expected = variant.render_oneturn(messages, add_generation_prompt=generation, tokenizer=tokenizer)
            rendered = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation,
                                                     enable_thinking=thinking)
            assert rendered == expected, (name, messages, generation, thinking)
    mixed = get_template(name, enable_thinking=None)  # exported from a mixed-mode run: its default is mixed
    tokenizer = tokenizer_factory(chat_template=mixed.to_jinja())
    for messages, generation in JINJA_CASES:
        expected = mixed.render_oneturn(messages, add_generation_prompt=generation, tokenizer=tokenizer)
        assert tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation) == expected


def test_templates_with_token_slots_export_no_jinja():
    """ChatGLM3 and Yuan write some tokens by name ({token:...}), which their text need not tokenize back to: export
    keeps the tokenizer's own chat template (LLaMA-Factory refuses these: "Dict is not supported")."""
    for name in TOKEN_SLOT_TEMPLATES:
        assert get_template(name).to_jinja() == ""
    assert {name for name, t in TEMPLATES.items() if "{token:" in t.prefix + t.user + t.observation} == set(
        TOKEN_SLOT_TEMPLATES)


# ------------------------------------------------------------------------------------------------ fallback
def test_tokenizer_template_read_into_slots(tokenizer_factory):
    """A tokenizer whose chat template is qwen3's: read into slots as LLaMA-Factory does (a reasoning template whose
    reply slot has the think tags removed), replies trained with their thoughts as qwen3's own template trains them."""
    tokenizer = tokenizer_factory(chat_template=TEMPLATES["qwen3"].to_jinja())
    parsed = get_template(None, tokenizer)
    assert parsed.reasoning and parsed.assistant == "{content}<|im_end|>\n"
    conversation = [
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "<think>\nold\n</think>\n\nHello!"},
        {"role": "user", "content": "How are you?"},
        {"role": "assistant", "content": "Fine.", "thinking": "be nice"},
    ]
    trained = [text for text, is_reply in parsed.segments(conversation) if is_reply]
    assert trained == ["<think>\nold\n</think>\n\nHello!<|im_end|>\n", "<think>\nbe nice\n</think>\n\nFine.<|im_end|>\n"]


def test_tokenizer_template_fallback_prefix_stable(tokenizer_factory):
    tokenizer = tokenizer_factory(chat_template=TEMPLATES["llama3"].to_jinja())
    fallback = get_template("", tokenizer)
    pairs = fallback.encode_multiturn(tokenizer, CONVERSATION, system="Be brief.")
    assert [tokenizer.decode(r) for _, r in pairs] == list(REPLIES["llama3"])


def test_template_is_a_frozen_dataclass():
    template = get_template("chatml")
    assert isinstance(template, Template)
    with pytest.raises(AttributeError):
        template.name = "other"  # type: ignore[misc]
    assert get_template("qwen3", enable_thinking=False) is not TEMPLATES["qwen3"]
    assert TEMPLATES["qwen3"].enable_thinking is True


def test_a_token_slot_the_tokenizer_lacks_is_a_clear_error(tokenizer_factory):
    """ChatGLM3 writes its role markers as single tokens; a tokenizer without them (LLaMA-Factory writes None as
    their id and fails later) is refused, naming the token and the fix."""
    from engine.errors import UserError

    template = get_template("chatglm3")
    tokenizer = tokenizer_factory(markers=[])
    template.fix_tokenizer(tokenizer)
    with pytest.raises(UserError, match=r"no token '\[gMASK\]'.*model's own tokenizer, or another `template`"):
        template.encode_multiturn(tokenizer, CONVERSATION)
    tokenizer = tokenizer_factory(markers=["[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>"])
    template.fix_tokenizer(tokenizer)
    prompt, reply = template.encode_oneturn(tokenizer, CONVERSATION[:2])
    vocab = tokenizer.get_vocab()
    assert prompt[:3] == [vocab["[gMASK]"], vocab["sop"], vocab["<|user|>"]]
    assert prompt[-1] == vocab["<|assistant|>"] and tokenizer.decode(reply) == "\nHello!"


def test_lf_engine_check_finds_the_missing_tokens_before_the_model_loads(tmp_path):
    """The same refusal comes from the pre-flight check (`lf-engine check`, the board's Start), read from the
    folder's tokenizer.json, so a run does not load the model first; tokens added by `add_special_tokens` pass."""
    from engine.config import build_config
    from engine.preflight import check
    from tests.engine.tinymodels import build_tiny_model

    folder = build_tiny_model(tmp_path / "model")
    cfg = build_config({"model_name_or_path": str(folder), "template": "chatglm3"})
    problems = check(cfg, "chat")
    assert any("`template: chatglm3` writes" in p and "'[gMASK]'" in p and "own template" in p for p in problems)
    added = build_config({"model_name_or_path": str(folder), "template": "chatglm3",
                          "add_special_tokens": "[gMASK],sop,<|system|>,<|user|>,<|assistant|>,<|observation|>"})
    assert not [p for p in check(added, "chat") if "chatglm3" in p]
    import json

    config_file = folder / "tokenizer_config.json"  # tokens transformers adds on load count too
    config = json.loads(config_file.read_text())
    markers = ["[gMASK]", "sop", "<|system|>", "<|user|>", "<|assistant|>", "<|observation|>"]
    config_file.write_text(json.dumps({**config, "extra_special_tokens": markers}))
    assert not [p for p in check(cfg, "chat") if "chatglm3" in p]
    from transformers import AutoTokenizer

    loaded = AutoTokenizer.from_pretrained(folder)  # and transformers does add them
    assert all(loaded.convert_tokens_to_ids(token) is not None for token in markers)
    config_file.write_text(json.dumps({**config, "extra_special_tokens": [["[gMASK]"]]}))  # malformed: no crash
    assert any("`template: chatglm3` writes" in p for p in check(cfg, "chat"))
    assert not [p for p in check(build_config({"model_name_or_path": str(folder), "template": "glm4"}), "chat")
                if "writes" in p]


def test_glm47_empty_thought_is_the_closing_word_alone(chat_tokenizer):
    """GLM-4.7 (and Aeva) write an empty thought as ``</think>`` alone, in training and in generation prompts."""
    for name in ("glm4_7", "aeva"):
        on = get_template(name).segments(CONVERSATION[:2])
        assert on[1][0].startswith("</think>") and "<think>" not in on[1][0]
        off = get_template(name, enable_thinking=False).segments(CONVERSATION[:2])
        assert off[0][0].endswith("<|assistant|></think>") and "think" not in off[1][0]
