"""The template used when ``template`` is left empty: the tokenizer's chat template cut into slots once.

LLaMA-Factory 0.9.5 does not render a tokenizer's Jinja chat template per conversation. It renders a few probe
conversations once, cuts the system, user and assistant slots out of them, and encodes every conversation with
those slots like a built-in template (``parse_template`` in its ``data/template.py``). A config without
``template`` must give the same training tokens here, so this module derives the same slots by the same rules:

- prefix: the text of what the tokenizer adds to an empty string (its BOS, or nothing); every probe rendering is
  read after that many characters;
- system slot: a lone system message ``{{content}}``;
- user slot: a user message ``{{content}}`` with the generation prompt (it ends with the assistant header);
- assistant slot: what a user + assistant conversation adds after the user slot; with ``<think>`` in it the
  template is a reasoning one, and the think tags and leading newlines are removed from the slot;
- default system: when the user slot is longer than the same with an empty system message, the template injects
  a system prompt of its own; the characters the longer one adds are the default system, and the lone system
  turn that carries it is cut from the front of the user slot;
- tool results are written like user turns, tool calls like replies in the ``default`` tool format, and tools
  are declared in the ``default`` format; no stop words, no efficient EOS.

Slots are rendered once per tokenizer (cached), so tokenization no longer renders Jinja per row.
Without a chat template LLaMA-Factory falls back to its ``empty`` template, and so does this engine.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.templates.base import Template, TemplateError

logger = logging.getLogger(__name__)

PROBE = "{{content}}"
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"


def chat_template_of(tokenizer: Any) -> str | None:
    """The tokenizer's chat template text when it is a single string (LF ignores a dict of named ones), or None."""
    template = getattr(tokenizer, "chat_template", None)
    return template if isinstance(template, str) and template else None


def added_characters(short: str, long: str) -> str:
    """LLaMA-Factory's ``find_diff``: walking ``long`` while ``short`` still has unmatched characters, the characters
    of ``long`` that differ from the next unmatched one of ``short`` (whatever ``long`` holds after the last match of
    ``short`` is not included)."""
    extra: list[str] = []
    i = 0
    for char in long:
        if i >= len(short):
            break
        if short[i] == char:
            i += 1
        else:
            extra.append(char)
    return "".join(extra)


def _render(tokenizer: Any, messages: list[dict[str, str]], generation: bool) -> str:
    try:
        return tokenizer.apply_chat_template(messages, add_generation_prompt=generation, tokenize=False)
    except Exception as err:  # the chat template's own errors (jinja raise_exception, roles it refuses)
        raise TemplateError(
            f"`template` is not set and the tokenizer's chat template cannot be read into slots ({err}). Set "
            "`template` to the model family's built-in template."
        ) from err


def _escape(slot: str) -> str:
    """A rendered slot as one of our patterns: the probe becomes ``{content}``; nothing else is a placeholder."""
    if "{bos}" in slot or "{eos}" in slot or "{|}" in slot or "{token:" in slot:
        raise TemplateError("The tokenizer's chat template writes literal `{bos}`/`{eos}`/`{token:...}` text; "
                            "set `template` to the model family's built-in template.")
    return slot.replace(PROBE, "{content}")


def parse_chat_template(tokenizer: Any) -> Template:
    """The Template LLaMA-Factory builds from ``tokenizer``'s chat template (see the module docstring)."""
    prefix = tokenizer.decode(tokenizer.encode(""))
    cut = len(prefix)
    system_slot = _render(tokenizer, [{"role": "system", "content": PROBE}], False)[cut:]
    user_slot_empty_system = _render(tokenizer, [{"role": "system", "content": ""},
                                                 {"role": "user", "content": PROBE}], True)[cut:]
    user_slot = _render(tokenizer, [{"role": "user", "content": PROBE}], True)[cut:]
    assistant_slot = _render(tokenizer, [{"role": "user", "content": PROBE},
                                         {"role": "assistant", "content": PROBE}], False)[cut + len(user_slot):]
    reasoning = THINK_OPEN in assistant_slot
    assistant_slot = assistant_slot.replace(THINK_OPEN, "").replace(THINK_CLOSE, "").lstrip("\n")
    default_system = ""
    if len(user_slot) > len(user_slot_empty_system):  # the template writes a system prompt of its own
        default_system = added_characters(user_slot_empty_system, user_slot)
        user_slot = user_slot[len(system_slot.replace(PROBE, default_system, 1)):]
    empty = [name for name, slot in (("system", system_slot), ("user", user_slot), ("assistant", assistant_slot))
             if PROBE not in slot]
    if empty:  # LLaMA-Factory refuses these too ("A placeholder is required in the string formatter")
        raise TemplateError(
            f"`template` is not set and the tokenizer's chat template cannot be read into slots: its {' and '.join(empty)} "
            "turn does not write the message where a slot can hold it (it merges or drops that turn). Set `template` "
            "to the model family's built-in template."
        )
    return Template(
        name="",
        prefix=_escape(prefix),
        system=_escape(system_slot),
        user=_escape(user_slot),
        assistant=_escape(assistant_slot),
        default_system=default_system,
        reasoning=reasoning,
        tool_format="default",
        description="The tokenizer's own chat template, read into slots as LLaMA-Factory does.",
    )


_ATTRIBUTE = "_lf_parsed_chat_template"


def template_from_tokenizer(tokenizer: Any) -> Template:
    """The template for ``template`` left empty: the parsed chat template, or ``empty`` without one."""
    text = chat_template_of(tokenizer)
    if text is None:
        from engine.templates.registry import TEMPLATES

        logger.warning("`template` is not set and the tokenizer has no chat template: using the `empty` template "
                       "(no chat format, as LLaMA-Factory does). Set `template` to the model family's for a chat "
                       "model.")
        return TEMPLATES["empty"]
    cached = getattr(tokenizer, _ATTRIBUTE, None)
    if cached is not None and cached[0] == text:
        return cached[1]
    logger.info("`template` is not set: the tokenizer's chat template is read into slots once, as LLaMA-Factory "
                "does. Set `template` to the model family's for its exact format.")
    template = parse_chat_template(tokenizer)
    try:
        setattr(tokenizer, _ATTRIBUTE, (text, template))
    except AttributeError:
        pass
    return template
