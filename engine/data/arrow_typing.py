"""The tool calls and tools of an ``openai`` entry's rows as LLaMA-Factory 0.9.5 reads them from a data file.

LLaMA-Factory loads a local file with ``datasets``, which makes it an Arrow table: one type per column for the
whole file. Where a turn's ``tool_calls`` give ``arguments`` as JSON objects, or the ``tools`` column holds objects,
every object of the column gets the keys of all of them, in the order they first appear in the file, the ones it
lacks as null; numbers of a key that is fractional anywhere become floats (``1`` -> ``1.0``). Its OpenAI converter
then writes those objects as JSON text (``json.dumps``), so the nulls and floats are in the trained text.

:func:`typed_rows` gives the rows so: a file whose calls and tools hold no object is read once, unchanged; at the
first row that holds one, the file is read once more from its start to find the column types (Arrow's own
inference, unified chunk by chunk), and that row and every later one is cast to them. A file Arrow cannot type
(a key holding text in one call and a number in another) is refused, as LLaMA-Factory's loader fails on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from engine.data.errors import DatasetError

CHUNK = 1024
"""Values typed by Arrow at a time before the running type is unified with theirs."""


def _calls(row: dict[str, Any], messages: str) -> Iterator[list[Any]]:
    """Each turn's ``tool_calls`` list in a row (in order)."""
    turns = row.get(messages)
    for turn in turns if isinstance(turns, list) else ():
        calls = turn.get("tool_calls") if isinstance(turn, dict) else None
        if isinstance(calls, list) and calls:
            yield calls


def _has_object(value: Any) -> bool:
    """Whether a tool call or tools value holds a JSON object whose keys Arrow merges (a call's arguments object,
    or a tools list/object); a call object whose arguments are text keeps its text."""
    return isinstance(value, (dict, list))


def _needs(row: dict[str, Any], messages: str, tools: str | None) -> bool:
    if tools and _has_object(row.get(tools)):
        return True
    for calls in _calls(row, messages):
        for call in calls:
            function = call.get("function") if isinstance(call, dict) else None
            if isinstance(function, dict) and _has_object(function.get("arguments")):
                return True
    return False


class _Column:
    """The running Arrow type of one column's values (None until a value is seen)."""

    def __init__(self, what: str, path: Path) -> None:
        self.what, self.path, self.type, self.pending = what, path, None, []

    def add(self, value: Any) -> None:
        self.pending.append(value)
        if len(self.pending) >= CHUNK:
            self.flush()

    def flush(self) -> None:
        import pyarrow as pa

        if not self.pending:
            return
        try:
            found = pa.array(self.pending).type
            if self.type is not None:
                found = pa.unify_schemas([pa.schema([("v", self.type)]), pa.schema([("v", found)])],
                                         promote_options="permissive").field("v").type
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as err:
            raise self.refusal(err) from None
        self.type, self.pending = found, []

    def refusal(self, err: Exception) -> DatasetError:
        return DatasetError(
            f"{self.path}: the {self.what} cannot be given one type for the whole file "
            f"({str(err).splitlines()[0]}): LLaMA-Factory 0.9.5 loads a file as an Arrow table, one type per column, "
            "and fails on this file too. Give each key the same kind of value everywhere (a number, a text, a list, "
            "an object), or write the calls' arguments and the tools as JSON text.")

    def cast(self, values: list[Any]) -> list[Any]:
        import pyarrow as pa

        try:
            return pa.array(values, type=self.type).to_pylist()
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, OverflowError) as err:
            raise self.refusal(err) from None


def _types(rows: Iterator[dict[str, Any]], path: Path, messages: str, tools: str | None) -> tuple[_Column, _Column]:
    calls_type = _Column(f"tool calls of column {messages!r}", path)
    tools_type = _Column(f"values of the tools column {tools!r}", path)
    for row in rows:
        for calls in _calls(row, messages):
            for call in calls:
                calls_type.add(call)
        if tools and row.get(tools) is not None:
            tools_type.add(row[tools])
    calls_type.flush()
    tools_type.flush()
    return calls_type, tools_type


def typed_rows(rows: Iterator[dict[str, Any]], again: Callable[[], Iterator[dict[str, Any]]], path: Path,
               messages: str, tools: str | None) -> Iterator[dict[str, Any]]:
    """``rows`` (a file's rows; ``again`` reads them anew from the start) with every turn's ``tool_calls`` and the
    ``tools`` column typed as LLaMA-Factory's loader types them (see the module's text)."""
    types = None
    for row in rows:
        if types is None and _needs(row, messages, tools):
            types = _types(again(), path, messages, tools)
        if types is not None:
            row = _cast_row(row, messages, tools, *types)
        yield row


def _cast_row(row: dict[str, Any], messages: str, tools: str | None, calls_type: _Column,
              tools_type: _Column) -> dict[str, Any]:
    row = dict(row)
    turns = row.get(messages)
    if isinstance(turns, list):
        row[messages] = [{**turn, "tool_calls": calls_type.cast(turn["tool_calls"])}
                         if isinstance(turn, dict) and isinstance(turn.get("tool_calls"), list) and turn["tool_calls"]
                         else turn for turn in turns]
    if tools and row.get(tools) is not None:
        row[tools] = tools_type.cast([row[tools]])[0]
    return row
