"""Convert rows of any supported layout into the canonical example of engine/CONTRACTS.md.

One explicit dict maps a formatting to its converter:

- ``alpaca``: instruction/input/output columns, optional history pairs, system, tools, preference
  ``chosen``/``rejected`` (strings, message objects, or a two-item ``output`` list) and ``kto_tag``;
- ``sharegpt``: a list of turns with ``from``/``value`` tags (human, gpt, observation, function_call, system) or
  the tags set in dataset_info.json; a system column or a leading system turn; tools; chosen/rejected turns;
- ``openai``: ``messages`` with ``role``/``content`` (``tool`` results, ``tool_calls``, and content given as a list
  of typed parts: text, reasoning, tool_call, image/video/audio);
- ``text``: plain text for pre-training (a ``text`` column, or a .txt file).

A row that cannot be used raises RowError; :mod:`engine.data.convert_driver` skips such rows and reports them in one
warning.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

from engine.data import null_turns
from engine.data.detect import detect_format  # noqa: F401 (imported from here)
from engine.data.errors import RowError
from engine.data.json_dates import DATE_COLUMN_NOTE, NESTED_DATE_NOTE
from engine.data.registry import DatasetSpec
from engine.data.row_media import row_media
from engine.templates.tool_base import normalize_calls, normalize_tools

logger = logging.getLogger(__name__)

ALPACA_COLUMNS = {"prompt": "instruction", "query": "input", "response": "output", "history": "history",
                  "system": "system", "tools": "tools", "images": "images", "videos": "videos", "audios": "audios",
                  "chosen": "chosen", "rejected": "rejected", "kto_tag": "kto_tag"}
SHAREGPT_COLUMNS = {"messages": "conversations", "system": "system", "tools": "tools", "images": "images",
                    "videos": "videos", "audios": "audios", "chosen": "chosen", "rejected": "rejected",
                    "kto_tag": "kto_tag"}
SHAREGPT_TAGS = {"role_tag": "from", "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt",
                 "observation_tag": "observation", "function_tag": "function_call", "system_tag": "system"}
OPENAI_TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
               "observation_tag": "tool", "function_tag": "function_call", "system_tag": "system"}
# Role names understood in every turn list besides the configured tags.
EXTRA_ROLES = {"user": "user", "human": "user", "assistant": "assistant", "gpt": "assistant", "model": "assistant",
               "tool": "observation", "observation": "observation", "ipython": "observation",
               "function_call": "function", "system": "system"}
MEDIA = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}
_PART_MEDIA = {"image": "images", "image_url": "images", "video": "videos", "video_url": "videos", "audio": "audios",
               "input_audio": "audios"}


# ------------------------------------------------------------------------------------------------ helpers
def _columns(spec: DatasetSpec, defaults: dict[str, str]) -> dict[str, str | None]:
    """The columns read: a dataset_info.json entry's as LLaMA-Factory reads them (``DatasetSpec.lf_columns``), or
    ``defaults`` with the spec's own for a dataset named by path."""
    return dict(spec.lf_columns) if spec.lf_columns is not None else {**defaults, **spec.columns}


def _kto_column(spec: DatasetSpec, columns: dict[str, str | None]) -> str | None:
    """The kto_tag column, where one is mapped (an unmapped default never makes a row a KTO row)."""
    if spec.lf_columns is not None:
        return columns.get("kto_tag")
    return columns["kto_tag"] if "kto_tag" in spec.columns else None


def _text(value: Any, what: str, date_note: str = DATE_COLUMN_NOTE) -> str:
    """A text value (None: empty); anything else, a number too, is a row LLaMA-Factory cannot read (``date_note``
    says why a date is there)."""
    if value is None:
        return ""
    if not isinstance(value, str):
        kind = "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__
        raise RowError(f"{what} is a {kind}, not text" + (f" ({date_note})" if isinstance(value, datetime) else ""))
    return value


def _tools(row: dict[str, Any], column: str | None) -> str:
    value = row.get(column) if column else None
    if value in (None, "", []):
        return ""
    null_turns.refuse_date(value, f"the tools of column {column!r}")
    try:
        tools = normalize_tools(value)
    except ValueError as err:
        raise RowError(str(err)) from None
    if not tools:  # an empty list written as text ("[]") still opens an empty system turn, as in LLaMA-Factory
        return value if isinstance(value, str) and value.strip() else ""
    # kept as given (OpenAI's wrappers and all), as LLaMA-Factory writes it: formats that keep the wrappers (Seed-OSS)
    # or the text itself (Phi-4-mini) read it so
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _calls_json(value: Any) -> str:
    try:  # arguments given as JSON text stay text, as LLaMA-Factory writes them
        return json.dumps(normalize_calls(value, keep_string_arguments=True), ensure_ascii=False)
    except ValueError as err:
        raise RowError(str(err)) from None


# ------------------------------------------------------------------------------------------------- turns
def _parts(content: Any) -> tuple[str, str | None, list[Any], dict[str, list[Any]]]:
    """Text, thinking, tool calls and media items from a message content (a string or a list of typed parts)."""
    if content is None or isinstance(content, str):
        return content or "", None, [], {}
    if isinstance(content, datetime):
        raise RowError(f"a message's text is a date ({NESTED_DATE_NOTE})")
    if not isinstance(content, list):
        raise RowError(f"message content is a {type(content).__name__}, not text or a list of parts")
    texts: list[str] = []
    thinking: list[str] = []
    calls: list[Any] = []
    media: dict[str, list[Any]] = {}
    for part in content:
        if isinstance(part, str):
            texts.append(part)
            continue
        if not isinstance(part, dict):
            raise RowError("a content part is not an object")
        kind = part.get("type", "text")
        value = part.get("value", part.get(kind, part.get("text")))
        if kind == "text":
            texts.append(_text(value, "a text part", NESTED_DATE_NOTE))
        elif kind in ("reasoning", "thinking"):
            thinking.append(_text(value, "a reasoning part", NESTED_DATE_NOTE))
        elif kind in ("tool_call", "function_call"):
            calls.append(value)
        elif kind in _PART_MEDIA:
            column = _PART_MEDIA[kind]
            texts.append(MEDIA[column])
            if isinstance(value, dict):
                value = value.get("url") or value.get("path")
            if value:
                media.setdefault(column, []).append(value)
        else:
            raise RowError(f"unknown content part type {kind!r}")
    return "".join(texts), ("\n".join(thinking) if thinking else None), calls, media


def _convert_turn(turn: Any, tags: dict[str, str], role_map: dict[str, str], media: dict[str, list[Any]],
                  exact: bool = False) -> dict:
    """One turn as a canonical message; ``exact`` (an ``openai`` entry of dataset_info.json) reads it as LLaMA-Factory
    does: no ``reasoning_content``/``thinking`` keys, and a turn with ``tool_calls`` keeps the calls alone."""
    if not isinstance(turn, dict):
        raise RowError("a turn is not an object")
    raw_role = turn.get(tags["role_tag"], turn.get("role", turn.get("from")))
    role = role_map.get(raw_role) or EXTRA_ROLES.get(raw_role)
    if role is None:
        raise RowError(f"unknown role {raw_role!r}")
    content = turn.get(tags["content_tag"], turn.get("content", turn.get("value")))
    text, thinking, calls, found = _parts(content)
    for column, items in found.items():
        media.setdefault(column, []).extend(items)
    if turn.get("tool_calls"):
        calls.extend(turn["tool_calls"])
    for key in () if exact else ("reasoning_content", "thinking"):
        if turn.get(key):
            thinking = _text(turn[key], "reasoning")
    if role == "function" or (role == "assistant" and calls):
        message = {"role": "function", "content": _calls_json(calls if calls else text)}
        if calls and text.strip() and not exact:
            message["text"] = text
    else:  # an empty turn stays, as in LLaMA-Factory (an empty reply trains the end of turn alone)
        message = {"role": role, "content": text}
    if thinking is not None and role in ("assistant", "function"):
        message["thinking"] = thinking
    return message


def _prompt_turn_answer(name: str, role: Any) -> RowError:
    """Why a preference row whose chosen or rejected turn has a prompt role (user, tool result) is skipped."""
    return RowError(f"the {name} answer is a {role!r} turn, a prompt role, not a reply; LLaMA-Factory 0.9.5 keeps such a "
                    f"row but formats that turn as a prompt and trains the prompt (with the assistant header after it "
                    f"and no end of turn) as the {name} answer, so it is skipped here; give the {name} turn the "
                    "assistant (or function) role")


def _check_order(messages: list[dict[str, Any]]) -> None:
    """Prompt turns (user/observation) and replies (assistant/function) must alternate, a prompt turn first: the one
    rule LLaMA-Factory's converters check (a tool result may open a conversation or follow a plain reply)."""
    if not messages:
        raise RowError("no messages")
    for index, message in enumerate(messages):
        prompt_turn = message["role"] in ("user", "observation")
        if prompt_turn != (index % 2 == 0):
            raise RowError(f"wrong role order: {message['role']} at turn {index}")


def _turns(row: dict[str, Any], spec: DatasetSpec, default_tags: dict[str, str]) -> dict[str, Any]:
    columns = _columns(spec, SHAREGPT_COLUMNS)
    if spec.formatting == "openai" and spec.lf_columns is not None and not (spec.columns or {}).get("messages"):
        columns["messages"] = "messages"  # LLaMA-Factory would read `conversations` and fail on OpenAI rows
    tags = {**default_tags, **spec.tags}
    role_map = {tags["user_tag"]: "user", tags["assistant_tag"]: "assistant", tags["observation_tag"]: "observation",
                tags["function_tag"]: "function", tags["system_tag"]: "system"}
    turns = row.get(columns["messages"])
    if not isinstance(turns, list) or not turns:
        raise RowError(f"column {columns['messages']!r} is missing or not a list of turns")
    exact = spec.lf_columns is not None  # an `openai` entry of dataset_info.json: LLaMA-Factory's OpenAI converter
    for index, turn in enumerate(turns):  # its converter writes the calls and tools as JSON: a date stops it
        null_turns.refuse_date(turn.get("tool_calls") if isinstance(turn, dict) else None, f"turn {index}'s tool_calls")
    if columns.get("tools"):
        null_turns.refuse_date(row.get(columns["tools"]), f"the tools of column {columns['tools']!r}")
    turns, dated = null_turns.undate(turns, tags["content_tag"])
    media: dict[str, list[Any]] = {}
    messages = [_convert_turn(turn, tags, role_map, media, exact) for turn in turns]
    lead = 0
    if messages[0]["role"] == "system":  # a leading system turn comes before the system column, as there
        system, messages, lead = messages[0]["content"], messages[1:], 1
    else:
        system = _text(row.get(columns["system"]), "the system column") if columns.get("system") else ""
    if exact:  # its converter writes tools given as objects as JSON text ([] too: "[]" opens an empty tools prompt)
        if columns.get("tools") and isinstance(row.get(columns["tools"]), (dict, list)):
            row = {**row, columns["tools"]: json.dumps(row[columns["tools"]], ensure_ascii=False)}
        system = _openai_entry_system(system, row.get(columns["tools"]) if columns.get("tools") else "")
    merged: list[dict[str, Any]] = []
    for message in messages:
        if message["role"] == "system":
            raise RowError("a system turn appears after the start")
        if merged and message["role"] == "observation" and merged[-1]["role"] == "observation":
            # consecutive tool results become one turn (joined as LLaMA-Factory joins OpenAI-style tool messages)
            joiner = "\n</tool_response>\n<tool_response>\n" if spec.formatting == "openai" else "\n"
            merged[-1] = {"role": "observation", "content": merged[-1]["content"] + joiner + message["content"]}
        else:
            merged.append(message)
    example = _base(row, spec, columns, system, merged)
    for column, items in media.items():
        if items and not example[column]:
            example[column] = row_media({column: items}, column, spec, column)
    found = [(index - lead, f"the {tags['content_tag']!r} of turn {index} ({turns[index].get(tags['role_tag'])!r})")
             for index in dated]
    if spec.ranking:
        for name in ("chosen", "rejected"):
            (turn,), dated = null_turns.undate([row.get(columns[name])], tags["content_tag"])
            found += [(len(merged), f"the {tags['content_tag']!r} of the {name} turn")] if dated else []
            example[name] = _convert_turn(turn, tags, role_map, {}, exact)
    null_turns.note_dated(example, found)
    if exact:
        null_turns.note(example, _openai_null_turns(turns, tags), f"its {tags['content_tag']!r} is null or missing")
    return example


def _openai_null_turns(turns: list[dict[str, Any]], tags: dict[str, str]) -> list[tuple[int, str]]:
    """The turns of an ``openai`` entry's row that LLaMA-Factory's converter leaves without text: a null or missing
    content, but for a leading system turn and a reply whose ``tool_calls`` stand for it."""
    lead = 1 if turns[0].get(tags["role_tag"]) == tags["system_tag"] else 0
    return [(i - lead, f"turn {i} ({turn.get(tags['role_tag'])!r})") for i, turn in enumerate(turns[lead:], lead)
            if turn.get(tags["content_tag"]) is None and not turn.get("tool_calls")]


def _openai_entry_system(system: str, tools: Any) -> str:
    """The system prompt LLaMA-Factory 0.9.5's OpenAI converter makes: without tools it asks for "detailed thinking
    off" (alone, or after the given prompt unless that already says on or off); with tools a given prompt gains a
    line break."""
    if isinstance(tools, (dict, list)):
        tools = json.dumps(tools, ensure_ascii=False)
    if not system:
        return "" if tools else "detailed thinking off"
    if tools:
        return system + "\n"
    if "detailed thinking on" in system or "detailed thinking off" in system:
        return system
    return system + "\ndetailed thinking off"


def _base(row: dict[str, Any], spec: DatasetSpec, columns: dict[str, str], system: str,
          messages: list[dict[str, Any]]) -> dict[str, Any]:
    example: dict[str, Any] = {
        "messages": messages,
        "system": system,
        "tools": _tools(row, columns.get("tools")),
    }
    for kind in MEDIA:
        example[kind] = row_media(row, columns.get(kind), spec, kind)
    kto = _kto_column(spec, columns)
    tag = _kto_tag(row, spec, columns)
    if isinstance(tag, bool):
        example["kto_tag"] = tag
    elif kto:  # LLaMA-Factory makes a KTO row only of a true or false tag; any other row is a plain one there
        example["no_kto_tag"] = (f"column {kto!r} (kto_tag) is missing" if tag is None else
                                 f"column {kto!r} (kto_tag) is {json.dumps(tag)[:40]}, not true or false (JSON "
                                 "booleans, no quotes)")
    return example


def _kto_tag(row: dict[str, Any], spec: DatasetSpec, columns: dict[str, str | None]) -> Any:
    kto = _kto_column(spec, columns)
    return row.get(kto) if kto else None


# ----------------------------------------------------------------------------------------------- formats
def _reply(value: Any) -> dict[str, Any]:
    """An alpaca preference answer: a string, a message object, or a list ending with one."""
    if isinstance(value, list) and value:
        value = value[-1]
    if isinstance(value, dict):
        return _convert_turn(value, OPENAI_TAGS, {}, {})
    text = _text(value, "a preference answer")
    return {"role": "assistant", "content": text}  # an empty one stays, as in LLaMA-Factory


_IGNORED_HISTORY: set[str] = set()


def _note_ignored_history(spec: DatasetSpec, column: str, value: Any) -> None:
    if spec.name in _IGNORED_HISTORY:
        return
    _IGNORED_HISTORY.add(spec.name)
    logger.warning("Dataset %s: the history column %r holds %s, not a list of [prompt, response] pairs; such rows "
                   "train without their history, as in LLaMA-Factory. Store it as a JSON list to use it.", spec.name,
                   column, f"text ({str(value)[:40]!r})" if isinstance(value, str) else type(value).__name__)


def convert_alpaca(row: dict[str, Any], spec: DatasetSpec) -> dict[str, Any]:
    """An alpaca row (instruction, input, output, history, system, ...) as a canonical example."""
    columns = _columns(spec, ALPACA_COLUMNS)
    messages: list[dict[str, Any]] = []
    history = row.get(columns["history"]) or []
    if not isinstance(history, list):  # LLaMA-Factory reads a list only and trains the row without anything else
        _note_ignored_history(spec, columns["history"], history)  # (a CSV cell holding "[]" or a list as text)
        history = []
    no_text: list[tuple[int, str]] = []
    dated: list[tuple[int, str]] = []  # a text its loader read as a date: the run stops there (see null_turns)
    for number, pair in enumerate(history):
        if not isinstance(pair, (list, tuple)) or len(pair) != 2:
            raise RowError("history is not a list of [prompt, response] pairs")
        for side, kind in enumerate(("prompt", "answer")):
            if pair[side] is None or isinstance(pair[side], datetime):
                (dated if pair[side] else no_text).append((len(messages) + side, f"history pair {number}'s {kind}"
                                                           + (f" (column {columns['history']!r})" if pair[side] else "")))
        query, answer = (_text(None if isinstance(item, datetime) else item, "a history turn") for item in pair)
        messages += [{"role": "user", "content": query}, {"role": "assistant", "content": answer}]
    parts = [_text(row[columns[key]], f"column {columns[key]!r}") if columns[key] and row.get(columns[key]) else ""
             for key in ("prompt", "query")]  # LLaMA-Factory leaves out an empty (falsy) part
    prompt = "\n".join(part for part in parts if part)
    named = [(key, columns[key]) for key in ("prompt", "query") if columns[key]]
    if named and not any(name in row for _key, name in named):  # a column mapping that names nothing here
        raise RowError(f"the {named[0][0]} column {named[0][1]!r} is missing")
    # (neither mapped, `columns` naming only the response: LLaMA-Factory trains the reply after an empty prompt)
    messages.append({"role": "user", "content": prompt})
    system = _text(row[columns["system"]], "the system column") if columns["system"] and row.get(columns["system"]) \
        else ""  # an empty (falsy) one is the template's default there
    response = row.get(columns["response"]) if columns["response"] else None
    if spec.ranking:
        chosen, rejected = row.get(columns["chosen"]), row.get(columns["rejected"])
        if (chosen is None or rejected is None) and isinstance(response, list) and len(response) == 2:
            chosen, rejected = response
        if chosen is None or rejected is None:
            raise RowError("chosen or rejected is missing (`ranking: true` in dataset_info.json reads a pair per row: "
                           "map `chosen` and `rejected` in `columns`, give the response column a list of two answers, "
                           "or drop `ranking` for a dataset of single answers)")
        example = _base(row, spec, columns, system, messages)
        example["chosen"], example["rejected"] = _reply(chosen), _reply(rejected)
        null_turns.note(example, no_text, f"null in column {columns['history']!r}")
        null_turns.note_dated(example, dated)
        return example
    if isinstance(response, (int, float)) and not isinstance(response, bool):  # a CSV column of numbers: LLaMA-
        response = None  # Factory takes only text as the reply (the row has none, so sft skips it)
    if isinstance(response, list):  # likewise a list (a pair of answers without `ranking: true`)
        example = _base(row, spec, columns, system, messages)
        example["no_reply"] = (f"column {columns['response']!r} holds a list, not text; a list of two answers is a "
                               "preference pair, read only with `ranking: true` in dataset_info.json (and a stage "
                               "that trains on pairs: rm, dpo)")
        null_turns.note(example, no_text, f"null in column {columns['history']!r}")
        null_turns.note_dated(example, dated)
        return example
    null_reply = response is None and isinstance(_kto_tag(row, spec, columns), bool)
    if response is not None:  # a text, even an empty one, is the reply (LLaMA-Factory: any string)
        messages.append({"role": "assistant", "content": _text(response, f"column {columns['response']!r}")})
    elif null_reply:  # a KTO row's null reply: LLaMA-Factory keeps the row (see finalize)
        messages.append({"role": "assistant", "content": ""})
    example = _base(row, spec, columns, system, messages)
    null_turns.note(example, no_text, f"null in column {columns['history']!r}")
    null_turns.note_dated(example, dated)
    if null_reply and not no_text and example["kto_tag"] is False:  # formatted there as it is: its run stops
        null_turns.note(example, [(len(messages) - 1, "the reply of this undesirable (kto_tag false) row")],
                        f"null in column {columns['response']!r}")
    return example


def convert_sharegpt(row: dict[str, Any], spec: DatasetSpec) -> dict[str, Any]:
    """A sharegpt row (turns with from/value or the entry's tags) as a canonical example."""
    if spec.lf_columns is not None:
        return _sharegpt_entry(row, spec)
    return _turns(row, spec, SHAREGPT_TAGS)


def _sharegpt_entry(row: dict[str, Any], spec: DatasetSpec) -> dict[str, Any]:
    """A sharegpt row of a dataset_info.json entry, read as LLaMA-Factory 0.9.5's sharegpt converter reads it: the
    entry's tags only (an unset one matches no turn), a leading system turn before the system column, turns that
    alternate prompt (user/observation) and reply (assistant/function) by position and nothing more, each turn's
    content as it is (a turn's ``tool_calls`` or ``reasoning_content`` keys are not read)."""
    columns = _columns(spec, SHAREGPT_COLUMNS)
    tags: dict[str, Any] = spec.lf_tags if spec.lf_tags is not None else dict(SHAREGPT_TAGS)
    role_tag, content_tag = tags["role_tag"], tags["content_tag"]
    roles = {tags["user_tag"]: "user", tags["assistant_tag"]: "assistant", tags["observation_tag"]: "observation",
             tags["function_tag"]: "function", tags["system_tag"]: "system"}
    turns = row.get(columns["messages"]) if columns["messages"] else None
    if not isinstance(turns, list) or not turns:
        raise RowError(f"column {columns['messages']!r} is missing or not a list of turns")
    if not all(isinstance(turn, dict) for turn in turns):
        raise RowError("a turn is not an object")
    whole, dated = null_turns.undate(turns, content_tag)  # a text read as a date: the run stops there
    turns = whole
    if tags["system_tag"] and turns[0].get(role_tag) == tags["system_tag"]:
        system, turns = _text(turns[0].get(content_tag), "the system turn"), turns[1:]
    else:
        system = _text(row.get(columns["system"]), "the system column") if columns["system"] else ""
    allowed = ((tags["user_tag"], tags["observation_tag"]), (tags["assistant_tag"], tags["function_tag"]))
    for index, turn in enumerate(turns):
        role = turn.get(role_tag)
        if role is None or role not in allowed[index % 2]:
            raise RowError(f"role {role!r} at turn {index} does not fit the entry's tags and the order "
                           "prompt, reply, prompt, ...")
    if len(turns) % 2 != (1 if spec.ranking else 0):
        raise RowError("wrong number of turns (a reply must end it; preference rows end with a prompt)")
    media: dict[str, list[Any]] = {}
    skipped = len(row[columns["messages"]]) - len(turns)  # a leading system turn
    no_text = [(i, f"turn {i + skipped} ({turn[role_tag]!r})") for i, turn in enumerate(turns)
               if turn.get(content_tag) is None]
    found = [(i - skipped, f"the {content_tag!r} of turn {i} ({whole[i].get(role_tag)!r})") for i in dated]  # system: -1
    messages = [_entry_turn(turn, roles[turn[role_tag]], content_tag, media) for turn in turns]
    example = _base(row, spec, columns, system, messages)
    for column, items in media.items():
        if items and not example[column]:
            example[column] = row_media({column: items}, column, spec, column)
    if spec.ranking:
        pair = [row.get(columns[key]) if columns[key] else None for key in ("chosen", "rejected")]
        if not all(isinstance(turn, dict) for turn in pair):
            raise RowError("chosen or rejected is missing or not a turn object (`ranking: true` in dataset_info.json "
                           "reads a pair per row: map `chosen` and `rejected` in `columns` to turn objects, or drop "
                           "`ranking` for a dataset of single answers)")
        for name, turn in zip(("chosen", "rejected"), pair):
            if turn.get(role_tag) in allowed[0]:
                raise _prompt_turn_answer(name, turn.get(role_tag))
            if turn.get(role_tag) not in allowed[1]:
                raise RowError(f"the {name} turn's role {turn.get(role_tag)!r} is not a reply of the entry's tags")
            if turn.get(content_tag) is None:
                no_text.append((len(messages), f"the {name} turn"))
            (turn,), dated = null_turns.undate([turn], content_tag)
            found += [(len(messages), f"the {content_tag!r} of the {name} turn")] if dated else []
            example[name] = _entry_turn(turn, roles[turn[role_tag]], content_tag, {})
    null_turns.note(example, no_text, f"its {content_tag!r} is null or missing")
    null_turns.note_dated(example, found)
    return example


def _entry_turn(turn: dict[str, Any], role: str, content_tag: str, media: dict[str, list[Any]]) -> dict[str, Any]:
    text, _, _, found = _parts(turn.get(content_tag))
    for column, items in found.items():
        media.setdefault(column, []).extend(items)
    if role == "function":
        return {"role": "function", "content": _calls_json(text)}
    return {"role": role, "content": text}


def convert_openai(row: dict[str, Any], spec: DatasetSpec) -> dict[str, Any]:
    """An OpenAI-style row (``messages`` with role/content) as a canonical example."""
    if "messages" not in spec.columns:
        spec = DatasetSpec(**{**spec.__dict__, "columns": {**spec.columns, "messages": "messages"}})
    return _turns(row, spec, OPENAI_TAGS)


def convert_text(row: dict[str, Any], spec: DatasetSpec) -> dict[str, Any]:
    """A pre-training row: the ``text`` column (or the column mapped to ``prompt``)."""
    column = spec.columns.get("prompt", "text")
    if column not in row:
        raise RowError(f"column {column!r} is missing")
    text = _text(row.get(column), f"column {column!r}")  # an empty one trains the EOS alone, as in LLaMA-Factory
    return {"messages": [], "system": "", "tools": "", "images": [], "videos": [], "audios": [], "text": text}


CONVERTERS: dict[str, Callable[[dict[str, Any], DatasetSpec], dict[str, Any]]] = {
    "alpaca": convert_alpaca,
    "sharegpt": convert_sharegpt,
    "openai": convert_openai,
    "text": convert_text,
}

# ---------------------------------------------------------------------------------------------- finalize
def finalize(example: dict[str, Any], stage: str) -> dict[str, Any]:
    """Check (and shape) a converted example for ``stage``; raises RowError when it does not fit."""
    no_reply = example.pop("no_reply", None)  # why a row has no reply, where that is not plain
    no_kto_tag = example.pop("no_kto_tag", None)  # why a row of a KTO dataset is no KTO row
    no_text = example.pop(null_turns.KEY, None)  # a turn with no text: refused once the row is known to be read
    dated = example.pop(null_turns.DATED, None)  # likewise a turn whose text its loader read as a date
    messages = example["messages"]
    if stage == "pt":  # LLaMA-Factory trains the first message of the prompt alone, an empty one as its EOS
        null_turns.refuse(no_text, stage)
        null_turns.refuse_dated(dated, stage)
        text = example.get("text")
        if text is None:
            text = messages[0].get("content", "") if messages else ""
        return {**example, "text": text}
    if "text" in example and not messages:
        raise RowError("plain text has no prompt and response")
    if stage in ("rm", "dpo"):
        if "chosen" not in example:
            raise RowError("no chosen/rejected answers")
        for name in ("chosen", "rejected"):
            if example[name]["role"] in ("user", "observation"):
                raise _prompt_turn_answer(name, example[name]["role"])
        _check_order(messages + [example["chosen"]])
        _check_order(messages + [example["rejected"]])
        null_turns.refuse(no_text, stage)
        null_turns.refuse_dated(dated, stage)
        return example
    if example.get("kto_tag") is True and not dated and _textless_reply(messages, no_text):
        # LLaMA-Factory 0.9.5 tells a KTO row's label by its reply having text: a desirable row whose reply is empty
        # or null is trained as an undesirable one with the empty reply (a null one read as "")
        messages = messages[:-1] + [{**messages[-1], "content": ""}]
        example = {**example, "messages": messages, "kto_tag": False, "kto_textless": True}
        no_text = None
    if example.pop("kto_textless", False) and stage != "kto":
        raise RowError(f"a KTO row (kto_tag true) with an empty or null reply, which LLaMA-Factory's kto trains as an "
                       f"undesirable answer (the empty reply); stage {stage} does not learn from it")
    if example.get("kto_tag") is False and stage != "kto":  # LLaMA-Factory drops every KTO row outside kto; training
        raise RowError(f"an undesirable answer (kto_tag false), which stage {stage} does not learn from (only the "
                       "desirable ones are used)")  # (or scoring) on a wrong answer as if it were right is worse
    _check_order(messages)
    if messages[-1]["role"] not in ("assistant", "function"):
        raise RowError(no_reply or "the conversation does not end with an assistant reply")
    if stage == "kto" and "kto_tag" not in example:
        raise RowError(no_kto_tag or "no kto_tag")
    null_turns.refuse(no_text, stage)
    null_turns.refuse_dated(dated, stage)
    return example


def _textless_reply(messages: list[dict[str, Any]], no_text: tuple[int, str, str] | None) -> bool:
    """Whether the last turn, a reply, has no text: empty, or null (the turn ``no_text`` names)."""
    if not messages or messages[-1]["role"] not in ("assistant", "function"):
        return False
    return messages[-1]["content"] == "" or (no_text is not None and no_text[0] == len(messages) - 1)
