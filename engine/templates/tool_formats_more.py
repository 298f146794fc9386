"""Tool formats of the later LLaMA-Factory 0.9.5 families: MiniMax-M1 and M2, Seed-OSS and LFM2
(Ling v2, a variant of Qwen's, lives beside it in ``tool_formats``).

Registered in :data:`engine.templates.tool_formats.TOOL_FORMATS`; the declarations and call texts are
LLaMA-Factory's (tests/engine/test_templates_lf.py compares them with its own output). The parsers also read what
those models write around the calls (MiniMax-M2's ``<minimax:tool_call>`` wrapper, for one, which LLaMA-Factory's
training text leaves out), so a trained model's calls come back as calls.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from engine.templates.tool_base import (
    ToolFormat,
    arguments_object,
    dumps,
    loads,
    normalize_calls,
    tag_value,
    tagged_calls,
)

MINIMAX_M1_TOOL_PROMPT = (
    "You are provided with these tools:\n<tools>\n{tool_text}</tools>\n\n"
    "If you need to call tools, please respond with <tool_calls></tool_calls> XML tags, and provide tool-name and "
    "json-object of arguments, following the format below:\n<tool_calls>\n"
    """{{"name": <tool-name-1>, "arguments": <args-json-object-1>}}\n...\n</tool_calls>"""
)
MINIMAX_M2_TOOL_PROMPT = (
    "\n\n# Tools\n\nYou may call one or more tools to assist with the user query.\n"
    "Here are the tools available in JSONSchema format:\n\n<tools>\n{tool_text}</tools>\n\n"
    "When making tool calls, use XML format to invoke tools and pass parameters:\n"
    """\n<minimax:tool_call>\n<invoke name="tool-name-1">\n<parameter name="param-key-1">param-value-1</parameter>\n"""
    """<parameter name="param-key-2">param-value-2</parameter>\n...\n</invoke>\n</minimax:tool_call>"""
)
SEED_TOOL_PROMPT = (
    "system\nYou are Doubao, a helpful AI assistant. You may call one or more functions to assist with the user query."
    "Tool List:\nYou are authorized to use the following tools (described in JSON Schema format). Before performing "
    "any task, you must decide how to call them based on the descriptions and parameters of these tools.{tool_text}\n"
    "工具调用请遵循如下格式:\n<seed:tool_call>\n<function=example_function_name>\n<parameter=example_parameter_1>value_1"
    "</parameter>\n<parameter=example_parameter_2>This is the value for the second parameter\nthat can span\nmultiple "
    "lines</parameter>\n</function>\n</seed:tool_call>\n"
)
LFM2_TOOL_PROMPT = "List of tools: <|tool_list_start|>{tool_text}<|tool_list_end|>"



class MiniMaxM1ToolFormat(ToolFormat):
    """MiniMax-M1: one JSON schema per line in ``<tools>``; calls as JSON lines inside ``<tool_calls>``."""

    name = "minimax1"
    _BLOCK = re.compile(r"<tool_calls>\s*(.+?)\s*</tool_calls>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return MINIMAX_M1_TOOL_PROMPT.format(tool_text="".join(dumps(tool) + "\n" for tool in tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        lines = [dumps({"name": call["name"], "arguments": call["arguments"]}) for call in calls]
        return "<tool_calls>\n" + "\n".join(lines) + "\n</tool_calls>"

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        match = self._BLOCK.search(text)
        if not match:
            return text, []
        calls = []
        for line in match.group(1).split("\n"):
            if not line.strip():
                continue
            try:
                calls.extend(normalize_calls(line.strip()))
            except ValueError:
                continue  # a line that is not a call is skipped, as LLaMA-Factory skips it
        return (text[:match.start()].strip(), calls) if calls else (text, [])


class MiniMaxM2ToolFormat(ToolFormat):
    """MiniMax-M2: ``<tool>`` JSON schemas; a call is ``<invoke name=...>`` with one ``<parameter name=...>`` per
    argument (the model wraps its calls in ``<minimax:tool_call>``; LLaMA-Factory's training text does not)."""

    name = "minimax2"
    _INVOKE = re.compile(r"<invoke name=\"(.*?)\">(.*?)</invoke>", re.DOTALL)
    _PARAM = re.compile(r"<parameter name=\"(.*?)\">(.*?)</parameter>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return MINIMAX_M2_TOOL_PROMPT.format(tool_text="".join(f"<tool>{dumps(tool)}</tool>\n" for tool in tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return tagged_calls(calls, lambda name: f'<invoke name="{name}">',
                            lambda key, text: f'\n<parameter name="{key}">{text}</parameter>', "\n</invoke>")

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._INVOKE.finditer(text))
        if not matches:
            return text, []
        calls = [{"name": name.strip(), "arguments": {key: tag_value(raw) for key, raw in self._PARAM.findall(body)}}
                 for name, body in (match.groups() for match in matches)]
        start = matches[0].start()
        wrapper = text.rfind("<minimax:tool_call>", 0, start)
        if wrapper >= 0 and not text[wrapper + len("<minimax:tool_call>"):start].strip():
            start = wrapper
        return text[:start].strip(), calls


class SeedToolFormat(ToolFormat):
    """Seed-OSS: the tool list as one JSON array (OpenAI wrappers kept, as given); a call is ``<function=NAME>``
    with ``<parameter=KEY>`` blocks inside ``<seed:tool_call>``."""

    name = "seed_oss"
    keeps_wrappers = True
    _CALL = re.compile(r"<seed:tool_call>\s*<function=\s*([^\s<]+)\s*(.*?)\s*</function>\s*</seed:tool_call>",
                       re.DOTALL)
    _PARAM = re.compile(r"<parameter=(.*?)>(.*?)</parameter>", re.DOTALL)

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return SEED_TOOL_PROMPT.format(tool_text="\n" + dumps(tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return tagged_calls(calls, lambda name: "\n<seed:tool_call>\n<function=" + name,
                            lambda key, text: f"\n<parameter={key}>{text}</parameter>", "\n</function>\n</seed:tool_call>")

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        matches = list(self._CALL.finditer(text))
        if not matches:
            return text, []
        calls = [{"name": match.group(1).strip(),
                  "arguments": {key: tag_value(raw) for key, raw in self._PARAM.findall(match.group(2).strip())}}
                 for match in matches]
        return text[:matches[0].start()].strip(), calls


class LFM2ToolFormat(ToolFormat):
    """LFM2 / LFM2.5: the tool list as one JSON array; calls in Python syntax, ``[name(key="value", n=1)]``, between
    ``<|tool_call_start|>`` and ``<|tool_call_end|>``."""

    name = "lfm2"
    _START, _END = "<|tool_call_start|>", "<|tool_call_end|>"
    _JSON_NAMES = {"true": True, "false": False, "null": None}

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return LFM2_TOOL_PROMPT.format(tool_text=dumps(tools))

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        texts = []
        for call in calls:
            parts = [f'{key}="{value}"' if isinstance(value, str) else f"{key}={dumps(value)}"
                     for key, value in arguments_object(call["arguments"], call["name"]).items()]
            texts.append(f"{call['name']}({', '.join(parts)})")
        return f"{self._START}[{', '.join(texts)}]{self._END}"

    def _value(self, node: ast.AST) -> Any:
        if isinstance(node, ast.Name):
            if node.id not in self._JSON_NAMES:
                raise ValueError(node.id)
            return self._JSON_NAMES[node.id]
        if isinstance(node, ast.List):
            return [self._value(item) for item in node.elts]
        if isinstance(node, ast.Dict):
            return {self._value(key): self._value(value) for key, value in zip(node.keys, node.values)}
        return ast.literal_eval(node)

    _CALL = re.compile(r"([A-Za-z_][\w.-]*)\((.*?)\)(?=\s*(?:,\s*[A-Za-z_][\w.-]*\(|$))", re.DOTALL)
    _KEY = re.compile(r"(?:^|,\s*)([A-Za-z_]\w*)=")

    def _python_calls(self, body: str) -> list[dict[str, Any]]:
        tree = ast.parse(body, mode="eval").body
        calls = []
        for node in tree.elts if isinstance(tree, ast.List) else [tree]:
            if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name) or node.args:
                raise ValueError("not a call with keyword arguments")
            calls.append({"name": node.func.id,
                          "arguments": {item.arg: self._value(item.value) for item in node.keywords}})
        return calls

    @staticmethod
    def _complete(raw: str) -> bool:
        """Whether ``raw`` is a whole argument value: text in quotes, or JSON."""
        if raw[:1] == '"':
            return len(raw) >= 2 and raw[-1] == '"'
        try:
            loads(raw)
        except ValueError:
            return False
        return True

    def _written_calls(self, body: str) -> list[dict[str, Any]]:
        """Calls as LLaMA-Factory writes them, whose strings are put in quotes unescaped (``city="a "b""``): each
        value runs to the first following ``, key=`` at which it is whole (so a string holding ``, key=`` stays one
        value); quoted text is a string, anything else JSON."""
        body = body.strip()
        if body.startswith("[") and body.endswith("]"):
            body = body[1:-1].strip()
        calls = []
        for match in self._CALL.finditer(body):
            arguments: dict[str, Any] = {}
            args = match.group(2)
            keys = list(self._KEY.finditer(args))
            index = 0
            while index < len(keys):
                key, end = keys[index], index + 1
                while end < len(keys) and not self._complete(args[key.end():keys[end].start()].strip()):
                    end += 1
                raw = args[key.end():keys[end].start() if end < len(keys) else None].strip()
                arguments[key.group(1)] = raw[1:-1] if self._complete(raw) and raw[:1] == '"' else loads(raw)
                index = end
            calls.append({"name": match.group(1), "arguments": arguments})
        if not calls:
            raise ValueError("no call")
        return calls

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        start = text.find(self._START)
        end = text.find(self._END, start + 1) if start >= 0 else -1
        if end < 0:
            return text, []
        body = text[start + len(self._START):end].strip()
        try:
            calls = self._python_calls(body)
        except (SyntaxError, ValueError, TypeError, RecursionError, MemoryError):
            try:
                calls = self._written_calls(body)
            except (ValueError, TypeError):
                return text, []
        return (text[:start].strip(), calls) if calls else (text, [])


MORE_TOOL_FORMATS: tuple[ToolFormat, ...] = (MiniMaxM1ToolFormat(), MiniMaxM2ToolFormat(), SeedToolFormat(),
                                            LFM2ToolFormat())
