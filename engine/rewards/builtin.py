r"""Built-in reward functions for GRPO/RLOO, in TRL's signature ``f(prompts, completions, **kwargs) -> list``.

Each factory takes the run's settings and returns the function. Dataset columns arrive as keyword lists, one value
per completion: ``answer`` (the reference reply of the row), ``system``, ``tools`` (JSON text of the row's tools);
TRL adds ``completion_ids`` (token ids of each completion). A reward returns ``None`` where it does not apply
(TRL then leaves that completion out of the function's mean).

- ``exact_match``: 1.0 when the answer given (inside ``<answer>…</answer>`` when present, else the whole reply)
  equals the reference after normalising case, spaces and a trailing full stop; else 0.0.
- ``numeric_match``: 1.0 when the last number of the answer given equals the last number of the reference
  (``1,000`` reads as 1000; relative tolerance 1e-6); 0.0 otherwise; ``None`` when the reference has no number.
- ``format``: 1.0 when the reply (stripped) matches ``reward_format``, a regular expression searched with ``.``
  also matching new lines (anchor it with ``^…$`` to demand the whole reply; by default
  ``^<think>…</think>\s*<answer>…</answer>$``); else 0.0.
- ``length``: 1.0 for ``reward_min_tokens``–``reward_max_tokens`` completion tokens; below, ``tokens / min``;
  above, ``max / tokens`` (so every token closer to the range earns a little more).
- ``json``: 1.0 when the answer given (code fences allowed) parses as a JSON object or array; else 0.0.
- ``tool_call``: 1.0 when the reply holds at least one well-formed call in the template's tool format and every
  call names a tool of the row (any name when the row declares none); 0.5 when a call names an undeclared tool;
  0.0 when there is no well-formed call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

RewardFunc = Callable[..., list]

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
_SIGN = r"(?:(?<![\w.])-)?"  # a minus sign, not a hyphen between words or digits (2024-01-05)
NUMBER = re.compile(_SIGN + r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)?(?:[eE][-+]?\d+)?|" + _SIGN + r"\.\d+")
"""A number as people write them: thousands separated by commas in groups of three (1,000; but 3,4 is two)."""
FENCE = re.compile(r"^```[a-zA-Z]*\s*\n?(.*?)\n?```$", re.DOTALL)
DEFAULT_FORMAT = r"^<think>.*?</think>\s*<answer>.*?</answer>$"


def answer_part(text: str) -> str:
    """The text inside the last ``<answer>…</answer>``, or the whole text, stripped."""
    found = ANSWER_TAG.findall(text or "")
    return (found[-1] if found else (text or "")).strip()


def normalize(text: str) -> str:
    return " ".join(str(text).casefold().split()).rstrip(".").strip()


def last_number(text: str) -> float | None:
    found = NUMBER.findall(text or "")
    if not found:
        return None
    try:
        return float(found[-1].replace(",", ""))
    except ValueError:
        return None


def _column(kwargs: dict[str, Any], name: str, size: int) -> list:
    values = kwargs.get(name)
    return list(values) if values is not None else [None] * size


def exact_match(settings: Any = None, template: Any = None) -> RewardFunc:
    def exact_match(prompts: list, completions: list, answer: list | None = None, **kwargs: Any) -> list:
        answers = answer if answer is not None else [None] * len(completions)
        return [None if ref is None else float(normalize(answer_part(c)) == normalize(answer_part(ref)))
                for c, ref in zip(completions, answers)]

    return exact_match


def numeric_match(settings: Any = None, template: Any = None) -> RewardFunc:
    def numeric_match(prompts: list, completions: list, answer: list | None = None, **kwargs: Any) -> list:
        answers = answer if answer is not None else [None] * len(completions)
        out: list[float | None] = []
        for completion, ref in zip(completions, answers):
            expected = last_number(answer_part(ref)) if ref is not None else None
            if expected is None:
                out.append(None)
                continue
            given = last_number(answer_part(completion))
            out.append(float(given is not None and abs(given - expected) <= 1e-6 * max(1.0, abs(expected))))
        return out

    return numeric_match


def format_check(settings: Any = None, template: Any = None) -> RewardFunc:
    pattern = re.compile(getattr(settings, "reward_format", None) or DEFAULT_FORMAT, re.DOTALL)

    def format(prompts: list, completions: list, **kwargs: Any) -> list:  # noqa: A001 - the reward's name
        return [float(pattern.search(c.strip()) is not None) for c in completions]

    return format


def length_range(settings: Any = None, template: Any = None) -> RewardFunc:
    low = int(getattr(settings, "reward_min_tokens", 1))
    high = int(getattr(settings, "reward_max_tokens", 256))

    def length(prompts: list, completions: list, completion_ids: list | None = None, **kwargs: Any) -> list:
        sizes = [len(ids) for ids in completion_ids] if completion_ids is not None else [len(c.split()) for c in
                                                                                         completions]
        out = []
        for n in sizes:
            if n < low:
                out.append(n / low)
            elif n > high:
                out.append(high / n)
            else:
                out.append(1.0)
        return out

    return length


def valid_json(settings: Any = None, template: Any = None) -> RewardFunc:
    def json_reward(prompts: list, completions: list, **kwargs: Any) -> list:
        out = []
        for completion in completions:
            text = answer_part(completion)
            fenced = FENCE.match(text)
            text = fenced.group(1) if fenced else text
            try:
                out.append(float(isinstance(json.loads(text), (dict, list))))
            except (ValueError, RecursionError):  # RecursionError: brackets nested thousands deep
                out.append(0.0)
        return out

    json_reward.__name__ = "json"
    return json_reward


def _declared_names(tools: Any) -> set[str]:
    from engine.templates.tool_base import normalize_tools

    try:
        return {t.get("name", "") for t in normalize_tools(tools)} if tools else set()
    except (ValueError, TypeError, AttributeError):
        return set()


def tool_call(settings: Any = None, template: Any = None) -> RewardFunc:
    if template is None:
        from engine.templates.tool_formats import get_tool_format

        fmt = get_tool_format(getattr(settings, "tool_format", None) or "default")
        parse = fmt.extract
    else:
        parse = template.parse_reply

    def tool_call(prompts: list, completions: list, tools: list | None = None, **kwargs: Any) -> list:
        out = []
        for completion, row_tools in zip(completions, _column({"tools": tools}, "tools", len(completions))):
            try:
                calls = parse(completion)[1]
            except (ValueError, TypeError, KeyError):
                calls = []
            calls = [c for c in calls if isinstance(c, dict) and c.get("name") and isinstance(c.get("arguments"), dict)]
            if not calls:
                out.append(0.0)
                continue
            names = _declared_names(row_tools)
            out.append(1.0 if not names or all(c["name"] in names for c in calls) else 0.5)
        return out

    return tool_call


BUILTIN_REWARDS: dict[str, Callable[[Any, Any], RewardFunc]] = {
    "exact_match": exact_match,
    "numeric_match": numeric_match,
    "format": format_check,
    "length": length_range,
    "json": valid_json,
    "tool_call": tool_call,
}
"""name -> factory(settings, template) (the one dispatch table of built-in rewards)."""
