"""The interface shared by every tool format, and the normalisation of tool declarations and calls."""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from engine import json_text


class ToolFormat(ABC):
    """A tool format: subclasses implement ``declare``, ``write_calls`` and ``extract``.

    The public operations accept tools and calls in any accepted shape (JSON text, one dict or a list, OpenAI's
    ``{"type": "function", "function": {...}}`` wrapper) and normalise them first.
    """

    name = ""
    keeps_wrappers = False
    """Whether ``declare`` gets the tools as given (OpenAI's wrappers kept, an object not made a list), not the bare
    declarations."""

    def format_tools(self, tools: Any) -> str:
        """The text declaring ``tools`` (placed in the system prompt); "" when there are none."""
        declared = normalize_tools(tools)
        if declared and self.keeps_wrappers:  # as given: an object stays an object, as LLaMA-Factory dumps it
            return self.declare(loads(tools) if isinstance(tools, str) else tools)
        return self.declare(declared) if declared else ""

    def format_calls(self, calls: Any) -> str:
        """The text of an assistant turn making ``calls`` (arguments given as a JSON string are written as that string,
        as LLaMA-Factory writes them; formats that write each argument apart read the string's object)."""
        return self.write_calls(normalize_calls(calls, keep_string_arguments=True))

    def parse_calls(self, text: str) -> list[dict[str, Any]] | None:
        """The calls (``{"name", "arguments": dict}``) written in ``text``, or None when it holds none."""
        return self.extract(text)[1] or None

    @abstractmethod
    def declare(self, tools: list[dict[str, Any]]) -> str:
        """Declarations of normalised tools."""

    @abstractmethod
    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        """Text of normalised calls."""

    @abstractmethod
    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """The plain content of ``text`` and its calls; ``(text, [])`` when it holds no well-formed call."""


def loads(text: str) -> Any:
    """``json.loads``, where text nested too deeply for the decoder (a RecursionError) or holding a whole number past
    Python's digit limit (a plain ValueError) is a JSONDecodeError like any other text that is not JSON: tool calls
    are parsed from generated text and from data rows."""
    try:
        return json_text.loads(text)  # a number past the digit limit: already a JSONDecodeError naming it
    except RecursionError:
        raise json.JSONDecodeError("nested too deeply", text, 0) from None


def normalize_tools(tools: Any) -> list[dict[str, Any]]:
    """Bare function declarations from JSON text, one dict or a list (OpenAI's wrapper removed).

    Raises:
        ValueError: when the text is not JSON or an entry has no name.
    """
    if tools is None or tools == "" or tools == []:
        return []
    if isinstance(tools, str):
        try:
            tools = loads(tools)
        except json.JSONDecodeError as err:
            raise ValueError(f"the tools are not valid JSON ({err.msg} at column {err.colno})") from err
    if isinstance(tools, dict):
        tools = [tools]
    if not isinstance(tools, list):
        raise ValueError("tools must be a JSON list of function declarations")
    out = []
    for tool in tools:
        if isinstance(tool, dict) and isinstance(tool.get("function"), dict):
            tool = tool["function"]
        if not isinstance(tool, dict) or not tool.get("name"):
            raise ValueError(f"a tool declaration has no name: {json.dumps(tool, ensure_ascii=False)[:120]}")
        out.append(tool)
    return out


def arguments_object(arguments: Any, name: str) -> dict[str, Any]:
    """A call's arguments as a dict, given as one, as its JSON text (empty: no arguments) or as None.

    Raises:
        ValueError: naming tool call ``name``, for text that is not JSON or a value that is not an object.
    """
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments) if arguments.strip() else {}
        except json.JSONDecodeError as err:
            raise ValueError(f"the arguments of tool call {name!r} are not valid JSON") from err
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ValueError(f"the arguments of tool call {name!r} are not a JSON object")
    return arguments


def tag_value(raw: str, text: str | None = None) -> Any:
    """An argument read back from between tags: its JSON value where it parses, else ``text`` (default: as written)."""
    try:
        return loads(raw)
    except json.JSONDecodeError:
        return raw if text is None else text


def dumps(value: Any, **kwargs: Any) -> str:
    """JSON text as the tool formats write it (non-ASCII kept, as LLaMA-Factory writes it)."""
    return json.dumps(value, ensure_ascii=False, **kwargs)


def argument_text(value: Any) -> str:
    """An argument written inside tags: a string as it is, anything else as JSON."""
    return value if isinstance(value, str) else dumps(value)


def tagged_calls(calls: list[dict[str, Any]], head: Callable[[str], str], argument: Callable[[str, str], str],
                 tail: str) -> str:
    """Calls written one per block, each argument in tags of its own (the XML-style formats): ``head(name)``, then
    ``argument(key, text)`` per argument (:func:`argument_text`), then ``tail``; blocks joined by newlines."""
    texts = []
    for call in calls:
        pieces = [argument(key, argument_text(value))
                  for key, value in arguments_object(call["arguments"], call["name"]).items()]
        texts.append(head(call["name"]) + "".join(pieces) + tail)
    return "\n".join(texts)


def normalize_calls(calls: Any, keep_string_arguments: bool = False) -> list[dict[str, Any]]:
    """Tool calls as ``[{"name", "arguments": dict}]`` from JSON text, one call or a list.

    Accepts OpenAI's ``{"type": "function", "function": {"name", "arguments": "<json>"}}`` entries and
    ``parameters`` as a synonym of ``arguments``. With ``keep_string_arguments`` (training rows), arguments given as
    a JSON string stay that string, as LLaMA-Factory writes them (``json.dumps`` of the string: quoted, escaped).

    Raises:
        ValueError: when the calls cannot be read.
    """
    if isinstance(calls, str):
        try:
            calls = loads(calls)
        except json.JSONDecodeError as err:
            raise ValueError(f"a tool call is not valid JSON ({err.msg} at column {err.colno})") from err
    if isinstance(calls, dict):
        calls = [calls]
    if not isinstance(calls, list) or not calls:
        raise ValueError("a tool-call turn must hold a call object or a non-empty list of them")
    out = []
    for call in calls:
        if isinstance(call, str):
            try:
                call = loads(call)
            except json.JSONDecodeError as err:
                raise ValueError(f"a tool call is not valid JSON ({err.msg} at column {err.colno})") from err
        if isinstance(call, dict) and isinstance(call.get("function"), dict):
            call = call["function"]
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            raise ValueError("a tool call has no name")
        arguments = call.get("arguments", call.get("parameters", {}))
        if not (isinstance(arguments, str) and keep_string_arguments):
            arguments = arguments_object(arguments, call["name"])
        out.append({"name": call["name"], "arguments": arguments})
    return out


def null_parameter(tool: dict[str, Any], name: str, value: Any, tool_format: str) -> str:
    """Why a declaration whose parameter ``name`` is no object (a null one, as an openai file's tools of other
    parameters get from LLaMA-Factory's loader) cannot be written by a format that reads each parameter's fields."""
    return (f"tool {tool.get('name')!r} declares parameter {name!r} as {json.dumps(value)[:40]}, not an object, and the "
            f"{tool_format!r} tool format reads each parameter's type and description (LLaMA-Factory 0.9.5 fails on it "
            "too). In an `openai` file whose tools are JSON objects each tool gets every other tool's parameters as "
            "null (its loader gives the column one type); write the tools as JSON text, or use a tool_format that "
            "writes declarations as JSON (qwen)")
