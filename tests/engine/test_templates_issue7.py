"""Issue 7, item by item: the strings and ids that differed from LLaMA-Factory 0.9.5, written out by hand from its
template, formatter, tool and processor definitions (test_templates_lf.py checks every template and shape against
ids produced by LLaMA-Factory itself)."""

from __future__ import annotations

import pytest
from golden.tokenizers import load

from engine.data.tokenize import IGNORE, TokenizeOptions, sft_row
from engine.templates import get_template, get_tool_format
from engine.templates import tool_formats as tool_formats_module

WEATHER = {"name": "get_weather", "description": "Weather of a city", "parameters": {
    "type": "object", "properties": {"unit": {"type": "string", "enum": ["c", "f"], "description": "Unit",
                                              "default": "c"},
                                     "city": {"type": "string", "description": "City"}},
    "required": ["city"]}}
PING = {"name": "ping", "parameters": {"type": "object", "properties": {}}}
SINGLE = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"}]
TOOL_TURNS = [
    {"role": "user", "content": "Weather?"},
    {"role": "function", "content": '[{"name": "get_weather", "arguments": {"city": "Paris"}}]'},
    {"role": "observation", "content": '{"temp": 21}'},
    {"role": "assistant", "content": "21 degrees."},
]
Q = '<|"|>'


@pytest.fixture(autouse=True)
def _date(monkeypatch):
    monkeypatch.setattr(tool_formats_module, "today", lambda: "26 Jul 2024")


def _texts(tokenizer, pairs):
    return [[tokenizer.decode(p), tokenizer.decode(r)] for p, r in pairs]


def test_default_template():
    tok = load("special")
    template = get_template("default")
    pairs = template.encode_multiturn(tok, SINGLE, system="S")
    assert _texts(tok, pairs) == [["System: S</s>\nHuman: Hi</s>\nAssistant:", "Hello!</s>\n"]]
    assert pairs[0][0][0] != tok.bos_token_id, "no BOS of its own"
    text = template.render(TOOL_TURNS, tools=[WEATHER], tokenizer=tok)
    assert 'Human: {"temp": 21}</s>\nAssistant:21 degrees.</s>\n' in text, "tool results are written as Human:"


def test_empty_template_has_no_eos():
    tok = load("special")
    assert get_template("empty").encode_multiturn(tok, SINGLE) == [(tok.encode("Hi"), tok.encode("Hello!"))]


def test_chatml_adds_both_markers_as_special_tokens():
    tok = load("plain")
    size = len(tok)
    assert get_template("chatml").fix_tokenizer(tok) == 2 and len(tok) == size + 2
    assert tok.eos_token == "<|im_end|>" and "<|im_start|>" in tok.all_special_tokens
    assert tok.encode("<|im_start|>user") [0] == tok.convert_tokens_to_ids("<|im_start|>")


DEFAULT_TOOL_PROMPT = (
    "You have access to the following tools:\n"
    "> Tool Name: get_weather\nTool Description: Weather of a city\nTool Args:\n"
    "  - unit (string): Unit, should be one of [c, f]\n  - city (string, required): City\n\n"
    "Use the following format if using a tool:\n```\nAction: tool name (one of [get_weather])\n"
    "Action Input: the input to the tool, in a JSON format representing the kwargs "
    '(e.g. ```{"input": "hello world", "num_beams": 5}```)\n```\n'
)


@pytest.mark.parametrize("name", ["chatml", "gemma3", "phi4", "deepseek3"])
def test_default_tool_format_users(name):
    template = get_template(name)
    assert template.tool_format == "default"
    text = template.render(TOOL_TURNS, system="S", tools=[WEATHER])
    assert "S" + DEFAULT_TOOL_PROMPT in text
    assert 'Action: get_weather\nAction Input: {"city": "Paris"}' in text
    assert get_tool_format("default").extract('Action: get_weather\nAction Input: {"city": "Paris"}') == (
        "", [{"name": "get_weather", "arguments": {"city": "Paris"}}])


def test_phi4_and_deepseek3_tool_results_are_user_turns():
    assert '<|im_start|>user<|im_sep|>{"temp": 21}<|im_end|><|im_start|>assistant<|im_sep|>21 degrees.' in \
        get_template("phi4").render(TOOL_TURNS)
    assert '<｜User｜>{"temp": 21}<｜Assistant｜>21 degrees.' in get_template("deepseek3").render(TOOL_TURNS)


def test_mistral_tools():
    tok = load("family", "mistral")
    text = get_template("mistral").render(TOOL_TURNS, tools=[WEATHER], tokenizer=tok)
    assert text.startswith('<s>[INST] [AVAILABLE_TOOLS] [{"type": "function", "function": {"name": "get_weather"')
    assert '[/AVAILABLE_TOOLS]\n\nWeather?[/INST][TOOL_CALLS] [{"name": "get_weather", "arguments": {"city": "Paris"}}]' \
           '</s>[TOOL_RESULTS] {"content": {"temp": 21}}[/TOOL_RESULTS] 21 degrees.</s>' in text
    assert get_tool_format("mistral").extract('[TOOL_CALLS] [{"name": "f", "arguments": {"a": 1}}]') == (
        "", [{"name": "f", "arguments": {"a": 1}}])


def test_llama3_tool_prompt_and_bos():
    tok = load("family", "llama3")
    template = get_template("llama3")
    template.fix_tokenizer(tok)
    text = template.render(TOOL_TURNS, tools=[WEATHER], tokenizer=tok)
    assert text.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nCutting Knowledge Date: "
                           "December 2023\nToday Date: 26 Jul 2024\n\nYou have access to the following functions.")
    assert template.encode_multiturn(tok, SINGLE)[0][0][0] == tok.convert_tokens_to_ids("<|begin_of_text|>")
    plain = load("plain")
    plain.bos_token = None
    template.fix_tokenizer(plain)
    assert template.render(SINGLE, tokenizer=plain).startswith("<|start_header_id|>user"), "BOS from the tokenizer"


def test_deepseek3_keeps_the_tokenizers_specials():
    tok = load("family", "deepseek3")
    size, eos = len(tok), tok.eos_token
    template = get_template("deepseek3")
    assert template.fix_tokenizer(tok) == 0 and len(tok) == size and tok.eos_token == eos
    pairs = template.encode_multiturn(tok, SINGLE)
    assert pairs[0][0][0] == tok.bos_token_id and pairs[0][1][-1] == tok.eos_token_id


def test_glm4_tool_prompt_and_eos_label():
    assert "基于智谱 AI 公司训练的" in get_tool_format("glm4").format_tools([WEATHER])
    tok = load("family", "glm4")
    template = get_template("glm4")
    template.fix_tokenizer(tok)
    conversation = SINGLE + [{"role": "user", "content": "Bye"}, {"role": "assistant", "content": "Bye!"}]
    pairs = template.encode_multiturn(tok, conversation)
    assert _texts(tok, pairs) == [["[gMASK]<sop><|user|>\nHi<|assistant|>", "\nHello!"],
                                  ["<|user|>\nBye<|assistant|>", "\nBye!"]], "no EOS after a reply"
    ids, labels, _ = sft_row(pairs, TokenizeOptions(cutoff_len=1024), eos_id=tok.eos_token_id)
    second = len(pairs[0][0]) + len(pairs[0][1])
    assert labels[second] == tok.eos_token_id and ids[second] == tok.convert_tokens_to_ids("<|user|>")
    assert ids[-1] == labels[-1] == tok.eos_token_id and labels[second + 1] == IGNORE


def test_empty_tool_lists_open_an_empty_system_turn():
    assert get_template("chatml").render(SINGLE, tools="[]").startswith("<|im_start|>system\n<|im_end|>\n")
    assert get_template("glm4").render(SINGLE, tools="[]").startswith("[gMASK]<sop><|system|>\n<|user|>")
    assert get_template("chatml").render(SINGLE, tools=[]).startswith("<|im_start|>user"), "no tools: no turn"


def test_qwen3_reasoning():
    tok = load("special")
    template = get_template("qwen3")
    conversation = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "<think>\nt\n</think>\n\nA"},
                    {"role": "user", "content": "b"}, {"role": "assistant", "content": "B"},
                    {"role": "user", "content": "c"}, {"role": "assistant", "content": "C"}]
    texts = [reply for _, reply in _texts(tok, template.encode_multiturn(tok, conversation))]
    assert texts == ["<think>\nt\n</think>\n\nA<|im_end|>\n", "<think>\n\n</think>\n\nB<|im_end|>\n",
                     "<think>\n\n</think>\n\nC<|im_end|>\n"], "empty think on every reply, history thoughts kept"
    response = template.encode_multiturn(tok, conversation)[1][1]
    block = tok.encode("<think>\n\n</think>\n\n", add_special_tokens=False)
    assert response[:len(block)] == block, "the empty block is tokenized as one piece of text"
    off = get_template("qwen3", enable_thinking=False).encode_multiturn(tok, conversation)
    assert [tok.decode(p)[-len("<think>\n\n</think>\n\n"):] for p, _ in off] == ["<think>\n\n</think>\n\n"] * 3
    assert tok.decode(off[0][1]) == "A<|im_end|>\n", "thinking off removes thoughts and moves the block to prompts"
    tools = template.render(SINGLE, system="S", tools=[WEATHER])
    assert tools.startswith("<|im_start|>system\nS\n\n# Tools\n\nYou may call one or more functions")
    nothink = get_template("qwen3_nothink").render(SINGLE)
    assert "<think>" not in nothink


# ------------------------------------------------------------------------------------------------ gemma 4
DECLARATIONS = (
    f"declaration:get_weather{{description:{Q}Weather of a city{Q},parameters:{{properties:{{unit:{{description:"
    f"{Q}Unit{Q},type:{Q}STRING{Q}}},city:{{description:{Q}City{Q},type:{Q}STRING{Q}}}}},required:[{Q}city{Q}],"
    f"type:{Q}OBJECT{Q}}}}}\ndeclaration:ping{{description:{Q}{Q},parameters:{{type:{Q}OBJECT{Q}}}}}"
)
EMPTY = "<|channel>thought\n<channel|>"


@pytest.mark.parametrize("name", ["gemma4", "gemma4n"])
def test_gemma4_tool_conversation_exact(name):
    tok = load("family", name)
    template = get_template(name)
    template.fix_tokenizer(tok)
    pairs = template.encode_multiturn(tok, TOOL_TURNS, system="S", tools=[WEATHER, PING])
    assert _texts(tok, pairs) == [
        [f"<bos><|turn>system\n<|think|>S{DECLARATIONS}<turn|>\n<|turn>user\nWeather?<turn|>\n<|turn>model\n",
         f"{EMPTY}<|tool><|tool_call>call:get_weather{{city:{Q}Paris{Q}}}<tool_call|><tool|>"],
        ['<|turn>tool\n{"temp": 21}<turn|>\n<|turn>model\n', f"{EMPTY}21 degrees.<turn|>\n"],
    ]
    assert template.parse_reply(f"<|tool_call>call:get_weather{{city:{Q}Paris{Q}}}<tool_call|>") == (
        "", [{"name": "get_weather", "arguments": {"city": "Paris"}}])


@pytest.mark.parametrize("name", ["gemma4", "gemma4n"])
def test_gemma4_thoughts(name):
    tok = load("family", name)
    conversation = [{"role": "user", "content": "a"}, {"role": "assistant", "content": "A", "thinking": "t"},
                    {"role": "user", "content": "b"}, {"role": "assistant", "content": "B"}]
    on = get_template(name)
    on.fix_tokenizer(tok)
    assert _texts(tok, on.encode_multiturn(tok, conversation)) == [
        ["<bos><|turn>system\n<|think|>You are a helpful assistant.<turn|>\n<|turn>user\na<turn|>\n<|turn>model\n",
         "<|channel>thought\nt<channel|>A<turn|>\n"],
        ["<|turn>user\nb<turn|>\n<|turn>model\n", f"{EMPTY}B<turn|>\n"],
    ], "history thoughts kept; a reply without thought gets the empty one, trained"
    off = get_template(name, enable_thinking=False)
    assert _texts(tok, off.encode_multiturn(tok, conversation)) == [
        ["<bos><|turn>system\n<|think|>You are a helpful assistant.<turn|>\n<|turn>user\na<turn|>\n<|turn>model\n"
         f"{EMPTY}", "A<turn|>\n"],
        [f"<|turn>user\nb<turn|>\n<|turn>model\n{EMPTY}", "B<turn|>\n"],
    ], "thinking off: <|think|> stays, thoughts are removed, every prompt gets the empty thought"


@pytest.mark.parametrize("name", sorted(__import__("engine.templates", fromlist=["TEMPLATES"]).TEMPLATES))
def test_every_template_parses_its_own_calls_back(name):
    template = get_template(name)
    calls = [{"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2], "exact": True}}]
    written = get_tool_format(template.tool_format).format_calls(calls)
    if template.reasoning:
        written = template.add_thought(written)
    assert template.parse_reply(written + (template.stop_words[0] if template.stop_words else "")) == ("", calls)
    assert template.parse_reply("Just text.") == ("Just text.", [])


def test_openai_rows_with_parallel_tool_results_are_joined_like_llamafactory(tmp_path):
    from engine.data.convert_driver import convert_rows
    from engine.data.registry import DatasetSpec

    row = {"messages": [
        {"role": "user", "content": "Weather in Paris and Rome?"},
        {"role": "assistant", "content": "", "tool_calls": [
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}},
            {"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Rome"}}}]},
        {"role": "tool", "content": '{"temp": 21}'}, {"role": "tool", "content": '{"temp": 25}'},
        {"role": "assistant", "content": "21 and 25 degrees."}]}
    spec = DatasetSpec(name="t", path=tmp_path / "t.json", formatting="openai")
    example = convert_rows([row], spec, "sft")[0]
    assert [m["role"] for m in example["messages"]] == ["user", "function", "observation", "assistant"]
    assert example["messages"][2]["content"] == '{"temp": 21}\n</tool_response>\n<tool_response>\n{"temp": 25}'
    text = get_template("qwen").render(example["messages"])
    assert '<tool_response>\n{"temp": 21}\n</tool_response>\n<tool_response>\n{"temp": 25}\n</tool_response>' in text
