"""Chat templates: how each model family writes a conversation, tool calls and thinking, and how that becomes
loss-masked token ids.

Use ``get_template(name, tokenizer)``: a registered name gives a built-in Template; an empty name reads the
tokenizer's own Jinja chat template into slots as LLaMA-Factory does (``engine.templates.parsed``), so a new family
trains without a registered template and with LLaMA-Factory's ids.
"""

from __future__ import annotations

import difflib
from typing import Any

from engine.templates.base import KEEP, Template, TemplateError, canonical_messages
from engine.templates.parsed import chat_template_of, parse_chat_template, template_from_tokenizer
from engine.templates.registry import TEMPLATES, list_templates
from engine.templates.tool_base import ToolFormat, normalize_calls, normalize_tools
from engine.templates.tool_formats import TOOL_FORMATS, format_calls, format_tools, get_tool_format, parse_calls


def get_template(name: str | None, tokenizer: Any = None, *, enable_thinking: bool | None = KEEP,
                 default_system: str | None = None, tool_format: str | None = None,
                 preserve_thinking: bool | None = None) -> Template:
    """The template called ``name``; None or "" reads ``tokenizer``'s own chat template into slots.

    Args:
        name: A registered template name (case-insensitive), or None/"" for the tokenizer's chat template.
        tokenizer: The model's tokenizer (needed when ``name`` is empty).
        enable_thinking: For reasoning templates: keep thinking (True), drop it (False) or LLaMA-Factory's mixed
            mode (None: a reply's own thought is kept and trained, a reply without one gets the empty block in its
            prompt); left out, the template's default (True).
        default_system: Replaces the template's default system prompt when not None.
        tool_format: Replaces the template's tool format when given.
        preserve_thinking: For reasoning templates: keep history thoughts in single-turn encodings.

    Raises:
        TemplateError: for an unknown name (with the nearest names) or a tokenizer without a chat template.
    """
    if not name or not str(name).strip():
        if tokenizer is None:
            raise TemplateError("No template name and no tokenizer: set `template` (one of: "
                                f"{', '.join(list_templates())}).")
        template: Template = template_from_tokenizer(tokenizer)
    else:
        key = str(name).strip().lower()
        if key not in TEMPLATES:
            near = difflib.get_close_matches(key, list(TEMPLATES), n=3, cutoff=0.5)
            hint = f" Did you mean {' or '.join(repr(n) for n in near)}?" if near else ""
            raise TemplateError(
                f"Unknown template {name!r}.{hint} Valid templates: {', '.join(list_templates())}; or leave "
                "`template` empty to use the tokenizer's own chat template."
            )
        template = TEMPLATES[key]
    return template.with_options(enable_thinking=enable_thinking, default_system=default_system,
                                 tool_format=tool_format, preserve_thinking=preserve_thinking)


__all__ = [
    "KEEP", "TEMPLATES", "TOOL_FORMATS", "Template", "TemplateError", "ToolFormat",
    "canonical_messages", "chat_template_of", "format_calls", "format_tools", "get_template", "get_tool_format",
    "parse_chat_template",
    "list_templates", "normalize_calls", "normalize_tools", "parse_calls",
]
