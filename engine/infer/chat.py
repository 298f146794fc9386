"""Chat with a model: load base + adapters for inference, stream replies, parse tool calls and thinking.

:class:`ChatModel` is used by the terminal chat, the OpenAI-compatible server and the board's chat tab (through a
worker process). Generation runs in a background thread and feeds a ``TextIteratorStreamer``; a stop event ends it
early (a user pressing stop, a client going away, a stop string matching).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch
from transformers import StoppingCriteria, StoppingCriteriaList, TextIteratorStreamer

from engine.config import RunConfig
from engine.infer.generation import generation_kwargs, stop_token_ids, template_for
from engine.templates.tool_base import loads

logger = logging.getLogger(__name__)

ROLES = ("user", "assistant", "function", "observation")
PROMPT_ROLES = ("user", "observation")
REPLY_ROLES = ("assistant", "function")


@dataclass
class Reply:
    """A finished reply.

    Attributes:
        text: The answer shown to the user (thinking and tool-call markup removed).
        tool_calls: Parsed tool calls, each ``{"name": str, "arguments": dict}``.
        thinking: The reasoning part for thinking templates ("" otherwise).
        prompt_tokens: Tokens in the encoded prompt.
        completion_tokens: Tokens generated (the stop token included).
        finish_reason: ``stop`` (a stop token or stop string), ``length`` (max_new_tokens reached),
            ``tool_calls`` (the reply calls tools) or ``cancelled`` (stopped by request).
    """

    text: str
    tool_calls: list[dict[str, Any]] = field(default_factory=list)
    thinking: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    finish_reason: str = "stop"


def check_messages(messages: Any) -> list[dict[str, str]]:
    """Validate a conversation for generation and return it as plain ``{"role", "content"}`` dicts.

    Args:
        messages: A list of ``{"role": ..., "content": ...}``; roles user/assistant/function/observation
            (the system prompt is passed separately). It must end with a user or observation turn.

    Returns:
        The messages, each with exactly ``role`` and ``content`` (content as text).

    Raises:
        ValueError: With a message naming the first problem.
    """
    if not isinstance(messages, list) or not messages:
        raise ValueError("`messages` must be a non-empty list of {role, content} objects.")
    out = []
    for index, message in enumerate(messages):
        if not isinstance(message, dict):
            raise ValueError(f"Message {index} must be an object with `role` and `content`.")
        role, content = message.get("role"), message.get("content")
        if role not in ROLES:
            raise ValueError(f"Message {index} has role {role!r}; use one of {', '.join(ROLES)}.")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ValueError(f"Message {index} ({role}) must have text content, not {type(content).__name__}.")
        out.append({"role": role, "content": content})
    if out[-1]["role"] not in PROMPT_ROLES:
        raise ValueError(
            f"The last message must come from the user or a tool (observation), not {out[-1]['role']!r}: "
            "the model replies to it."
        )
    return out


class _EventStop(StoppingCriteria):
    """Stops generation when any of its events is set."""

    def __init__(self, *events: threading.Event | None):
        self.events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(event.is_set() for event in self.events)

    def __call__(self, input_ids: torch.LongTensor, scores: Any = None, **kwargs: Any) -> torch.BoolTensor:
        return torch.full((input_ids.shape[0],), self.is_set(), dtype=torch.bool, device=input_ids.device)


INCOMPLETE = "\ufffd"
"""What a decoder shows for the first bytes of a character whose other bytes are not generated yet."""


class _ReplyStreamer(TextIteratorStreamer):
    """A text streamer that keeps the generated ids and leaves stop tokens out of the text."""

    def __init__(self, tokenizer: Any, stop_ids: list[int], **decode_kwargs: Any):
        super().__init__(tokenizer, skip_prompt=True, **decode_kwargs)
        self.stop_ids = set(stop_ids)
        self.generated: list[int] = []

    def put(self, value: torch.Tensor) -> None:
        if self.next_tokens_are_prompt:
            self.next_tokens_are_prompt = False
            return
        ids = [int(i) for i in value.reshape(-1).tolist()]
        self.generated.extend(ids)
        kept = [i for i in ids if i not in self.stop_ids]
        if kept:
            super().put(torch.tensor(kept))

    def on_finalized_text(self, text: str, stream_end: bool = False) -> None:
        # A piece never ends inside a multi-byte character: the tokens so far may hold only its first bytes, which
        # decode to U+FFFD. Hold such a tail back (``print_len`` rewinds, so the next decode prints it whole); at
        # the end of the stream an incomplete character is dropped rather than shown broken.
        held = len(text) - len(text.rstrip(INCOMPLETE))
        if held and not stream_end and self.token_cache and self.print_len >= held:
            self.print_len -= held
            text = text[:-held]
        elif held and stream_end:
            text = text[:-held]
        super().on_finalized_text(text, stream_end)


class _StopStrings:
    """Cuts a text stream at the first of several stop strings, holding back text that may start one."""

    def __init__(self, stops: list[str]):
        self.stops = [s for s in stops if s]
        self.pending = ""
        self.hit = False

    def feed(self, piece: str) -> str:
        if not self.stops:
            return piece
        self.pending += piece
        cuts = [self.pending.find(s) for s in self.stops if s in self.pending]
        if cuts:
            self.hit = True
            out, self.pending = self.pending[: min(cuts)], ""
            return out
        hold = 0
        for stop in self.stops:
            for size in range(min(len(stop) - 1, len(self.pending)), 0, -1):
                if self.pending.endswith(stop[:size]):
                    hold = max(hold, size)
                    break
        out = self.pending[: len(self.pending) - hold]
        self.pending = self.pending[len(out) :]
        return out

    def flush(self) -> str:
        out, self.pending = self.pending, ""
        return out


class Generation:
    """One reply being generated in a background thread. Iterate it for text pieces.

    Iterating again continues where the last loop stopped (there is one underlying stream). When the stream
    ends, ``text``, ``prompt_tokens``, ``completion_tokens``, ``generated_ids`` and ``finish_reason`` describe
    the reply. :meth:`cancel` asks the thread to stop; :meth:`close` also ends the stream and waits for the
    thread, so it is safe to call from any error path.
    """

    def __init__(self, chat_model: ChatModel, prompt_ids: list[int], kwargs: dict[str, Any], stop: list[str],
                 stop_event: threading.Event | None):
        self.prompt_tokens = len(prompt_ids)
        self.max_new_tokens = kwargs["max_new_tokens"]
        self.stop_ids = list(chat_model.stop_ids)
        self.stop_strings = [s for s in stop if s]
        self.text = ""
        self.finish_reason = "stop"
        self.error: BaseException | None = None
        self._cancel = threading.Event()
        self._stopper = _EventStop(self._cancel, stop_event)
        self._filter = _StopStrings(self.stop_strings)
        self._streamer = _ReplyStreamer(
            chat_model.tokenizer, self.stop_ids, skip_special_tokens=chat_model.skip_special_tokens
        )
        input_ids = torch.tensor([prompt_ids], dtype=torch.long, device=chat_model.device)
        generate_kwargs = {
            "input_ids": input_ids,
            "attention_mask": torch.ones_like(input_ids),
            "streamer": self._streamer,
            "stopping_criteria": StoppingCriteriaList([self._stopper]),
            **kwargs,
        }
        self._thread = threading.Thread(
            target=self._run, args=(chat_model.model, generate_kwargs), name="lf-generate", daemon=True
        )
        self._thread.start()
        self._pieces = self._stream()

    def _run(self, model: Any, generate_kwargs: dict[str, Any]) -> None:
        try:
            with torch.inference_mode():
                model.generate(**generate_kwargs)
        except BaseException as err:  # surfaced to the consumer when the stream ends
            self.error = err
            self._streamer.end()

    @property
    def generated_ids(self) -> list[int]:
        """Ids generated so far (the stop token included)."""
        return list(self._streamer.generated)

    @property
    def completion_tokens(self) -> int:
        return len(self._streamer.generated)

    def cancel(self) -> None:
        """Ask the generation to stop after the current token."""
        self._cancel.set()

    def close(self) -> None:
        """Stop the generation, end the stream and wait for the background thread."""
        self.cancel()
        self._pieces.close()
        self._thread.join()

    def wait(self) -> None:
        """Consume the rest of the stream (the text still accumulates in ``text``)."""
        for _ in self._pieces:
            pass

    def __iter__(self) -> Iterator[str]:
        return self._pieces

    def _stream(self) -> Iterator[str]:
        completed = False
        try:
            for piece in self._streamer:
                out = self._filter.feed(piece)
                if out:
                    self.text += out
                    yield out
                if self._filter.hit:
                    break
            if not self._filter.hit:
                tail = self._filter.flush()
                if tail:
                    self.text += tail
                    yield tail
            completed = True
        finally:
            # Reached at the end, when the consumer closes the stream early, and on errors.
            cancelled = self._stopper.is_set() or not completed
            self._cancel.set()
            self._thread.join()
            self.finish_reason = self._finish_reason(cancelled)
        if self.error is not None:
            raise self.error

    def _finish_reason(self, cancelled: bool) -> str:
        generated = self._streamer.generated
        if self._filter.hit or (generated and generated[-1] in self.stop_ids):
            return "stop"
        if cancelled:
            return "cancelled"
        return "length" if len(generated) >= self.max_new_tokens else "stop"


class ChatModel:
    """A model loaded for chatting, with its tokenizer and prompt template.

    Args:
        cfg: The run config: ``model`` (base, adapters, template, infer_dtype), ``generation`` (sampling) and
            the template options of ``data`` (default_system, enable_thinking, tool_format) are used.
        model: An already loaded model to use instead of loading one (the tokenizer must then be given too).
        tokenizer: An already loaded tokenizer.
    """

    def __init__(self, cfg: RunConfig, *, model: Any = None, tokenizer: Any = None):
        self.cfg = cfg
        started = time.perf_counter()
        if tokenizer is None:
            from engine.models import load_tokenizer

            tokenizer = load_tokenizer(cfg.model)
        self.tokenizer = tokenizer
        self.template = template_for(cfg, tokenizer)
        if model is None:
            model = self._load_model()
        self.model = model.eval()
        self.device = _model_device(model)
        self.stop_ids = stop_token_ids(self.template, tokenizer)
        self.skip_special_tokens = cfg.generation.skip_special_tokens
        self.media = None  # engine.multimodal.dataset.MediaContext for a vision-language model
        if getattr(model, "config", None) is not None and any(
                getattr(model.config, key, None) for key in ("vision_config", "audio_config")):
            from engine.multimodal import media_context

            self.media = media_context(cfg, tokenizer)
        logger.info("Chat model ready on %s in %.1fs.", self.device, time.perf_counter() - started)

    def _load_model(self) -> Any:
        from engine.devices import current_device
        from engine.models import load_model

        model = load_model(self.cfg.model, self.cfg.finetuning, self.tokenizer, is_trainable=False,
                           methods=getattr(self.cfg, "methods", None))
        if not getattr(model, "hf_device_map", None) and _model_device(model) != current_device():
            model = model.to(current_device())
        return model

    @property
    def model_name(self) -> str:
        """A short name for the loaded model (base folder name plus adapter names)."""
        base = str(self.cfg.model.model_name_or_path).rstrip("/").split("/")[-1] or "model"
        adapters = [a.strip().rstrip("/").split("/")[-1] for a in (self.cfg.model.adapter_name_or_path or "").split(",")]
        adapters = [a for a in adapters if a]
        return "+".join([base, *adapters])

    @property
    def context_limit(self) -> int | None:
        """The most positions the model reads (its config's ``max_position_embeddings``), or None when unstated."""
        config = getattr(self.model, "config", None)
        config = getattr(config, "text_config", None) or config
        value = getattr(config, "max_position_embeddings", None)
        return int(value) if isinstance(value, int) and value > 0 else None

    def check_prompt_size(self, texts: list[Any]) -> None:
        """Refuse, without tokenizing, text that cannot fit the model: every token covers at most as many characters
        as the longest entry of the vocabulary, so more than twice that per position (normalizers may drop a few)
        can never make a prompt the model reads. Raises ValueError."""
        limit = self.context_limit
        if limit is None:
            return
        if getattr(self, "_token_chars", None) is None:
            self._token_chars = max((len(piece) for piece in self.tokenizer.get_vocab()), default=1) or 1
        chars = sum(len(text) for text in texts if isinstance(text, str))
        if chars > limit * 2 * self._token_chars:
            raise ValueError(f"The conversation is {chars:,} characters, far more than this model reads (at most "
                             f"{limit:,} tokens, its max_position_embeddings); shorten it.")

    def encode(self, messages: list[dict[str, str]], system: str | None = None, tools: Any = None) -> list[int]:
        """The prompt ids of a conversation, ending with the template's generation prompt."""
        messages = check_messages(messages)
        tools_text = _tools_text(tools)
        return list(self.template.encode_prompt(self.tokenizer, messages, system=system, tools=tools_text or None))

    def start(self, messages: list[dict[str, str]], system: str | None = None, tools: Any = None, *,
              stop: str | list[str] | None = None, stop_event: threading.Event | None = None,
              media: dict[str, list[Any]] | None = None, **overrides: Any) -> Generation:
        """Start generating a reply in a background thread.

        Args:
            messages: The conversation (roles user/assistant/function/observation), ending with a prompt turn.
            system: The system prompt; None uses the template's default (``default_system`` in the config).
            tools: Tool declarations (a JSON string or a list of dicts), or None.
            stop: Extra stop strings; the reply is cut before the first one.
            stop_event: An event that, once set, cancels the generation.
            media: ``{"images": [...], "videos": [...], "audios": [...]}`` (paths or bytes) for a vision-language
                model; missing ``<image>`` placeholders go in front of the last user message.
            **overrides: Per-call generation settings (temperature, top_p, top_k, max_new_tokens,
                repetition_penalty, do_sample).

        Returns:
            The running :class:`Generation`.

        Raises:
            ValueError: For bad messages or settings.
        """
        if self.model is None:
            raise RuntimeError("This chat model was unloaded; create a new ChatModel to chat again.")
        extra: dict[str, Any] = {}
        if media and any(media.values()):
            from engine.multimodal.chat import media_prompt

            prompt_ids, extra = media_prompt(self, check_messages(messages), media, system, tools)
        else:
            self.check_prompt_size([system or "", *(m.get("content") for m in messages if isinstance(m, dict)),
                                    tools if isinstance(tools, str) else ""])
            prompt_ids = self.encode(messages, system, tools)
        limit = self.context_limit
        if limit is not None and len(prompt_ids) >= limit:
            raise ValueError(f"The prompt is {len(prompt_ids):,} tokens; this model reads at most {limit:,} "
                             "(its max_position_embeddings), with room left for the reply; shorten the conversation.")
        kwargs = generation_kwargs(
            self.cfg.generation, self.stop_ids, self.tokenizer.pad_token_id, overrides, allow_beams=False
        )
        kwargs.update(extra)
        stops = [stop] if isinstance(stop, str) else list(stop or [])
        # The template's stop words end a reply also when the model spells one out of ordinary tokens (a small or
        # barely trained model does): as token ids they would go unnoticed, and the next turn would leak in.
        stops += [word for word in getattr(self.template, "stop_words", ()) if word and word not in stops]
        return Generation(self, prompt_ids, kwargs, stops, stop_event)

    def stream(self, messages: list[dict[str, str]], system: str | None = None, tools: Any = None, *,
               stop: str | list[str] | None = None, stop_event: threading.Event | None = None,
               **overrides: Any) -> Iterator[str]:
        """Stream the reply's text as it is generated (same arguments as :meth:`start`)."""
        yield from self.start(messages, system, tools, stop=stop, stop_event=stop_event, **overrides)

    def chat(self, messages: list[dict[str, str]], system: str | None = None, tools: Any = None, *,
             stop: str | list[str] | None = None, stop_event: threading.Event | None = None,
             **overrides: Any) -> Reply:
        """Generate a whole reply (same arguments as :meth:`start`) and parse thinking and tool calls."""
        generation = self.start(messages, system, tools, stop=stop, stop_event=stop_event, **overrides)
        try:
            generation.wait()
        finally:
            generation.close()
        return self.finish(generation)

    def finish(self, generation: Generation) -> Reply:
        """Build the :class:`Reply` of a generation whose stream has ended."""
        raw = self.tokenizer.decode(
            [i for i in generation.generated_ids if i not in self.stop_ids], skip_special_tokens=False
        )
        cuts = [raw.find(s) for s in generation.stop_strings if s in raw]
        raw = raw[: min(cuts)] if cuts else raw
        raw = raw.rstrip(INCOMPLETE)  # a reply cut inside a multi-byte character
        reply = reply_from_text(self.template, raw, self._special_tokens() if self.skip_special_tokens else ())
        reply.prompt_tokens = generation.prompt_tokens
        reply.completion_tokens = generation.completion_tokens
        reply.finish_reason = "tool_calls" if reply.tool_calls else generation.finish_reason
        return reply

    def _special_tokens(self) -> list[str]:
        """Every special token's text, longest first: the named ones and the added tokens flagged special (such as
        ChatML's ``<|im_start|>``), which ``decode(skip_special_tokens=True)`` leaves out as LLaMA-Factory's does."""
        names = set(getattr(self.tokenizer, "all_special_tokens", []) or [])
        added = getattr(self.tokenizer, "added_tokens_decoder", None) or {}
        names.update(token.content for token in added.values() if getattr(token, "special", False))
        return sorted(names, key=len, reverse=True)

    def unload(self) -> None:
        """Free the model's memory (the object cannot generate afterwards)."""
        from engine.devices import empty_cache

        self.model = None
        empty_cache()


def reply_from_text(template: Any, text: str, hidden_tokens: Any = ()) -> Reply:
    """Split a generated text into thinking, answer and tool calls with the template's own formats.

    Args:
        template: The prompt template.
        text: The generated text (decoded with special tokens kept, stop tokens removed).
        hidden_tokens: Special-token strings removed from the visible parts afterwards.

    Returns:
        A :class:`Reply` with ``text``, ``thinking`` and ``tool_calls`` filled in.
    """
    thinking, answer = template.split_thinking(text) if getattr(template, "reasoning", False) else ("", text)
    content, calls = template.parse_reply(answer)
    tool_calls = [_normalise_call(call) for call in calls or []]

    def clean(part: str) -> str:
        for token in hidden_tokens:
            part = part.replace(token, "")
        return part.strip()

    return Reply(text=clean(content), tool_calls=tool_calls, thinking=clean(thinking or ""))


def _normalise_call(call: dict[str, Any]) -> dict[str, Any]:
    arguments = call.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = loads(arguments)
        except json.JSONDecodeError:
            pass
    return {"name": str(call.get("name", "")), "arguments": arguments}


def _tools_text(tools: Any) -> str:
    if tools is None or tools == "" or tools == []:
        return ""
    if isinstance(tools, str):
        try:
            loads(tools)
        except json.JSONDecodeError:
            raise ValueError("`tools` must be JSON text of a list of tool declarations.") from None
        return tools
    if isinstance(tools, (list, tuple)):
        return json.dumps(list(tools), ensure_ascii=False)
    raise ValueError(f"`tools` must be a list of tool declarations, not {type(tools).__name__}.")


def _model_device(model: Any) -> torch.device:
    device = getattr(model, "device", None)
    if isinstance(device, torch.device):
        return device
    try:
        return next(model.parameters()).device
    except (StopIteration, AttributeError):
        return torch.device("cpu")
