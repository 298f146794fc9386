"""A template that uses the tokenizer's own Jinja chat template, for families without a registered Template.

The conversation is rendered with ``tokenizer.apply_chat_template``; the assistant replies are found by rendering
each prefix of the conversation (with and without the generation prompt) and comparing it with the full text.
When a chat template rewrites earlier turns (Qwen3 drops old thinking, for instance), a reply is located by its
text instead. The resulting segments feed the same encoding code as the built-in templates.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from engine.templates.base import Segment, Template, TemplateError, canonical_messages
from engine.templates.tool_base import normalize_calls, normalize_tools
from engine.templates.tool_formats import TOOL_FORMATS

logger = logging.getLogger(__name__)


def chat_template_of(tokenizer: Any) -> str | None:
    """The tokenizer's chat template text (the ``default`` one when it holds several), or None."""
    template = getattr(tokenizer, "chat_template", None)
    if isinstance(template, dict):
        template = template.get("default") or next(iter(template.values()), None)
    return template or None


@dataclass(frozen=True)
class TokenizerTemplate(Template):
    """A Template backed by the tokenizer's chat template (``template:`` left empty)."""

    tokenizer: Any = dataclasses.field(default=None, compare=False, repr=False)

    @classmethod
    def from_tokenizer(cls, tokenizer: Any) -> TokenizerTemplate:
        """Wrap ``tokenizer``'s chat template.

        Raises:
            TemplateError: when the tokenizer has no chat template.
        """
        from engine.templates.registry import list_templates

        text = chat_template_of(tokenizer)
        if not text:
            raise TemplateError(
                "The tokenizer has no chat template, so `template` cannot be left empty. Set `template` to the "
                f"model family's format (one of: {', '.join(list_templates())}), or `default` for a base model."
            )
        reasoning = "</think>" in text
        return cls(name="", user="{content}", assistant="{content}", reasoning=reasoning,
                   description="The tokenizer's own chat template.", tokenizer=tokenizer)

    def _to_hf(self, messages: list[dict[str, Any]], system: str | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        system = system or self.default_system
        if system:
            out.append({"role": "system", "content": system})
        for message in messages:
            role = message["role"]
            thinking, content = self._message_thinking(message)
            if role == "user":
                out.append({"role": "user", "content": content})
            elif role == "observation":
                out.append({"role": "tool", "content": content})
            else:
                item: dict[str, Any] = {"role": "assistant", "content": content}
                if role == "function":
                    item["content"] = message.get("text") or ""
                    item["tool_calls"] = [
                        {"type": "function", "function": call} for call in normalize_calls(content)
                    ]
                if thinking is not None and self.enable_thinking:
                    item["reasoning_content"] = thinking
                out.append(item)
        return out

    def segments(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
                 add_generation_prompt: bool = False, tokenizer: Any = None) -> list[Segment]:
        """Render with the tokenizer's chat template and mark the assistant replies as response segments."""
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        canonical, system = canonical_messages(messages, system)
        hf_messages = self._to_hf(canonical, system)
        declared = [{"type": "function", "function": tool} for tool in normalize_tools(tools)] or None

        def apply(conversation: list[dict[str, Any]], generation: bool) -> str:
            try:
                return tokenizer.apply_chat_template(
                    conversation, tools=declared, tokenize=False, add_generation_prompt=generation,
                    enable_thinking=self.enable_thinking,
                )
            except Exception as err:  # the chat template's own errors (jinja raise_exception, bad roles)
                raise TemplateError(
                    f"The tokenizer's chat template cannot render this conversation: {err}. Set `template` to a "
                    "built-in template instead."
                ) from err

        full = apply(hf_messages, add_generation_prompt)
        out: list[Segment] = []
        pos = 0
        for index, message in enumerate(hf_messages):
            if message["role"] != "assistant":
                continue
            span = _locate(full, pos, apply(hf_messages[:index], True), apply(hf_messages[: index + 1], False),
                           message)
            if span is None:
                logger.warning("Could not find assistant turn %d in the rendered chat template; it is not trained.",
                               index)
                continue
            start, end = span
            out.append((full[pos:start], False))
            out.append((full[start:end], True))
            pos = end
        out.append((full[pos:], False))
        return [segment for segment in out if segment[0]]

    def encode_multiturn(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                         tools: Any = None, discard_history: bool = False) -> list[tuple[list[int], list[int]]]:
        """One (prompt_ids, response_ids) pair per assistant turn of the rendered chat template."""
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        pairs: list[tuple[list[int], list[int]]] = []
        pending: list[str] = []
        for text, is_response in self.segments(messages, system, tools, False, tokenizer):
            if not is_response:
                pending.append(text)
                continue
            pairs.append((_encode(tokenizer, "".join(pending)), _encode(tokenizer, text)))
            pending = []
        return pairs

    def encode_oneturn(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                       tools: Any = None) -> tuple[list[int], list[int]]:
        """(prompt_ids, response_ids) for the last assistant turn, everything before it being the prompt."""
        pairs = self.encode_multiturn(tokenizer, messages, system, tools)
        prompt = [token for prompt_ids, response_ids in pairs[:-1] for token in prompt_ids + response_ids]
        return prompt + pairs[-1][0], pairs[-1][1]

    def encode_prompt(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                      tools: Any = None) -> list[int]:
        """Token ids of the conversation with the chat template's generation prompt."""
        tokenizer = tokenizer if tokenizer is not None else self.tokenizer
        canonical, _ = canonical_messages(messages, system)
        if not canonical or canonical[-1]["role"] not in ("user", "observation"):
            raise TemplateError("A generation prompt must end with a user or tool-result message.")
        return _encode(tokenizer, self.render(messages, system, tools, True, tokenizer))

    def render_oneturn(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
                       tokenizer: Any = None) -> str:
        """The chat template's rendering of the conversation."""
        return self.render(messages, system, tools, False, tokenizer)

    def fix_tokenizer(self, tokenizer: Any) -> int:
        """Only sets a missing PAD token (the chat template decides the rest); returns 0."""
        if tokenizer.pad_token is None and tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        return 0

    def parse_reply(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """Content and tool calls, trying every known tool syntax."""
        if self.reasoning:
            text = self.split_thinking(text)[1]
        for fmt in TOOL_FORMATS.values():
            content, calls = fmt.extract(text)
            if calls:
                return content, calls
        return text, []

    def to_jinja(self) -> str:
        """The tokenizer's own chat template."""
        return chat_template_of(self.tokenizer) or ""


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def _locate(full: str, pos: int, prompt: str, upto: str, message: dict[str, Any]) -> tuple[int, int] | None:
    """Where the assistant reply rendered as ``upto[len(prompt):]`` sits in ``full``, at or after ``pos``."""
    if upto.startswith(prompt) and full.startswith(upto) and pos <= len(prompt) < len(upto):
        return len(prompt), len(upto)
    if upto.startswith(prompt) and len(upto) > len(prompt):
        reply = upto[len(prompt):]
        found = full.find(reply, pos)
        if found >= 0:
            return found, found + len(reply)
    content = (message.get("content") or "").strip()
    if not content:
        return None
    found = full.find(content, pos)
    if found < 0:
        return None
    end = found + len(content)
    tail_at = upto.rfind(content)
    tail = upto[tail_at + len(content):] if tail_at >= 0 else ""
    matched = 0
    while matched < len(tail) and end + matched < len(full) and full[end + matched] == tail[matched]:
        matched += 1
    return found, end + matched
