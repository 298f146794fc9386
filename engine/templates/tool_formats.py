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
from typing import Any

from engine.templates.gemma4_tools import Gemma4ToolFormat
from engine.templates.tool_base import ToolFormat, normalize_calls


def _dumps(value: Any, **kwargs: Any) -> str:
    return json.dumps(value, ensure_ascii=False, **kwargs)


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
        except json.JSONDecodeError:
            return values, pos
        values.append(value)


class DefaultToolFormat(ToolFormat):
    """A readable JSON listing of the tools; calls as ``Action: NAME`` / ``Action Input: {json}`` lines."""

    name = "default"
    _CALL = re.compile(r"Action:\s*(?P<name>[^\n]+?)\s*\nAction Input:\s*", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        names = ", ".join(tool["name"] for tool in tools)
        return (
            "You have access to the following tools:\n"
            f"{_dumps(tools, indent=2)}\n\n"
            "To use a tool, reply with one block per call in exactly this format:\n"
            f"Action: the tool name (one of [{names}])\n"
            "Action Input: the arguments as a JSON object"
        )

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(f"Action: {call['name']}\nAction Input: {_dumps(call['arguments'])}" for call in calls)

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        calls: list[dict[str, Any]] = []
        first = None
        pos = 0
        decoder = json.JSONDecoder()
        while True:
            match = self._CALL.search(text, pos)
            if not match:
                break
            body = match.end()
            if text.startswith("```", body):
                body = text.find("\n", body) + 1 if "\n" in text[body:] else body + 3
            try:
                arguments, end = decoder.raw_decode(text, body)
            except json.JSONDecodeError:
                break
            if not isinstance(arguments, dict):
                break
            first = match.start() if first is None else first
            calls.append({"name": match.group("name").strip(), "arguments": arguments})
            pos = end
        if not calls:
            return text, []
        return text[:first].strip(), calls


class QwenToolFormat(ToolFormat):
    """Qwen 2.5 / 3: ``<tools>`` JSON lines in the system prompt; calls in ``<tool_call>`` JSON blocks."""

    name = "qwen"
    _CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        lines = "\n".join(_dumps({"type": "function", "function": tool}) for tool in tools)
        return (
            "# Tools\n\nYou may call one or more functions to assist with the user query.\n\n"
            "You are provided with function signatures within <tools></tools> XML tags:\n"
            f"<tools>\n{lines}\n</tools>\n\n"
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:\n"
            '<tool_call>\n{"name": <function-name>, "arguments": <args-json-object>}\n</tool_call>'
        )

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(
            f'<tool_call>\n{{"name": {_dumps(call["name"])}, "arguments": {_dumps(call["arguments"])}}}\n</tool_call>'
            for call in calls
        )

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        calls = []
        for match in self._CALL.finditer(text):
            try:
                calls.extend(normalize_calls(match.group(1)))
            except ValueError:
                return text, []
        if not calls:
            return text, []
        return self._CALL.sub("", text).strip(), calls


class GLM4ToolFormat(ToolFormat):
    """GLM-4: tools listed under ``# 可用工具`` in the system prompt; a call is ``NAME`` then a JSON line."""

    name = "glm4"
    _NAME = re.compile(r"\s*([A-Za-z_][\w.\-]*)\n")

    def declare(self, tools: list[dict[str, Any]]) -> str:
        parts = [
            "你是一个名为 ChatGLM 的人工智能助手。你是基于智谱AI训练的语言模型 GLM-4 模型开发的，"
            "你的任务是针对用户的问题和要求提供适当的答复和支持。\n\n# 可用工具"
        ]
        for tool in tools:
            parts.append(
                f"\n\n## {tool['name']}\n\n{_dumps(tool, indent=4)}\n在调用上述函数时，请使用 Json 格式表示调用的参数。"
            )
        return "".join(parts)

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(f"{call['name']}\n{_dumps(call['arguments'])}" for call in calls)

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
            except json.JSONDecodeError:
                return text, []
            if not isinstance(arguments, dict):
                return text, []
            calls.append({"name": match.group(1), "arguments": arguments})
        return ("", calls) if calls else (text, [])


class Llama3ToolFormat(ToolFormat):
    """Llama 3.1+: tool schemas as JSON in the system prompt; a call is ``{"name", "parameters"}`` JSON."""

    name = "llama3"

    def declare(self, tools: list[dict[str, Any]]) -> str:
        schemas = "\n\n".join(_dumps({"type": "function", "function": tool}, indent=4) for tool in tools)
        return (
            "You have access to the following functions. To call a function, please respond with JSON for a "
            'function call. Respond in the format {"name": function name, "parameters": dictionary of argument '
            "name and its value}. Do not use variables.\n\n" + schemas
        )

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "\n".join(_dumps({"name": call["name"], "parameters": call["arguments"]}) for call in calls)

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        start = text.find('{"name"')
        if start < 0:
            return text, []
        values, end = _raw_json_objects(text, start)
        if not values or text[end:].strip():
            return text, []
        try:
            calls = normalize_calls(values if len(values) > 1 else values[0])
        except ValueError:
            return text, []
        return text[:start].strip(), calls


TOOL_FORMATS: dict[str, ToolFormat] = {
    "default": DefaultToolFormat(),
    "qwen": QwenToolFormat(),
    "glm4": GLM4ToolFormat(),
    "llama3": Llama3ToolFormat(),
    "gemma4": Gemma4ToolFormat(),
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
