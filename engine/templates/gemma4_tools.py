"""Gemma 4's tool syntax: declarations, calls and a parser for the ``<|"|>``-quoted value notation.

Gemma 4 writes structured values in a compact notation close to JSON: object keys are bare words and sorted,
strings are wrapped in the ``<|"|>`` marker (no escaping inside), booleans are ``true``/``false``, ``null`` stands
for None, numbers are bare, objects are ``{k:v,...}`` and lists ``[v,...]``. A tool declaration is written as
``declaration:NAME{description:...,parameters:{...}}`` with JSON-schema type names upper-cased, and a call as
``<|tool_call>call:NAME{k:v,...}<tool_call|>``.
"""

from __future__ import annotations

import json
import re
from typing import Any

from engine.templates.tool_base import ToolFormat, null_parameter

QUOTE = '<|"|>'
CALL_OPEN = "<|tool_call>"
CALL_CLOSE = "<tool_call|>"
_NAME = re.compile(r"[A-Za-z_][\w.\-]*")
_NUMBER = re.compile(r"-?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")
_BARE = re.compile(r"[^,:{}\[\]\s]+")


def to_gemma_value(value: Any) -> str:
    """Write a JSON-like value in Gemma 4's notation (object keys sorted)."""
    if isinstance(value, str):
        return f"{QUOTE}{value}{QUOTE}"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, dict):
        return "{" + ",".join(f"{key}:{to_gemma_value(value[key])}" for key in sorted(value, key=str)) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(to_gemma_value(item) for item in value) + "]"
    return f"{QUOTE}{value}{QUOTE}"


class GemmaSyntaxError(ValueError):
    """Text that does not follow Gemma 4's value notation."""


class _Reader:
    """A small recursive-descent reader over Gemma 4's value notation."""

    def __init__(self, text: str, pos: int = 0) -> None:
        self.text = text
        self.pos = pos

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def expect(self, literal: str) -> None:
        self.skip_space()
        if not self.text.startswith(literal, self.pos):
            raise GemmaSyntaxError(f"expected {literal!r} at offset {self.pos}")
        self.pos += len(literal)

    def value(self) -> Any:
        self.skip_space()
        text, pos = self.text, self.pos
        if text.startswith(QUOTE, pos):
            end = text.find(QUOTE, pos + len(QUOTE))
            if end < 0:
                raise GemmaSyntaxError(f"unterminated string at offset {pos}")
            self.pos = end + len(QUOTE)
            return text[pos + len(QUOTE):end]
        if pos >= len(text):
            raise GemmaSyntaxError("unexpected end of text")
        char = text[pos]
        if char == "{":
            return self.mapping()
        if char == "[":
            return self.sequence()
        if char == '"':
            decoded, end = json.JSONDecoder().raw_decode(text, pos)
            self.pos = end
            return decoded
        for word, result in (("true", True), ("false", False), ("null", None)):
            if text.startswith(word, pos) and not _continues_word(text, pos + len(word)):
                self.pos = pos + len(word)
                return result
        number = _NUMBER.match(text, pos)
        if number and not _continues_word(text, number.end()):
            self.pos = number.end()
            raw = number.group()
            try:
                return float(raw) if any(c in raw for c in ".eE") else int(raw)
            except ValueError:  # a whole number past Python's digit limit
                raise GemmaSyntaxError(f"a number of {len(raw):,} digits at offset {pos}") from None
        bare = _BARE.match(text, pos)
        if bare:
            self.pos = bare.end()
            return bare.group()
        raise GemmaSyntaxError(f"unexpected {char!r} at offset {pos}")

    def key(self) -> str:
        self.skip_space()
        if self.text.startswith(QUOTE, self.pos) or self.text.startswith('"', self.pos):
            return str(self.value())
        match = _BARE.match(self.text, self.pos)
        if not match:
            raise GemmaSyntaxError(f"expected a key at offset {self.pos}")
        self.pos = match.end()
        return match.group()

    def mapping(self) -> dict[str, Any]:
        self.expect("{")
        out: dict[str, Any] = {}
        self.skip_space()
        if self.text.startswith("}", self.pos):
            self.pos += 1
            return out
        while True:
            key = self.key()
            self.expect(":")
            out[key] = self.value()
            self.skip_space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            self.expect("}")
            return out

    def sequence(self) -> list[Any]:
        self.expect("[")
        out: list[Any] = []
        self.skip_space()
        if self.text.startswith("]", self.pos):
            self.pos += 1
            return out
        while True:
            out.append(self.value())
            self.skip_space()
            if self.text.startswith(",", self.pos):
                self.pos += 1
                continue
            self.expect("]")
            return out


def _continues_word(text: str, pos: int) -> bool:
    return pos < len(text) and (text[pos].isalnum() or text[pos] == "_")


def from_gemma_value(text: str) -> Any:
    """Read one value written in Gemma 4's notation (the whole text must be consumed)."""
    reader = _Reader(text)
    try:
        value = reader.value()
    except RecursionError:
        raise GemmaSyntaxError("the value is nested too deeply") from None
    reader.skip_space()
    if reader.pos != len(text):
        raise GemmaSyntaxError(f"unexpected text after the value at offset {reader.pos}")
    return value


def _quoted(text: Any) -> str:
    return f"{QUOTE}{text}{QUOTE}"


def _declaration(tool: dict[str, Any]) -> str:
    """One ``declaration:NAME{...}`` line: the description (always), then the parameters block with, per property,
    only its description and upper-cased type in the tool's own order, then ``required`` and the type; then an
    optional response block (its description, and its type when it is an object)."""
    text = f"declaration:{tool['name']}{{description:{_quoted(tool.get('description', ''))}"
    params = tool.get("parameters")
    if params:
        parts = []
        if params.get("properties"):
            props = []
            for name, schema in params["properties"].items():
                if not isinstance(schema, dict):
                    raise ValueError(null_parameter(tool, name, schema, "gemma4"))
                fields = []
                if schema.get("description"):
                    fields.append(f"description:{_quoted(schema['description'])}")
                if schema.get("type"):
                    fields.append(f"type:{_quoted(str(schema['type']).upper())}")
                props.append(f"{name}:{{{','.join(fields)}}}")
            parts.append(f"properties:{{{','.join(props)}}}")
        if params.get("required"):
            parts.append("required:[" + ",".join(_quoted(item) for item in params["required"]) + "]")
        if params.get("type"):
            parts.append(f"type:{_quoted(str(params['type']).upper())}")
        text += f",parameters:{{{','.join(parts)}}}"
    response = tool.get("response")
    if response:
        parts = []
        if response.get("description"):
            parts.append(f"description:{_quoted(response['description'])}")
        if str(response.get("type", "")).upper() == "OBJECT":
            parts.append(f"type:{_quoted('OBJECT')}")
        text += f",response:{{{','.join(parts)}}}"
    return text + "}"


class Gemma4ToolFormat(ToolFormat):
    """Declarations one per line; calls as ``<|tool_call>call:NAME{...}<tool_call|>`` blocks."""

    name = "gemma4"

    def declare(self, tools: list[dict[str, Any]]) -> str:
        return "\n".join(_declaration(tool) for tool in tools)

    def write_calls(self, calls: list[dict[str, Any]]) -> str:
        return "".join(
            f"{CALL_OPEN}call:{call['name']}{to_gemma_value(call.get('arguments') or {})}{CALL_CLOSE}" for call in calls
        )

    def extract(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        calls: list[dict[str, Any]] = []
        kept: list[str] = []
        pos = 0
        while True:
            start = text.find(CALL_OPEN, pos)
            if start < 0:
                break
            parsed = self._read_call(text, start + len(CALL_OPEN))
            if parsed is None:
                break
            call, end = parsed
            kept.append(text[pos:start])
            calls.append(call)
            pos = end
        if not calls:
            return text, []
        kept.append(text[pos:])
        return "".join(kept).strip(), calls

    @staticmethod
    def _read_call(text: str, pos: int) -> tuple[dict[str, Any], int] | None:
        reader = _Reader(text, pos)
        reader.skip_space()
        if not text.startswith("call:", reader.pos):
            return None
        reader.pos += len("call:")
        name = _NAME.match(text, reader.pos)
        if not name:
            return None
        reader.pos = name.end()
        try:
            arguments = reader.mapping()
            reader.expect(CALL_CLOSE)
        except (GemmaSyntaxError, RecursionError):  # RecursionError: values nested too deeply to read
            return None
        return {"name": name.group(), "arguments": arguments}, reader.pos
