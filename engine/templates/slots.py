"""Template patterns as LLaMA-Factory-style slot lists, and their conversion to text and token ids.

A pattern is a string with placeholders:

- ``{content}``: the message text (the first occurrence is replaced);
- ``{bos}`` / ``{eos}``: the tokenizer's BOS / EOS token, as its id (nothing when the tokenizer has none);
- ``{token:NAME}``: the id of the token ``NAME`` (``convert_tokens_to_ids``);
- ``{|}``: a boundary between two text pieces that are tokenized apart.

A pattern splits into *elements*: text pieces and special tokens. Each text piece is tokenized on its own, exactly
as LLaMA-Factory tokenizes each string slot on its own, so ``"Human: hi"`` + EOS + ``"\\nAssistant:"`` gives the same
ids there and here.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import UserError
from engine.templates.text_ids import text_ids


class MissingTokenError(UserError, ValueError):
    """A ``{token:NAME}`` slot names a token the tokenizer does not have."""


@dataclass(frozen=True)
class Special:
    """A token slot: ``bos``, ``eos`` or a named ``token``."""

    kind: str
    token: str = ""


BOS = Special("bos")
EOS = Special("eos")
Element = str | Special
_MARKER = re.compile(r"\{(bos|eos|\||token:[^{}]+)\}")


@functools.lru_cache(maxsize=512)
def parse_pattern(pattern: str) -> tuple[Element, ...]:
    """The elements of ``pattern`` (text pieces keep their ``{content}`` placeholder)."""
    out: list[Element] = []
    pos = 0
    for match in _MARKER.finditer(pattern):
        if match.start() > pos:
            out.append(pattern[pos:match.start()])
        key = match.group(1)
        if key == "bos":
            out.append(BOS)
        elif key == "eos":
            out.append(EOS)
        elif key.startswith("token:"):
            out.append(Special("token", key[len("token:"):]))
        pos = match.end()
    if pos < len(pattern):
        out.append(pattern[pos:])
    return tuple(out)


def token_slots(template: Any) -> set[str]:
    """The tokens a template writes through ``{token:NAME}`` slots (ChatGLM3's, Yuan's), from all its patterns."""
    import dataclasses

    names: set[str] = set()
    for item in dataclasses.fields(template):
        value = getattr(template, item.name)
        if isinstance(value, str) and "{token:" in value:
            names.update(element.token for element in parse_pattern(value)
                         if isinstance(element, Special) and element.kind == "token")
    return names


def fill(pattern: str, content: str = "") -> list[Element]:
    """The elements of ``pattern`` with ``{content}`` replaced (first occurrence per text piece, as LF does)."""
    return [piece.replace("{content}", content, 1) if isinstance(piece, str) else piece
            for piece in parse_pattern(pattern)]


def first_text(pattern: str, content: str) -> str:
    """The first text piece of ``pattern`` filled with ``content`` (how a merged system prompt is written)."""
    for piece in fill(pattern, content):
        if isinstance(piece, str):
            return piece
    return ""


def element_ids(tokenizer: Any, elements: list[Element]) -> list[int]:
    """Token ids of ``elements``: each text piece encoded on its own, without the tokenizer's own specials."""
    ids: list[int] = []
    for element in elements:
        if isinstance(element, str):
            if element:
                ids += text_ids(tokenizer, element)
        elif element.kind == "token":
            token_id = tokenizer.convert_tokens_to_ids(element.token)
            if token_id is None:
                raise MissingTokenError(
                    f"The tokenizer has no token {element.token!r}, which the chat template writes as one token: "
                    "use the model's own tokenizer, or another `template`."
                )
            ids.append(token_id)
        elif element.kind == "bos":
            if tokenizer.bos_token_id is not None:
                ids.append(tokenizer.bos_token_id)
        elif tokenizer.eos_token_id is not None:
            ids.append(tokenizer.eos_token_id)
    return ids


def element_text(elements: list[Element], tokenizer: Any = None, bos_text: str = "", eos_text: str = "") -> str:
    """The text of ``elements``; BOS/EOS are the tokenizer's (``bos_text``/``eos_text`` without a tokenizer)."""
    parts = []
    for element in elements:
        if isinstance(element, str):
            parts.append(element)
        elif element.kind == "token":
            parts.append(element.token)
        elif tokenizer is None:
            parts.append(bos_text if element.kind == "bos" else eos_text)
        elif element.kind == "bos":
            parts.append(tokenizer.bos_token if tokenizer.bos_token_id is not None else "")
        else:
            parts.append(tokenizer.eos_token if tokenizer.eos_token_id is not None else "")
    return "".join(parts)
