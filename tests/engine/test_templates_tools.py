"""Tool formats: declarations, call round trips (format then parse), Gemma 4's value notation, plain text."""

from __future__ import annotations

import json

import pytest

from engine.templates import (
    TOOL_FORMATS,
    format_calls,
    format_tools,
    get_tool_format,
    normalize_calls,
    normalize_tools,
    parse_calls,
)
from engine.templates.gemma4_tools import GemmaSyntaxError, from_gemma_value, to_gemma_value

NESTED_CALLS = [
    {"name": "plan_trip", "arguments": {
        "city": "Paris, \"la ville\" {lumière}", "days": 3, "budget": 1250.5, "flexible": True, "pets": False,
        "notes": None, "stops": ["Louvre", "Orsay", {"name": "Café", "open": [8, 22]}],
        "traveller": {"name": "Zoé", "age": 31, "prefs": {"window": True, "meal": None}}, "empty": {}, "none": [],
    }},
    {"name": "ping", "arguments": {}},
]
WEATHER = {"name": "get_weather", "description": "Weather of a city",
           "parameters": {"type": "object", "properties": {"city": {"type": "string", "description": "City"}},
                          "required": ["city"]}}


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_round_trip(name):
    text = format_calls(name, NESTED_CALLS)
    assert parse_calls(name, text) == NESTED_CALLS
    content, calls = get_tool_format(name).extract(text)
    assert calls == NESTED_CALLS and content == ""


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_formatter_objects_accept_json_text(name):
    formatter = TOOL_FORMATS[name]
    assert formatter.format_tools(json.dumps([WEATHER])) == formatter.format_tools([WEATHER])
    text = formatter.format_calls(json.dumps(NESTED_CALLS[0]))
    assert formatter.parse_calls(text) == NESTED_CALLS[:1]
    assert formatter.parse_calls("no calls here") is None


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_single_call_round_trip(name):
    call = [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert parse_calls(name, format_calls(name, call)) == call


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
@pytest.mark.parametrize("text", [
    "Just a plain answer.",
    "Here is some JSON: {\"a\": 1}",
    "Name\nnot json at all",
    "call:f{a:1} without markers",
    "",
])
def test_plain_text_is_left_alone(name, text):
    assert parse_calls(name, text) is None
    assert get_tool_format(name).extract(text) == (text, [])


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_format_tools_mentions_every_tool(name):
    text = format_tools(name, [WEATHER, {"type": "function", "function": {"name": "ping", "description": "Ping"}}])
    assert "get_weather" in text and "ping" in text
    assert format_tools(name, "") == ""


def test_prose_before_calls_is_kept():
    assert get_tool_format("qwen").extract(
        'Let me look.\n<tool_call>\n{"name": "f", "arguments": {"x": [1, 2]}}\n</tool_call>'
    ) == ("Let me look.", [{"name": "f", "arguments": {"x": [1, 2]}}])
    assert get_tool_format("default").extract('I will search.\nAction: search\nAction Input: {"q": "cats"}') == (
        "I will search.", [{"name": "search", "arguments": {"q": "cats"}}])
    assert get_tool_format("gemma4").extract("Sure.<|tool_call>call:f{a:1}<tool_call|>") == (
        "Sure.", [{"name": "f", "arguments": {"a": 1}}])


def test_default_format_exact():
    assert format_calls("default", [{"name": "f", "arguments": {"a": 1}}]) == 'Action: f\nAction Input: {"a": 1}'
    assert parse_calls("default", "Action: f\nAction Input: ```json\n{\"a\": 1}\n```") == [
        {"name": "f", "arguments": {"a": 1}}]


def test_llama3_and_glm4_exact():
    call = [{"name": "f", "arguments": {"a": "é"}}]
    assert format_calls("llama3", call) == '{"name": "f", "parameters": {"a": "é"}}'
    assert format_calls("glm4", call) == 'f\n{"a": "é"}'
    assert parse_calls("llama3", '{"name": "f", "arguments": {"a": 2}}') == [{"name": "f", "arguments": {"a": 2}}]


# ------------------------------------------------------------------------------------------------ gemma 4
def test_gemma4_declaration_exact():
    assert format_tools("gemma4", [WEATHER]) == (
        'declaration:get_weather{description:<|"|>Weather of a city<|"|>,parameters:{properties:{city:'
        '{description:<|"|>City<|"|>,type:<|"|>STRING<|"|>}},required:[<|"|>city<|"|>],type:<|"|>OBJECT<|"|>}}'
    )
    two = format_tools("gemma4", [WEATHER, {"name": "ping", "description": "Ping", "response": {"type": "string"}}])
    assert two.split("\n")[1] == 'declaration:ping{description:<|"|>Ping<|"|>,response:{}}', "type only for OBJECT"


def test_gemma4_call_exact_sorted_keys():
    text = format_calls("gemma4", [{"name": "f", "arguments": {"z": None, "b": [True, 1.5, "x"], "a": {"y": 1,
                                                                                                        "c": False}}}])
    assert text == '<|tool_call>call:f{a:{c:false,y:1},b:[true,1.5,<|"|>x<|"|>],z:null}<tool_call|>'


def test_gemma4_parse_hand_written():
    text = ('<|tool_call>call:tools.shell-exec{cmd:<|"|>echo {a, b}: [c]<|"|>, env:{HOME:<|"|>/root<|"|>},'
            'limit:-2, ratio:1e3, dry_run:true, json:"quoted"}<tool_call|>')
    assert parse_calls("gemma4", text) == [{"name": "tools.shell-exec", "arguments": {
        "cmd": "echo {a, b}: [c]", "env": {"HOME": "/root"}, "limit": -2, "ratio": 1000.0, "dry_run": True,
        "json": "quoted"}}]


@pytest.mark.parametrize("text", [
    "<|tool_call>call:f{a:<|\"|>unterminated}<tool_call|>",
    "<|tool_call>f{a:1}<tool_call|>",
    "<|tool_call>call:f{a:1}",
    "<|tool_call>call:f{a 1}<tool_call|>",
])
def test_gemma4_malformed_calls_are_not_calls(text):
    assert parse_calls("gemma4", text) is None


def test_gemma4_value_codec():
    value = {"s": "a,b:c", "n": [1, -2.5, None, False], "o": {"k": "v"}}
    assert from_gemma_value(to_gemma_value(value)) == value
    with pytest.raises(GemmaSyntaxError):
        from_gemma_value("{a:1} trailing")


def test_normalizers():
    assert normalize_tools('[{"type": "function", "function": {"name": "a"}}]') == [{"name": "a"}]
    assert normalize_calls('{"name": "a", "arguments": "{\\"x\\": 1}"}') == [{"name": "a", "arguments": {"x": 1}}]
    assert normalize_calls(['{"name": "a", "parameters": {"x": 1}}']) == [{"name": "a", "arguments": {"x": 1}}]
    with pytest.raises(ValueError, match="no name"):
        normalize_tools([{"description": "nameless"}])
    with pytest.raises(ValueError, match="not valid JSON"):
        normalize_calls("{oops")
    with pytest.raises(ValueError, match="unknown|Unknown"):
        get_tool_format("nope")


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_text_nested_too_deeply_is_no_call_not_a_crash(name):
    """Generated text (or a data row) with values nested past the JSON decoder's recursion limit holds no call; it
    used to raise RecursionError out of the parser (a chat or API reply would fail)."""
    from engine.templates.tool_base import normalize_calls

    deep = "[" * 100_000
    fmt = TOOL_FORMATS[name]
    for text in (f"<tool_call>{deep}</tool_call>", f"Action: f\nAction Input: {deep}", f"[TOOL_CALLS]{deep}",
                 '{"name": "f", "parameters": ' + deep, f"<tool_calls>\n{deep}\n</tool_calls>", f"f\n{deep}",
                 f'<invoke name="f"><parameter name="a">{deep}</parameter></invoke>',
                 f"<|tool_call_start|>[f(a={deep})]<|tool_call_end|>", f"<|tool_call>call:f{{a:{deep}}}<tool_call|>"):
        content, calls = fmt.extract(text)
        assert all(isinstance(call["name"], str) for call in calls)
    with pytest.raises(ValueError, match="nested too deeply"):
        normalize_calls(deep)


@pytest.mark.parametrize("name", sorted(TOOL_FORMATS))
def test_text_with_a_number_past_pythons_digit_limit_is_no_call_not_a_crash(name):
    """A whole number of more than 4,300 digits in generated text (or a data row) is a value Python's json cannot
    read (a plain ValueError, not a JSONDecodeError): it raised out of the parser, so a chat or API reply failed
    after its generation; now such text holds no call, as other text that is not JSON."""
    from engine.templates.tool_base import normalize_calls

    big = "7" * 5000
    fmt = TOOL_FORMATS[name]
    for text in (f'<tool_call>\n{{"name": "f", "arguments": {{"a": {big}}}}}\n</tool_call>',
                 f'Action: f\nAction Input: {{"a": {big}}}', f'[TOOL_CALLS] [{{"name": "f", "arguments": {{"a": {big}}}}}]',
                 f'{{"name": "f", "parameters": {{"a": {big}}}}}', f'<tool_calls>\n{{"name": "f", "arguments": {big}}}\n</tool_calls>',
                 f'f\n{{"a": {big}}}', f'<invoke name="f"><parameter name="a">{big}</parameter></invoke>',
                 f"<|tool_call_start|>[f(a={big})]<|tool_call_end|>", f"<|tool_call>call:f{{a:{big}}}<tool_call|>"):
        content, calls = fmt.extract(text)
        assert all(isinstance(call["name"], str) for call in calls)
    with pytest.raises(ValueError, match="digits"):
        normalize_calls('{"name": "f", "arguments": {"a": ' + big + "}}")


def test_api_tool_call_arguments_nested_too_deeply_are_a_request_error():
    from engine.infer.openai_format import RequestError, convert_messages

    call = {"type": "function", "function": {"name": "f", "arguments": "[" * 100_000}}
    with pytest.raises(RequestError, match="must be JSON text"):
        convert_messages([{"role": "user", "content": "hi"}, {"role": "assistant", "content": None, "tool_calls": [call]}])


def test_llamafactory_details_the_golden_cases_leave_out():
    """Facts read off LLaMA-Factory 0.9.5 for shapes its golden conversations do not have."""
    from engine.templates import get_template

    # LFM2 writes prose before calls with its own call markers around them
    content = 'I will call.<|tool_call_start|>[{"name": "f", "arguments": {"a": 1}}]<|tool_call_end|>'
    segments = get_template("lfm2").segments([{"role": "user", "content": "hi"}, {"role": "function", "content": content}])
    assert segments[1][0] == "I will call.<|tool_call_start|>[f(a=1)]<|tool_call_end|><|im_end|>\n"
    # Seed-OSS dumps the tools as given: one object stays an object (its OpenAI wrapper kept)
    tools = json.dumps({"type": "function", "function": {"name": "f", "parameters": {}}})
    assert '\n{"type": "function", "function": {"name": "f", "parameters": {}}}\n工具调用' in \
        get_template("seed_oss").system_text(None, tools)
    # MiniMax-M1 skips a line of its call block that is not a call
    text = '<tool_calls>\n{"name": "f", "arguments": {"a": 1}}\nnot json\n</tool_calls>'
    assert TOOL_FORMATS["minimax1"].extract(text) == ("", [{"name": "f", "arguments": {"a": 1}}])


def test_a_tools_column_given_as_a_list_is_kept_as_given():
    """A dataset's tools column stored as a JSON list keeps OpenAI's wrappers, as LLaMA-Factory writes it (Seed-OSS
    and Phi-4-mini write the tools as given)."""
    from engine.data.converters import _tools

    wrapped = [{"type": "function", "function": {"name": "f", "parameters": {}}}]
    assert json.loads(_tools({"tools": wrapped}, "tools")) == wrapped


def test_lfm2_reads_a_string_holding_a_key_like_text():
    """LLaMA-Factory writes LFM2 strings in quotes unescaped; a value holding ", b=1" stays one value."""
    text = '<|tool_call_start|>[f(a="x, b=1", c=2), g(city="Paris, \\"la\\" x")]<|tool_call_end|>'
    assert TOOL_FORMATS["lfm2"].extract(text)[1][0] == {"name": "f", "arguments": {"a": "x, b=1", "c": 2}}
    written = TOOL_FORMATS["lfm2"].format_calls([{"name": "f", "arguments": {"q": 'a, b="c"', "n": 1}}])
    assert TOOL_FORMATS["lfm2"].extract(written)[1] == [{"name": "f", "arguments": {"q": 'a, b="c"', "n": 1}}]


@pytest.mark.parametrize("tool_format", ["default", "gemma4"])
def test_a_null_parameter_is_refused_by_formats_that_read_its_fields(tool_format):
    """An openai file's tools given as objects reach the template with every other tool's parameters as null (as
    LLaMA-Factory's loader types them); the formats that describe each parameter name it (it was an AttributeError
    traceback), the formats that write declarations as JSON keep the null as LLaMA-Factory does."""
    tool = {**WEATHER, "parameters": {**WEATHER["parameters"],
                                      "properties": {**WEATHER["parameters"]["properties"], "days": None}}}
    with pytest.raises(ValueError, match="tool 'get_weather' declares parameter 'days' as null, not an object.*"
                                         "write the tools as JSON text"):
        format_tools(tool_format, [tool])
    assert '"days": null' in format_tools("qwen", [tool])
