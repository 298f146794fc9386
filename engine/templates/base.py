"""The Template: how one model family writes a conversation, and how that text becomes masked token ids.

A template is a set of patterns (see ``engine.templates.slots``: ``{content}``, ``{bos}``, ``{eos}``,
``{token:NAME}`` and the ``{|}`` boundary). Encoding follows LLaMA-Factory 0.9.5 exactly: every message is turned
into its own list of elements (the first one also carries the prefix and the system turn), every text element is
tokenized on its own, and the messages pair up as (prompt, response). A user or tool-result turn ends with the
generation prompt (``gen_prompt``), as LLaMA-Factory's user slots do.

Messages use the canonical roles of engine/CONTRACTS.md: ``user``, ``assistant``, ``function`` (an assistant turn
that calls tools; its content is a JSON list of ``{"name", "arguments"}``) and ``observation`` (a tool result).
A leading ``system`` message, OpenAI's ``tool`` role and ``tool_calls`` field are accepted too. An assistant or
function message may carry its reasoning in a ``thinking`` (or ``reasoning_content``) field; reasoning templates
write it as a thought block in front of the reply, the way LLaMA-Factory's data carries it inside the content.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import re
from dataclasses import dataclass
from typing import Any

from engine.errors import UserError
from engine.templates.slots import Element, element_ids, element_text, fill, first_text
from engine.templates.tool_base import normalize_calls
from engine.templates.tool_formats import get_tool_format
from engine.wording import with_article

logger = logging.getLogger(__name__)

Segment = tuple[str, bool]
"""A piece of rendered text and whether it is a response (trained) segment."""


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


KEEP: Any = _Keep()
"""``with_options``/``get_template``: keep the template's own ``enable_thinking`` (None there is the mixed mode)."""


class TemplateError(UserError, ValueError):
    """A template name, option or conversation that cannot be used, with a message naming the fix."""


@dataclass(frozen=True)
class Template:
    """A chat format (LLaMA-Factory's ``Template``, ``Llama2Template`` and ``ReasoningTemplate`` in one).

    Attributes:
        name: Registry name.
        user: A user turn, without the assistant header.
        assistant: An assistant reply; it ends with the turn's end marker, which the model must learn to emit.
        gen_prompt: What opens an assistant turn; it is written at the end of every user and tool-result turn.
        system: The system turn; with ``system_in_user`` the text merged before the first user message.
        observation: A tool-result turn ("" means: written like a user turn).
        observation_gen: What follows a tool-result turn (None: ``gen_prompt``).
        function: A tool-calling assistant reply ("" means: written like an assistant reply).
        prefix: Elements at the very start (usually ``{bos}``).
        default_system: System prompt used when a conversation has none.
        system_in_user: The family has no system role: the system text goes into the first user turn.
        stop_words: Strings that end a reply; the first replaces EOS when ``replace_eos`` is set, the others are
            added as special tokens (``fix_tokenizer``).
        replace_eos: Make the first stop word the tokenizer's EOS.
        efficient_eos: Replies carry no EOS: one EOS ends the sequence, and the label of the first prompt token
            of every later turn is the EOS (LLaMA-Factory's ``efficient_eos``).
        append_eos: Older name of ``efficient_eos`` (either one switches it on).
        reasoning: A reasoning family (LLaMA-Factory's ``ReasoningTemplate``): a reply without a thought block
            gets the empty one (trained while thinking is on, in the prompt while it is off), thoughts are
            removed while thinking is off, and history thoughts are kept in multi-turn training.
        thought_words: The strings opening and closing a thought block.
        empty_thought: Whether reasoning templates add the empty thought block to replies without one.
        empty_thought_closes_only: The empty thought block is the closing word alone (GLM-4.7).
        think_signal: Text put at the start of the system turn while thinking is enabled.
        enable_thinking: Keep thinking (trained) or drop it (an empty block then goes into the prompt); None is
            LLaMA-Factory's mixed mode: thoughts are kept and trained where a reply has one, and a reply without one
            gets the empty block in its prompt, untrained.
        preserve_thinking: Keep history thoughts also in single-turn encodings (preference data, generation).
        tool_format: Name of the tool format (see ``engine.templates.tool_formats``).
        tools_pattern: A pattern for the tools exactly as given (JSON text), used instead of the tool format's
            declarations (Phi-4-mini's ``<|tool|>...<|/tool|>``); a run's ``tool_format`` replaces it.
        tool_call_words: Markers around calls written inside a function turn's content (prose before them).
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
    observation_gen: str | None = None
    function: str = ""
    prefix: str = ""
    default_system: str = ""
    system_in_user: bool = False
    stop_words: tuple[str, ...] = ()
    replace_eos: bool = False
    efficient_eos: bool = False
    append_eos: bool = False
    reasoning: bool = False
    thought_words: tuple[str, str] = ("<think>\n", "\n</think>\n\n")
    empty_thought: bool = True
    empty_thought_closes_only: bool = False
    think_signal: str = ""
    enable_thinking: bool | None = True
    preserve_thinking: bool = False
    tool_format: str = "default"
    tools_pattern: str = ""
    tool_call_words: tuple[str, str] = ("<tool_call>", "</tool_call>")
    bos_text: str = ""
    eos_text: str = ""
    modalities: tuple[str, ...] = ()
    description: str = ""

    @property
    def uses_efficient_eos(self) -> bool:
        """Whether replies end without EOS and one EOS closes the sequence."""
        return self.efficient_eos or self.append_eos

    # ----------------------------------------------------------------------------------------------- options
    def with_options(self, *, enable_thinking: bool | None = KEEP, default_system: str | None = None,
                     tool_format: str | None = None, preserve_thinking: bool | None = None) -> Template:
        """A copy with run options applied (None keeps the template's own value, except for ``enable_thinking``,
        where None is the mixed mode and :data:`KEEP`, the default, keeps the template's own value).

        A ``tool_format`` replaces both the declarations and the call turns (written like a reply), as
        LLaMA-Factory's ``tool_format`` option does.

        Raises:
            TemplateError: for an unknown tool format.
        """
        changes: dict[str, Any] = {}
        if enable_thinking is not KEEP:
            changes["enable_thinking"] = None if enable_thinking is None else bool(enable_thinking)
        if preserve_thinking is not None:
            changes["preserve_thinking"] = bool(preserve_thinking)
        if default_system is not None:
            changes["default_system"] = default_system
        if tool_format:
            try:
                get_tool_format(tool_format)
            except ValueError as err:
                raise TemplateError(str(err)) from None
            changes["tool_format"] = tool_format
            changes["tools_pattern"] = ""
            changes["function"] = "{content}" if self.uses_efficient_eos else "{content}{eos}"
        return dataclasses.replace(self, **changes) if changes else self

    # ------------------------------------------------------------------------------------------- thinking
    def add_thought(self, content: str = "") -> str:
        """``content`` behind the empty thought block."""
        if self.empty_thought_closes_only:
            return self.thought_words[1] + content
        return self.thought_words[0] + self.thought_words[1] + content

    def remove_thought(self, content: str) -> str:
        """``content`` without its thought blocks (and the newlines that followed them)."""
        pattern = re.compile(f"{re.escape(self.thought_words[0])}(.*?){re.escape(self.thought_words[1])}", re.DOTALL)
        return re.sub(pattern, "", content).lstrip("\n")

    def _has_thought(self, content: str) -> bool:
        return self.thought_words[0].strip() in content or self.thought_words[1].strip() in content

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
    def system_text(self, system: str | None = None, tools: Any = None) -> str:
        """The system prompt actually used: the given one (or the default) followed by the tool declarations."""
        text = system or self.default_system or ""
        return text + self._tool_text(tools)

    def _tool_text(self, tools: Any) -> str:
        if self.tools_pattern:
            given = tools if isinstance(tools, str) else json.dumps(tools, ensure_ascii=False)
            return first_text(self.tools_pattern, given) if given else ""
        try:
            return get_tool_format(self.tool_format).format_tools(tools)
        except ValueError as err:
            raise TemplateError(f"Cannot read the tools: {err}.") from None

    def reply_text(self, message: dict[str, Any], body: str | None = None) -> str:
        """A reply's text without its thinking (a function turn's calls written in the template's tool format)."""
        if body is None:
            body = self._message_thinking(message)[1]
        if message["role"] != "function":
            return body
        content = self._inline({**message, "content": body, "thinking": None, "reasoning_content": None})
        return self._function_text(content, not self.system_in_user)

    def _function_text(self, content: str, with_words: bool) -> str:
        """A function turn's content written as calls (LLaMA-Factory's FunctionFormatter)."""
        fmt = get_tool_format(self.tool_format)
        words = self.tool_call_words
        match = None
        if with_words and len(words) == 2 and words[0]:
            match = re.search(f"{re.escape(words[0])}(.*?){re.escape(words[1])}", content, re.DOTALL)
        try:
            if match is not None:
                return content.replace(match.group(0), "") + fmt.format_calls(match.group(1))
            thought = None
            if with_words:
                thought = re.search(f"{re.escape(self.thought_words[0])}(.*?){re.escape(self.thought_words[1])}",
                                    content, re.DOTALL)
            body = content.replace(thought.group(0), "") if thought else content
            text = fmt.format_calls(body)
        except ValueError as err:
            raise TemplateError(f"Cannot write a tool-call turn: {err}.") from None
        return thought.group(0) + text if thought else text

    def _inline(self, message: dict[str, Any]) -> str:
        """The message content with a ``thinking`` field (reasoning templates) and prose (``text``) inlined."""
        content = message.get("content") or ""
        thinking = next((message[key] for key in ("thinking", "reasoning_content") if message.get(key) is not None),
                        None)
        if message["role"] == "function" and (message.get("text") or "").strip():
            words = self.tool_call_words
            content = message["text"] + words[0] + content + words[1]
        if thinking is not None and self.reasoning:
            content = self.thought_words[0] + str(thinking) + self.thought_words[1] + content
        return content

    def _prepare(self, messages: list[dict[str, Any]], system: str | None, *, oneturn: bool,
                 discard_history: bool) -> tuple[list[dict[str, Any]], str | None]:
        """Canonical messages with inlined thinking and LLaMA-Factory's thought removal applied."""
        messages, system = canonical_messages(messages, system)  # new dicts: the caller's rows stay as they are
        messages = [dict(message, content=self._inline(message)) if message["role"] in ("assistant", "function")
                    else message for message in messages]
        if not self.reasoning:
            return messages, system
        replies = [i for i, m in enumerate(messages) if m["role"] in ("assistant", "function")]
        last = replies[-1] if replies and replies[-1] == len(messages) - 1 else None
        for index in replies:
            history = index != last
            strip = self.enable_thinking is False  # None (mixed) keeps thoughts, as LLaMA-Factory's `is False`
            if oneturn and history:  # single-turn history: only preserve_thinking decides, thinking on or off
                strip = not self.preserve_thinking
            if not oneturn and discard_history and history:
                strip = True
            if strip:
                messages[index]["content"] = self.remove_thought(messages[index]["content"])
        return messages, system

    def _elements(self, messages: list[dict[str, Any]], system: str | None, tools: Any) -> list[list[Element]]:
        """One element list per message (LLaMA-Factory's ``_encode`` before tokenization)."""
        system = system or self.default_system
        has_tools = bool(tools) if not isinstance(tools, str) else bool(tools.strip())
        tool_text = self._tool_text(tools) if has_tools else ""
        signal = self.think_signal if self.enable_thinking else ""
        out: list[list[Element]] = []
        for index, message in enumerate(messages):
            elements: list[Element] = []
            merged = ""
            if index == 0:
                elements += fill(self.prefix)
                if system or has_tools or signal:
                    if self.system_in_user:
                        merged = first_text(self.system, signal + (system or "") + tool_text)
                    else:
                        elements += fill(self.system, signal + (system or "") + tool_text)
            role = message["role"]
            content = message.get("content") or ""
            if role == "user":
                elements += fill(self.user + self.gen_prompt, merged + content)
            elif role == "observation":
                gen = self.gen_prompt if self.observation_gen is None else self.observation_gen
                elements += fill((self.observation or self.user) + gen, content)
            elif role == "function":
                elements += fill(self.function or self.assistant,
                                 self._function_text(content, not self.system_in_user))
            else:
                elements += fill(self.assistant, content)
            out.append(elements)
        return out

    def _with_thoughts(self, messages: list[dict[str, Any]], elements: list[list[Element]],
                       turns: list[int]) -> list[list[Element]]:
        """Add the empty thought block to the replies at ``turns`` that have none (reasoning templates)."""
        if not (self.reasoning and self.empty_thought):
            return elements
        block = self.add_thought()
        for reply in turns:
            if reply >= len(messages) or self._has_thought(messages[reply].get("content") or ""):
                continue
            if self.enable_thinking:
                elements[reply] = [block] + elements[reply]
            else:
                elements[reply - 1] = elements[reply - 1] + [block]
        return elements

    def message_elements(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None, *,
                         oneturn: bool = False, discard_history: bool = False) -> list[list[Element]]:
        """Per-message elements as LLaMA-Factory encodes them.

        Args:
            oneturn: Single-turn semantics (``encode_oneturn``: preference data, generation prompts): history
                thoughts are removed unless ``preserve_thinking`` and only the last reply gets the empty thought.
            discard_history: Multi-turn with history thoughts removed (``mask_history``); only the last reply gets
                the empty thought.
        """
        prepared, system = self._prepare(messages, system, oneturn=oneturn, discard_history=discard_history)
        for index, message in enumerate(prepared):
            expected = ("user", "observation") if index % 2 == 0 else ("assistant", "function")
            if message["role"] not in expected:
                raise TemplateError(
                    f"Message {index} is {with_article(message['role'])} turn where "
                    f"{with_article(' or '.join(expected))} turn belongs: turns must alternate (user or tool result, "
                    "then assistant or tool call)."
                )
        elements = self._elements(prepared, system, tools)
        replies = list(range(1, len(prepared), 2))
        if oneturn or discard_history:
            replies = [index for index in replies[-1:] if index == len(prepared) - 1]
        return self._with_thoughts(prepared, elements, replies)

    def segments(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
                 add_generation_prompt: bool = False, tokenizer: Any = None) -> list[Segment]:
        """The conversation as (text, is_response) pieces, one per message (multi-turn training semantics).

        A conversation ending with a user or tool-result turn ends with the generation prompt (it is part of
        that turn); ``add_generation_prompt`` then also adds the empty thought of a reasoning template whose
        thinking is off, as a generation prompt does.
        """
        canonical, _ = canonical_messages(messages, system)
        open_end = bool(canonical) and canonical[-1]["role"] in ("user", "observation")
        if open_end and add_generation_prompt:
            elements = self.message_elements(messages + [{"role": "assistant", "content": ""}], system, tools,
                                             oneturn=True)[:-1]
        else:
            elements = self.message_elements(messages, system, tools)
        return [(element_text(items, tokenizer, self.bos_text, self.eos_text), index % 2 == 1)
                for index, items in enumerate(elements)]

    def render(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
               add_generation_prompt: bool = False, tokenizer: Any = None) -> str:
        """The conversation as text (``{bos}``/``{eos}`` from ``tokenizer`` when given)."""
        return "".join(text for text, _ in self.segments(messages, system, tools, add_generation_prompt, tokenizer))

    def render_oneturn(self, messages: list[dict[str, Any]], system: str | None = None, tools: Any = None,
                       tokenizer: Any = None, add_generation_prompt: bool = False) -> str:
        """The text of ``encode_oneturn`` (inference semantics: history thoughts removed unless
        ``preserve_thinking``); a conversation ending with a user turn and ``add_generation_prompt`` is written as
        ``encode_prompt`` writes it. This is what the exported Jinja chat template reproduces."""
        canonical, _ = canonical_messages(messages, system)
        if add_generation_prompt and canonical and canonical[-1]["role"] in ("user", "observation"):
            elements = self.message_elements(messages + [{"role": "assistant", "content": ""}], system, tools,
                                             oneturn=True)[:-1]
        else:
            elements = self.message_elements(messages, system, tools, oneturn=True)
        return "".join(element_text(items, tokenizer, self.bos_text, self.eos_text) for items in elements)

    # ----------------------------------------------------------------------------------------- encoding
    def encode_multiturn(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                         tools: Any = None, discard_history: bool = False) -> list[tuple[list[int], list[int]]]:
        """One (prompt_ids, response_ids) pair per assistant/function turn, exactly as LLaMA-Factory encodes them.

        A trailing user turn (without its reply) is not included.
        """
        elements = self.message_elements(messages, system, tools, discard_history=discard_history)
        ids = [element_ids(tokenizer, items) for items in elements]
        return [(ids[i], ids[i + 1]) for i in range(0, len(ids) - 1, 2)]

    def encode_oneturn(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                       tools: Any = None) -> tuple[list[int], list[int]]:
        """(prompt_ids, response_ids): every message before the last reply, and the last reply."""
        elements = self.message_elements(messages, system, tools, oneturn=True)
        ids = [element_ids(tokenizer, items) for items in elements]
        return [token for part in ids[:-1] for token in part], ids[-1]

    def encode_prompt(self, tokenizer: Any, messages: list[dict[str, Any]], system: str | None = None,
                      tools: Any = None) -> list[int]:
        """Token ids of a conversation ending with a user/observation turn, plus the generation prompt.

        Raises:
            TemplateError: when the last message is not a user or observation turn.
        """
        canonical, _ = canonical_messages(messages, system)
        if not canonical or canonical[-1]["role"] not in ("user", "observation"):
            raise TemplateError("A generation prompt must end with a user or tool-result message.")
        return self.encode_oneturn(tokenizer, messages + [{"role": "assistant", "content": ""}], system, tools)[0]

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
        """Set EOS and PAD and register stop words, as LLaMA-Factory's ``fix_special_tokens`` does.

        With ``replace_eos`` the first stop word becomes EOS; a tokenizer without EOS gets ``<|endoftext|>``; PAD
        falls back to EOS; the other stop words are added as special tokens.

        Returns:
            The number of tokens added to the vocabulary (the model's embeddings must then be resized).

        Raises:
            TemplateError: when ``replace_eos`` is set without stop words.
        """
        added = 0
        stop_words = list(self.stop_words)
        if self.replace_eos:
            if not stop_words:
                raise TemplateError(f"Template {self.name}: replace_eos needs at least one stop word.")
            added += _set_eos(tokenizer, stop_words.pop(0), self.name)
        if tokenizer.eos_token_id is None:
            added += _set_eos(tokenizer, "<|endoftext|>", self.name)
        if tokenizer.pad_token_id is None:
            tokenizer.pad_token = tokenizer.eos_token
            logger.info("Template %s: PAD token set to %s.", self.name, tokenizer.pad_token)
        if stop_words:
            try:
                added += tokenizer.add_special_tokens({"additional_special_tokens": stop_words},
                                                      replace_additional_special_tokens=False)
            except TypeError:  # transformers 5 has no such flag (LLaMA-Factory falls back the same way)
                added += tokenizer.add_special_tokens({"additional_special_tokens": stop_words})
            logger.info("Template %s: stop words %s registered as special tokens.", self.name, ", ".join(stop_words))
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
        """A Jinja chat template that makes ``tokenizer.apply_chat_template`` reproduce ``render_oneturn``."""
        from engine.templates.jinja import template_to_jinja

        return template_to_jinja(self)


def _set_eos(tokenizer: Any, token: str, name: str) -> int:
    """Make ``token`` the EOS token (added to the vocabulary when missing); returns the number of added tokens."""
    if tokenizer.eos_token == token:
        return 0
    added = tokenizer.add_special_tokens({"eos_token": token})
    logger.info("Template %s: EOS token set to %s.", name, token)
    return added


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
