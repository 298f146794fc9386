"""The conversations of the LLaMA-Factory parity tests (LLaMA-Factory's message format: thoughts inside content)."""

from __future__ import annotations

import json

TOOLS = [
    {"name": "get_weather", "description": "Get the current weather of a city",
     "parameters": {"type": "object", "properties": {
         "unit": {"type": "string", "description": "Temperature unit", "enum": ["celsius", "fahrenheit"]},
         "city": {"type": "string", "description": "City name"},
         "days": {"type": "array", "description": "Days ahead", "items": {"type": "integer"}, "default": [0]}},
         "required": ["city"]}},
    {"type": "function", "function": {"name": "take_note", "parameters": {
        "type": "object", "properties": {"text": {"type": "string"}, "pinned": {"type": "boolean"}}}}},
]
CALL = [{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "days": [0, 1],
                                             "extra": {"windy": True, "note": None, "level": 2.5}}}]
SYSTEM = "You are a helpful assistant."


def conversations(thought_words: tuple[str, str]) -> dict[str, dict]:
    """Case name -> {"messages", "system", "tools"} for a template with ``thought_words``."""
    def thought(text: str) -> str:
        return thought_words[0] + text + thought_words[1]

    single = [{"role": "user", "content": "Hello! How are you?"}, {"role": "assistant", "content": "I am fine."}]
    three = [
        {"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi, how can I help?"},
        {"role": "user", "content": "What is two plus two?"}, {"role": "assistant", "content": "Two plus two is four."},
        {"role": "user", "content": "And in French?"}, {"role": "assistant", "content": "Deux plus deux font quatre."},
    ]
    tool = [
        {"role": "user", "content": "What is the weather in Paris?"},
        {"role": "function", "content": json.dumps(CALL, ensure_ascii=False)},
        {"role": "observation", "content": '{"temperature": 22, "sky": "sunny"}'},
        {"role": "assistant", "content": "It is sunny and 22 degrees in Paris."},
    ]
    reasoning = [
        {"role": "user", "content": "What is two plus two?"},
        {"role": "assistant", "content": thought("Two and two make four.") + "Four."},
        {"role": "user", "content": "And three plus three?"},
        {"role": "assistant", "content": "Six."},
        {"role": "user", "content": "And one plus one?"},
        {"role": "assistant", "content": thought("One and one make two.") + "Two."},
    ]
    return {
        "single": {"messages": single, "system": "", "tools": ""},
        "single_system": {"messages": single, "system": SYSTEM, "tools": ""},
        "three_turns": {"messages": three, "system": SYSTEM, "tools": ""},
        "tool": {"messages": tool, "system": "", "tools": json.dumps(TOOLS, ensure_ascii=False)},
        "empty_tools": {"messages": single, "system": "", "tools": "[]"},
        "reasoning": {"messages": reasoning, "system": SYSTEM, "tools": ""},
    }


def media_conversations(thought_words: tuple[str, str]) -> dict[str, dict]:
    """:func:`conversations` plus rows with ``<image>``/``<video>``/``<audio>`` placeholders (before expansion)."""
    media = [
        {"role": "user", "content": "<image>What is in this picture?"}, {"role": "assistant", "content": "A cat."},
        {"role": "user", "content": "Compare <image> with <video> and <audio>."},
        {"role": "assistant", "content": "The video shows a dog; the audio is barking."},
    ]
    return {**conversations(thought_words),
            "media": {"messages": media, "system": "", "tools": ""},
            "media_system": {"messages": media[:2], "system": SYSTEM, "tools": ""}}
