"""How tool declarations enter the system prompt, how tool calls are written, and how they are parsed back.

Every format offers the same three operations:

- ``format_tools(tools)``: the text describing the tools (placed in the system prompt by the template);
- ``format_calls(calls)``: the text of an assistant turn that calls tools;
- ``parse_calls(text)``: the calls found in generated text, or None when it holds none.

``extract(text)`` returns both the remaining plain content and the calls. Tools may be given as JSON text or a
list, in either the bare ``{"name", "description", "parameters"}`` shape or OpenAI's
``{"type": "function", "function": {...}}`` shape. Calls are ``{"name": str, "arguments": dict}``.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from engine.templates.gemma4_tools import Gemma4ToolFormat
from engine.templates.tool_base import (
    ToolFormat,
    dumps,
    loads,
    normalize_calls,
    null_parameter,
    tag_value,
    tagged_calls,
)
from engine.templates.tool_formats_more import MORE_TOOL_FORMATS


def _raw_json_objects(text: str, start: int) -> tuple[list[Any], int]:
    """Consecutive JSON values from ``start`` (separated by whitespace); returns them and the end offset."""
    decoder = json.JSONDecoder()
    values: list[Any] = []
    pos = start
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text) or text[pos] not in "{[":
            return values, pos
        try:
            value, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):  # not JSON (a JSONDecodeError), or a number past the digit limit
            return values, pos
        values.append(value)


DEFAULT_TOOL_PROMPT = (
    "You have access to the following tools:\n{tool_text}"
    "Use the following format if using a tool:\n"
    "```\n"
    "Action: tool name (one of [{tool_names}])\n"
    "Action Input: the input to the tool, in a JSON format representing the kwargs "
    """(e.g. ```{{"input": "hello world", "num_beams": 5}}```)\n"""
    "```\n"
)
GLM4_TOOL_PROMPT = (
    "你是一个名为 ChatGLM 的人工智能助手。你是基于智谱 AI 公司训练的语言模型 GLM-4 模型开发的，"
    "你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具{tool_text}"
)
GLM4_MOE_TOOL_PROMPT = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tool_text}"
    "\n</tools>\n\nFor each function call, output the function name and arguments within the following XML format:"
    "\n<tool_call>{{function-name}}"
    "\n<arg_key>{{arg-key-1}}</arg_key>"
    "\n<arg_value>{{arg-value-1}}</arg_value>"
    "\n<arg_key>{{arg-key-2}}</arg_key>"
    "\n<arg_value>{{arg-value-2}}</arg_value>"
    "\n...\n</tool_call>\n"
)
LLAMA3_TOOL_PROMPT = (
    "Cutting Knowledge Date: December 2023\nToday Date: {date}\n\n"
    "You have access to the following functions. To call a function, please respond with JSON for a function call. "
    """Respond in the format {{"name": function name, "parameters": dictionary of argument name and its value}}. """
    "Do not use variables.\n\n{tool_text}"
)
QWEN_TOOL_PROMPT = (
    "\n\n# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tool_text}"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    """<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, """
    """"arguments": <args-json-object>}}\n</tool_call>"""
)
QWEN35_TOOL_PROMPT = (
    "\n\n# Tools\n\nYou have access to the following functions:\n\n<tools>{tool_text}"
    "\n</tools>\n\nIf you choose to call a function ONLY reply in the following format with NO suffix:\n\n"
    "<tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>\nvalue_1\n</parameter>\n"
    "<parameter=example_parameter_2>\nThis is the value for the second parameter\nthat can span\nmultiple lines\n"
    "</parameter>\n</function>\n</tool_call>\n\n<IMPORTANT>\nReminder:\n"
    "- Function calls MUST follow the specified format: "
    "an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags\n"
    "- Required parameters MUST be specified\n"
    "- You may provide optional reasoning for your function call in natural language "
    "BEFORE the function call, but NOT after\n"
    "- If there is no function call available, answer the question like normal with your current knowledge "
    "and do not tell the user about function calls\n</IMPORTANT>"
)


LING_TOOL_PROMPT = (
    "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
    "You are provided with function signatures within <tools></tools> XML tags:\n<tools>{tool_text}"
    "\n</tools>\n\nFor each function call, return a json object with function name and arguments within "
    """<tool_call></tool_call> XML tags:\n<tool_call>\n{{"name": <function-name>, """
    """"arguments": <args-json-object>}}\n</tool_call>"""
)


def today() -> str:
    """Today's date as Llama 3's tool prompt writes it (``26 Jul 2024``); tests replace this function."""
    return datetime.now().strftime("%d %b %Y")


def _wrapped(tool: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": tool}


class DefaultToolFormat(ToolFormat):
    """LLaMA-Factory's default: a ``> Tool Name:`` listing; calls as ``Action: NAME`` / ``Action Input: {json}``."""

    name = "default"
    _CALL = re.compile(r"Action:\s*([a-zA-Z0-9_]+)\s*Action Input:\s*(.+?)(?=\s*Action:|\s*$)", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        tool_text = ""
        for tool in tools:
            parameters = tool.get("parameters") or {}
            required = parameters.get("required") or []
            arg_text = ""
            for name, param in (parameters.get("properties") or {}).items():
                if not isinstance(param, dict):
                    raise ValueError(null_parameter(tool, name, param, self.name))
                enum = param.get("enum")
                items = param.get("items")
                arg_text += "  - {}({}{}): {}{}{}\n".format(
                    f"{name} ", param.get("type", ""), ", required" if name in required else "",
                    param.get("description", ""),
                    ", should be one of [{}]".format(", ".join(str(v) for v in enum)) if enum else "",
                    ", where each item should be {}".format(items.get("type", "")) if items else "",
                )
            tool_text += f"> Tool Name: {tool['name']}\nTool Description: {tool.get('description', '')}\n" \
                         f"Tool Args:\n{arg_text}\n"
        names = ", ".join(tool["name"] for tool in tools)
        return DEFAULT_TOOL_PROMPT.format(tool_text=tool_text, tool_names=names)

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(f"Action: {call['name']}\nAction Input: {dumps(call['arguments'])}" for call in calls)

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._CALL.finditer(text))
        if not matches:
            return text, []
        calls = []
        for match in matches:
            raw = match.group(2).strip().strip('"').strip("`")
            if raw.startswith("json"):  # a fenced ```json block
                raw = raw[len("json"):]
            try:
                arguments = loads(raw)
            except json.JSONDecodeError:
                return text, []
            if not isinstance(arguments, dict):
                return text, []
            calls.append({"name": match.group(1).strip(), "arguments": arguments})
        return text[:matches[0].start()].strip(), calls


class QwenToolFormat(ToolFormat):
    """Qwen 2.5 / 3: ``<tools>`` JSON lines in the system prompt; calls in ``<tool_call>`` JSON blocks."""

    name = "qwen"
    _CALL = re.compile(r"<tool_call>(.+?)</tool_call>(?=\s*<tool_call>|\s*$)", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return QWEN_TOOL_PROMPT.format(tool_text="".join("\n" + dumps(_wrapped(tool)) for tool in tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(
            f'<tool_call>\n{dumps({"name": call["name"], "arguments": call["arguments"]})}\n</tool_call>'
            for call in calls
        )

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._CALL.finditer(text))
        if not matches:
            return text, []
        calls = []
        for match in matches:
            try:
                value = loads(match.group(1).strip())
            except json.JSONDecodeError:
                return text, []
            if not isinstance(value, dict) or "name" not in value or "arguments" not in value:
                return text, []
            try:
                calls.extend(normalize_calls(value))
            except ValueError:
                return text, []
        return text[:matches[0].start()].strip(), calls


class GLM4ToolFormat(ToolFormat):
    """GLM-4: tools listed under ``# 可用工具`` in the system prompt; a call is ``NAME`` then its JSON arguments.

    GLM-4 itself makes one call per turn; several calls are written one after the other (an extension).
    """

    name = "glm4"
    _NAME = re.compile(r"\s*([^\s{}\[\]\"]+)\n")

    def declare(self, tools: list[dict[str, Any]]) -> str:
        tool_text = "".join(
            f"\n\n## {tool['name']}\n\n{dumps(tool, indent=4)}\n在调用上述函数时，请使用 Json 格式表示调用的参数。"
            for tool in tools
        )
        return GLM4_TOOL_PROMPT.format(tool_text=tool_text)

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(f"{call['name']}\n{dumps(call['arguments'])}" for call in calls)

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        calls = []
        pos = 0
        decoder = json.JSONDecoder()
        while text[pos:].strip():
            match = self._NAME.match(text, pos)
            if not match:
                return text, []
            start = match.end()
            while start < len(text) and text[start].isspace():
                start += 1
            try:
                arguments, pos = decoder.raw_decode(text, start)
            except (ValueError, RecursionError):  # not JSON, or a number past the digit limit
                return text, []
            if not isinstance(arguments, dict):
                return text, []
            calls.append({"name": match.group(1), "arguments": arguments})
        return ("", calls) if calls else (text, [])


class GLM4MoeToolFormat(ToolFormat):
    """GLM-4.5 / 4.6: ``<tools>`` JSON lines; a call is ``<tool_call>NAME`` then ``<arg_key>``/``<arg_value>`` pairs."""

    name = "glm4_moe"
    _CALL = re.compile(r"<tool_call>([^\n<]+)(.*?)(?=\n<tool_call>|</tool_call>|$)", re.DOTALL)
    _ARG = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return GLM4_MOE_TOOL_PROMPT.format(tool_text="".join("\n" + dumps(_wrapped(tool)) for tool in tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return tagged_calls(calls, lambda name: "\n<tool_call>" + name,
                            lambda key, text: f"\n<arg_key>{key}</arg_key>\n<arg_value>{text}</arg_value>", "")

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._CALL.finditer(text))
        if not matches:
            return text, []
        calls = []
        for match in matches:
            arguments: dict[str, Any] = {}
            for key, raw in self._ARG.findall(match.group(2)):
                arguments[key] = tag_value(raw)
            calls.append({"name": match.group(1).strip(), "arguments": arguments})
        return text[:matches[0].start()].strip(), calls


class Llama3ToolFormat(ToolFormat):
    """Llama 3.1+: a dated prompt with the tool schemas as JSON; a call is ``{"name", "parameters"}`` JSON."""

    name = "llama3"

    def declare(self, tools: list[dict[str, Any]]) -> str:
        tool_text = "".join(dumps(_wrapped(tool), indent=4) + "\n\n" for tool in tools)
        return LLAMA3_TOOL_PROMPT.format(date=today(), tool_text=tool_text)

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        objects = [{"name": call["name"], "parameters": call["arguments"]} for call in calls]
        return dumps(objects[0] if len(objects) == 1 else objects)

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        start = min((i for i in (text.find('{"name"'), text.find('[{"name"')) if i >= 0), default=-1)
        if start < 0:
            return text, []
        values, end = _raw_json_objects(text, start)
        if not values or text[end:].strip():
            return text, []
        values = [v for value in values for v in (value if isinstance(value, list) else [value])]
        if not all(isinstance(v, dict) and "name" in v and ("parameters" in v or "arguments" in v) for v in values):
            return text, []
        try:
            calls = normalize_calls(values)
        except ValueError:
            return text, []
        return text[:start].strip(), calls


class MistralToolFormat(ToolFormat):
    """Mistral v0.3: ``[AVAILABLE_TOOLS] [...][/AVAILABLE_TOOLS]``; calls as a JSON list (after ``[TOOL_CALLS]``)."""

    name = "mistral"

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return "[AVAILABLE_TOOLS] " + dumps([_wrapped(tool) for tool in tools]) + "[/AVAILABLE_TOOLS]"

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return dumps([{"name": call["name"], "arguments": call["arguments"]} for call in calls])

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        body = text.strip()
        prose = ""
        if "[TOOL_CALLS]" in body:
            prose, body = (part.strip() for part in body.split("[TOOL_CALLS]", 1))
        try:
            value = loads(body)
        except json.JSONDecodeError:
            return text, []
        values = value if isinstance(value, list) else [value]
        if not values or not all(isinstance(v, dict) and "name" in v and "arguments" in v for v in values):
            return text, []
        try:
            return prose, normalize_calls(values)
        except ValueError:
            return text, []


class Qwen35ToolFormat(ToolFormat):
    """Qwen 3.5: bare JSON schemas in ``<tools>``; a call is ``<function=NAME>`` with one ``<parameter=KEY>`` block per
    argument inside ``<tool_call>``."""

    name = "qwen3_5"
    _CALL = re.compile(r"<tool_call>\s*<function=\s*([^\s<>]+)\s*(.*?)\s*</function>\s*</tool_call>", re.DOTALL)
    _PARAM = re.compile(r"<parameter=(.*?)>(.*?)</parameter>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return QWEN35_TOOL_PROMPT.format(tool_text="".join("\n" + dumps(tool) for tool in tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return tagged_calls(calls, lambda name: f"<tool_call>\n<function={name}>",
                            lambda key, text: f"\n<parameter={key}>\n{text}\n</parameter>", "\n</function>\n</tool_call>")

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._CALL.finditer(text))
        if not matches:
            return text, []
        calls = []
        for match in matches:
            arguments: dict[str, Any] = {}
            for key, raw in self._PARAM.findall(match.group(2).strip()):
                arguments[key] = tag_value(raw, raw.strip())
            calls.append({"name": match.group(1).strip(), "arguments": arguments})
        return text[:matches[0].start()].strip(), calls


class LingToolFormat(QwenToolFormat):
    """Ling v2 (Bailing): Qwen's calls; its declarations end with 'detailed thinking off'."""

    name = "ling"

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return LING_TOOL_PROMPT.format(tool_text="".join("\n" + dumps(_wrapped(tool)) for tool in tools)) + \
            "\ndetailed thinking off"


TOOL_FORMATS: dict[str, ToolFormat] = {
    "default": DefaultToolFormat(),
    "qwen": QwenToolFormat(),
    "glm4": GLM4ToolFormat(),
    "llama3": Llama3ToolFormat(),
    "mistral": MistralToolFormat(),
    "glm4_moe": GLM4MoeToolFormat(),
    "qwen3_5": Qwen35ToolFormat(),
    "gemma4": Gemma4ToolFormat(),
    "ling": LingToolFormat(),
    **{fmt.name: fmt for fmt in MORE_TOOL_FORMATS},
}


def get_tool_format(name: str) -> ToolFormat:
    """The tool format called ``name``.

    Raises:
        ValueError: for an unknown name, listing the valid ones.
    """
    try:
        return TOOL_FORMATS[name]
    except KeyError:
        raise ValueError(f"Unknown tool_format {name!r}; choose one of: {', '.join(TOOL_FORMATS)}.") from None


def format_tools(name: str, tools: Any) -> str:
    """Tool declarations (JSON text or list) rendered in format ``name``; "" when there are none."""
    return get_tool_format(name).format_tools(tools)


def format_calls(name: str, calls: Any) -> str:
    """Tool calls (JSON text, one dict or a list) rendered in format ``name``."""
    return get_tool_format(name).format_calls(calls)


def parse_calls(name: str, text: str) -> list[dict[str, Any]] | None:
    """The tool calls found in ``text`` by format ``name``, or None when it holds none."""
    return get_tool_format(name).parse_calls(text)
