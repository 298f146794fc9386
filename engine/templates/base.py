"""The Template: how one model family writes a conversation, and how that text becomes masked token ids.

A template is a set of text patterns with placeholders: ``{content}`` (the message text), ``{bos}`` and ``{eos}``
(the tokenizer's BOS/EOS tokens; literal fallbacks are used when rendering without a tokenizer). A conversation is
rendered as a list of segments, each marked as prompt or response; the response segments are the assistant and
tool-call turns, which are the only ones trained by default. Rendering, training ids, generation prompts and the
exported Jinja chat template all come from the same segments, so they cannot drift apart.

Messages use the canonical roles of engine/CONTRACTS.md: ``user``, ``assistant``, ``function`` (an assistant turn
that calls tools; its content is a JSON list of ``{"name", "arguments"}``) and ``observation`` (a tool result).
A leading ``system`` message, OpenAI's ``tool`` role and ``tool_calls`` field are accepted too. An assistant or
function message may carry its reasoning in a ``thinking`` (or ``reasoning_content``) field.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any

from engine.errors import UserError
from engine.templates.tool_base import normalize_calls, normalize_tools
from engine.templates.tool_formats import get_tool_format

logger = logging.getLogger(__name__)

Segment = tuple[str, bool]
"""A piece of rendered text and whether it is a response (trained) segment."""


class TemplateError(UserError, ValueError):
    """A template name, option or conversation that cannot be used, with a message naming the fix."""


@dataclass(frozen=True)
class Template:
    """A chat format. Patterns hold ``{content}``, ``{bos}`` and ``{eos}`` placeholders.

    Attributes:
        name: Registry name.
        user: A user turn (without the assistant header).
        assistant: An assistant reply; it ends with the turn's end marker, which the model must learn to emit.
        gen_prompt: What opens an assistant turn (the "generation prompt").
        system: The system turn; with ``system_in_user`` the text merged before the first user message.
        observation: A tool-result turn ("" means: written like a user turn).
        function: A tool-calling assistant reply ("" means: written like an assistant reply).
        prefix: Text at the very start (usually the BOS token).
        default_system: System prompt used when a conversation has none.
        system_in_user: The family has no system role: the system text goes into the first user turn.
        stop_words: Strings that end a reply; the first replaces EOS when ``replace_eos`` is set.
        replace_eos: Make the first stop word the tokenizer's EOS (``fix_tokenizer``).
        append_eos: Add the EOS token id after every trained reply (families whose turns have no end marker;
            the EOS is not part of the rendered text).
        reasoning: A reasoning family: thinking inside the content is recognised, history turns lose their
            thinking, and the last reply gets an empty thought block when it has none (if ``empty_thought``).
        thought_words: The strings opening and closing a thought block.
        empty_thought: Whether a reply without thinking is written with an empty thought block.
        think_signal: Text put at the start of the system turn while thinking is enabled (Gemma 4's ``<|think|>``).
        enable_thinking: Keep thinking (trained) or drop it (an empty block then goes into the prompt).
        tool_format: Name of the tool format (see ``engine.templates.tool_formats``).
        bos_text: The family's BOS string, used for ``{bos}`` when rendering without a tokenizer.
        eos_text: The family's EOS string, used for ``{eos}`` when rendering without a tokenizer.
        modalities: Non-text inputs the family's multimodal models take.
        description: One line for the board's dropdown.
    """

    name: str
    user: str
    assistant: str
    gen_prompt: str = ""
    system: str = "{content}"
    observation: str = ""
    function: str = ""
    prefix: str = ""
    default_system: str = ""
    system_in_user: bool = False
    stop_words: tuple[str, ...] = ()
    replace_eos: bool = False
    append_eos: bool = False
    reasoning: bool = False
    thought_words: tuple[str, str] = ("<think>\n", "\n</think>\n\n")
    empty_thought: bool = False
    think_signal: str = ""
    enable_thinking: bool = True
    tool_format: str = "default"
    bos_text: str = ""
    eos_text: str = ""
    modalities: tuple[str, ...] = ()
    description: str = ""

    # ----------------------------------------------------------------------------------------------- options
    def with_options(self, *, enable_thinking: bool | None = None, default_system: str | None = None,
                     tool_format: str | None = None) -> Template:
        """A copy with run options applied (None keeps the template's own value).

        Raises:
            TemplateError: for an unknown tool format.
        """
        changes: dict[str, Any] = {}
        if enable_thinking is not None:
            changes["enable_thinking"] = bool(enable_thinking)
        if default_system is not None:
            changes["default_system"] = default_system
        if tool_format:
            try:
                get_tool_format(tool_format)
            except ValueError as err:
                raise TemplateError(str(err)) from None
            changes["tool_format"] = tool_format
        return dataclasses.replace(self, **changes) if changes else self

    # ------------------------------------------------------------------------------------------- thinking
    def split_thinking(self, text: str) -> tuple[str, str]:
        """Split generated text into (thinking, answer); thinking is "" when there is no thought block.

        The opening marker may be missing (it is often part of the generation prompt); the closing one decides.
        """
        open_mark, close_mark = (word.strip() for word in self.thought_words)
        if close_mark and close_mark in text:
            thinking = text.split(close_mark)[0].rstrip("\n").split(open_mark)[-1].lstrip("\n")
            return thinking, text.split(close_mark)[-1].lstrip("\n")
        if open_mark and text.lstrip().startswith(open_mark):
            return text.lstrip()[len(open_mark):].lstrip("\n"), ""
        return "", text

    def _message_thinking(self, message: dict[str, Any]) -> tuple[str | None, str]:
        """The message's thinking (None when it has none) and its content without the thought block."""
        content = message.get("content") or ""
        for key in ("thinking", "reasoning_content"):
            if message.get(key) is not None:
                return str(message[key]), content
        if self.reasoning and isinstance(content, str) and self.thought_words[1].strip() in content:
            return self.split_thinking(content)
        return None, content

    # ------------------------------------------------------------------------------------------ rendering
    def _special(self, tokenizer: Any) -> tuple[str, str]:
        if tokenizer is None:
            return self.bos_text, self.eos_text
        return tokenizer.bos_token or "", tokenizer.eos_token or ""

    @staticmethod
    def _fill(pattern: str, content: str, special: tuple[str, str]) -> str:
        pattern = pattern.replace("{bos}", special[0]).replace("{eos}", special[1])
        return content.join(pattern.split("{content}"))

    def system_text(self, system: str | None = None, tools: Any = None) -> str:
        """The system prompt actually used: the given one (or the default) plus the tool declarations."""
        text = system or self.default_system or ""
        try:
            declared = normalize_tools(tools)
        except ValueError as err:
            raise TemplateError(f"Cannot read the tools: {err}.") from None
        if declared:
            block = get_tool_format(self.tool_format).format_tools(declared)
            text = f"{text}\n\n{block}" if text else block
        return text

    def reply_text(self, message: dict[str, Any], body: str | None = None) -> str:
        """A reply's text without thinking; a function turn's calls written in the template's tool format."""
        if body is None:
            body = self._message_thinking(message)[1]
        if message["role"] != "function":
            return body
        try:
            calls = normalize_calls(body)
        except ValueError as err:
            raise TemplateError(f"Cannot write a tool-call turn: {err}.") from None
        text = get_tool_format(self.tool_format).format_calls(calls)
        prose = message.get("text") or ""
        return f"{prose.rstrip()}\n{text}" if prose and prose.strip() else text

    def segments(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
                 add_generation_prompt: bool = False, tokenizer: Any = None) -> list[Segment]:
        """The conversation as (text, is_response) pieces; their concatenation is the rendered text."""
        messages, system = canonical_messages(messages, system)
        special = self._special(tokenizer)
        sys_text = self.system_text(system, tools)
        think_on = self.enable_thinking
        out: list[Segment] = []
        if self.prefix:
            out.append((self._fill(self.prefix, "", special), False))
        signal = self.think_signal if think_on else ""
        if (sys_text or signal) and not self.system_in_user:
            out.append((self._fill(self.system, signal + sys_text, special), False))
        merge_system = bool(sys_text) and self.system_in_user
        last_user = max((i for i, m in enumerate(messages) if m["role"] == "user"), default=-1)
        block = "".join(self.thought_words)
        for index, message in enumerate(messages):
            role = message["role"]
            if role == "user":
                content = message["content"]
                if merge_system:
                    content = self._fill(self.system, sys_text, special) + content
                    merge_system = False
                out.append((self._fill(self.user, content, special), False))
            elif role == "observation":
                out.append((self._fill(self.observation or self.user, message["content"], special), False))
            else:
                thinking, body = self._message_thinking(message)
                body = self.reply_text(message, body)
                current = index > last_user
                if not (current and think_on):
                    thinking = None
                prompt = self._fill(self.gen_prompt, "", special)
                if thinking is not None:
                    body = self.thought_words[0] + thinking.strip("\n") + self.thought_words[1] + body
                elif self.reasoning and self.empty_thought and current and index == len(messages) - 1:
                    if think_on:
                        body = block + body
                    else:
                        prompt += block
                pattern = self.function if role == "function" and self.function else self.assistant
                if prompt:
                    out.append((prompt, False))
                out.append((self._fill(pattern, body, special), True))
        if add_generation_prompt:
            prompt = self._fill(self.gen_prompt, "", special)
            if self.reasoning and self.empty_thought and not think_on:
                prompt += block
            if prompt:
                out.append((prompt, False))
        return out

    def render(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
               add_generation_prompt: bool = False, tokenizer: Any = None) -> str:
        """The conversation as text (``{bos}``/``{eos}`` from ``tokenizer`` when given)."""
        return "".join(text for text, _ in self.segments(messages, system, tools, add_generation_prompt, tokenizer))

    # ----------------------------------------------------------------------------------------- encoding
    def encode_multiturn(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                         tools: Any = None) -> list[tuple[list[int], list[int]]]:
        """One (prompt_ids, response_ids) pair per assistant/function turn; their concatenation is the sequence.

        Text after the last reply (a trailing user turn) is not included.
        """
        eos_id = tokenizer.eos_token_id if self.append_eos else None
        pairs: list[tuple[list[int], list[int]]] = []
        pending: list[str] = []
        for text, is_response in self.segments(messages, system, tools, False, tokenizer):
            if not is_response:
                pending.append(text)
                continue
            response = _encode(tokenizer, text)
            if eos_id is not None:
                response.append(eos_id)
            pairs.append((_encode(tokenizer, "".join(pending)), response))
            pending = []
        return pairs

    def encode_prompt(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                      tools: Any = None) -> list[int]:
        """Token ids of a conversation ending with a user/observation turn, plus the generation prompt.

        Raises:
            TemplateError: when the last message is not a user or observation turn.
        """
        canonical, _ = canonical_messages(messages, system)
        if not canonical or canonical[-1]["role"] not in ("user", "observation"):
            raise TemplateError("A generation prompt must end with a user or tool-result message.")
        eos_id = tokenizer.eos_token_id if self.append_eos else None
        ids: list[int] = []
        pending: list[str] = []
        for text, is_response in self.segments(messages, system, tools, True, tokenizer):
            if not is_response:
                pending.append(text)
                continue
            ids += _encode(tokenizer, "".join(pending)) + _encode(tokenizer, text)
            if eos_id is not None:
                ids.append(eos_id)
            pending = []
        return ids + _encode(tokenizer, "".join(pending))

    # ------------------------------------------------------------------------------------------- tokens
    def get_stop_token_ids(self, tokenizer: Any) -> list[int]:
        """EOS plus every stop word that is a single token in ``tokenizer``."""
        ids: list[int] = []
        if tokenizer.eos_token_id is not None:
            ids.append(tokenizer.eos_token_id)
        vocab = tokenizer.get_vocab()
        for word in self.stop_words:
            token_id = vocab.get(word)
            if token_id is not None and token_id not in ids:
                ids.append(token_id)
        return ids

    def fix_tokenizer(self, tokenizer: Any) -> int:
        """Set EOS (a stop word when ``replace_eos``) and PAD; add missing stop words as special tokens.

        Returns:
            The number of tokens added to the vocabulary (the model's embeddings must then be resized).
        """
        added = 0
        target = None
        if self.replace_eos and self.stop_words:
            target = self.stop_words[0]
        elif tokenizer.eos_token is None:
            target = "<|endoftext|>"
        if target is not None and target != tokenizer.eos_token:
            added += tokenizer.add_special_tokens({"eos_token": target})
            logger.info("Template %s: EOS token set to %s.", self.name, target)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
            logger.info("Template %s: PAD token set to %s.", self.name, tokenizer.pad_token)
        vocab = tokenizer.get_vocab()
        missing = [word for word in self.stop_words if word not in vocab]
        if missing:
            added += tokenizer.add_special_tokens({"extra_special_tokens": missing}, replace_extra_special_tokens=False)
            logger.warning("Template %s: added stop words %s to the vocabulary.", self.name, ", ".join(missing))
        return added

    # ---------------------------------------------------------------------------------------- replies
    def parse_reply(self, text: str) -> tuple[str, list[dict[str, Any]]]:
        """Split generated text into its content and tool calls (``{"name", "arguments": dict}``).

        Thinking is removed from the content of reasoning templates (see ``split_thinking``) and trailing
        stop words are stripped.
        """
        for word in self.stop_words:
            if text.endswith(word):
                text = text[: -len(word)]
        if self.reasoning:
            text = self.split_thinking(text)[1]
        return get_tool_format(self.tool_format).extract(text)

    def to_jinja(self) -> str:
        """A Jinja chat template that makes ``tokenizer.apply_chat_template`` reproduce ``render``."""
        from engine.templates.jinja import template_to_jinja

        return template_to_jinja(self)


def _encode(tokenizer: Any, text: str) -> list[int]:
    return list(tokenizer.encode(text, add_special_tokens=False)) if text else []


def canonical_messages(messages: list[dict[str, Any]], system: str | None = None) -> tuple[list[dict], str | None]:
    """Canonical messages and system prompt: a leading ``system`` message is moved out, OpenAI's ``tool`` role
    becomes ``observation`` and an assistant message with ``tool_calls`` becomes a ``function`` turn.

    Raises:
        TemplateError: for an unknown role, a system message elsewhere than first, or non-text content.
    """
    out: list[dict[str, Any]] = []
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "system":
            if index != 0:
                raise TemplateError("A system message may only come first; move it to the start or drop it.")
            system = system or message.get("content") or ""
            continue
        message = dict(message)
        if role == "tool":
            message["role"] = role = "observation"
        if role == "assistant" and message.get("tool_calls"):
            message["role"] = role = "function"
            message["text"] = message.get("content") or ""
            message["content"] = json.dumps(normalize_calls(message["tool_calls"]), ensure_ascii=False)
            message.pop("tool_calls")
        if role not in ("user", "assistant", "function", "observation"):
            raise TemplateError(f"Unknown message role {role!r}: use user, assistant, function or observation.")
        content = message.get("content")
        if content is None:
            message["content"] = ""
        elif not isinstance(content, str):
            raise TemplateError(f"Message {index} has non-text content; convert it to a string first.")
        out.append(message)
    return out, system
