"""The OpenAI chat-completions format: request messages, tools and sampling options in, tool calls and usage out.

Kept apart from the HTTP server (engine/infer/server.py) so the conversion rules can be read and tested alone.
"""

from __future__ import annotations

import json
import uuid
from typing import TYPE_CHECKING, Any

from engine.templates.tool_base import loads
from engine.wording import with_article

if TYPE_CHECKING:  # engine.infer.chat imports torch and transformers (seconds); the server binds its port before that
    from engine.infer.chat import Reply


class RequestError(ValueError):
    """A bad request: answered with a 4xx status and the message."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _text_of(content: Any, index: int, media: dict[str, list] | None = None) -> str:
    """The text of an OpenAI message content (a string or a list of parts); with ``media``, image_url (base64
    data URL) and input_audio parts become placeholders and their bytes go into ``media``."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if media is not None and isinstance(part, dict) and part.get("type") != "text":
                from engine.multimodal.chat import openai_part
                from engine.multimodal.errors import MediaError

                try:
                    texts.append(openai_part(part, index, media))
                except MediaError as err:
                    raise RequestError(str(err)) from None
                continue
            if not isinstance(part, dict) or part.get("type") != "text":
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise RequestError(f"messages[{index}]: content part of type {kind!r} is not supported; send text.")
            texts.append(str(part.get("text", "")))
        return "".join(texts)
    raise RequestError(f"messages[{index}].content must be a string or a list of text parts.")


def _tool_call_message(calls: Any, index: int) -> str:
    if not isinstance(calls, list) or not calls:
        raise RequestError(f"messages[{index}].tool_calls must be a non-empty list.")
    out = []
    for call in calls:
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict) or not function.get("name"):
            raise RequestError(f"messages[{index}].tool_calls entries need a `function` with a `name`.")
        arguments = function.get("arguments") or "{}"
        if isinstance(arguments, str):
            try:
                arguments = loads(arguments)
            except json.JSONDecodeError:
                raise RequestError(f"messages[{index}]: tool call arguments must be JSON text.") from None
        out.append({"name": function["name"], "arguments": arguments})
    return json.dumps(out, ensure_ascii=False)


def convert_messages(raw: Any, media: dict[str, list] | None = None) -> tuple[list[dict[str, str]], str | None]:
    """Map OpenAI chat messages to the engine's conversation and system prompt.

    ``system`` (and ``developer``) messages at the start become the system prompt, ``user`` stays ``user``, an
    ``assistant`` message with ``tool_calls`` becomes a ``function`` turn, other assistant messages ``assistant``,
    and ``tool`` messages ``observation`` turns. Consecutive user messages, and consecutive tool results, are
    joined into one turn.

    Args:
        raw: The request's ``messages``.

    Returns:
        (messages, system prompt or None).

    Raises:
        RequestError: When the messages are malformed or out of order.
    """
    if not isinstance(raw, list) or not raw:
        raise RequestError("`messages` must be a non-empty list.")
    system_parts: list[str] = []
    messages: list[dict[str, str]] = []
    for index, message in enumerate(raw):
        if not isinstance(message, dict):
            raise RequestError(f"messages[{index}] must be an object with `role` and `content`.")
        role = message.get("role")
        if role in ("system", "developer"):
            if messages:
                raise RequestError(f"messages[{index}]: a system message must come before the conversation.")
            system_parts.append(_text_of(message.get("content"), index))
            continue
        if role == "user":
            ours, content = "user", _text_of(message.get("content"), index, media)
        elif role == "assistant" and message.get("tool_calls"):
            ours, content = "function", _tool_call_message(message["tool_calls"], index)
        elif role == "assistant":
            ours, content = "assistant", _text_of(message.get("content"), index)
        elif role in ("tool", "function"):
            ours, content = "observation", _text_of(message.get("content"), index)
        else:
            raise RequestError(f"messages[{index}] has role {role!r}; use system, user, assistant or tool.")
        if messages and messages[-1]["role"] == ours and ours in ("user", "observation"):
            messages[-1]["content"] += "\n" + content
            continue
        expected_prompt = len(messages) % 2 == 0
        if expected_prompt != (ours in ("user", "observation")):
            wanted = "user or tool" if expected_prompt else "assistant"
            raise RequestError(f"messages[{index}] ({role}) is out of order: {with_article(wanted)} message was expected "
                               "here.")
        messages.append({"role": ours, "content": content})
    if not messages:
        raise RequestError("`messages` holds only system messages; add a user message.")
    if messages[-1]["role"] not in ("user", "observation"):
        raise RequestError("The last message must be a user or tool message: the model replies to it.")
    return messages, ("\n".join(system_parts) if system_parts else None)


def convert_tools(raw: Any) -> list[dict[str, Any]] | None:
    """OpenAI ``tools`` (``[{"type": "function", "function": {...}}]``) to a list of function declarations."""
    if raw is None or raw == []:
        return None
    if not isinstance(raw, list):
        raise RequestError("`tools` must be a list.")
    out = []
    for index, tool in enumerate(raw):
        if not isinstance(tool, dict) or tool.get("type", "function") != "function":
            raise RequestError(f"tools[{index}] must be an object with type `function`.")
        function = tool.get("function", tool)
        if not isinstance(function, dict) or not function.get("name"):
            raise RequestError(f"tools[{index}].function needs a `name`.")
        if not isinstance(function["name"], str):
            raise RequestError(f"tools[{index}].function.name must be text.")
        if function.get("description") is not None and not isinstance(function["description"], str):
            raise RequestError(f"tools[{index}].function.description must be text.")
        if function.get("parameters") is not None and not isinstance(function["parameters"], dict):
            raise RequestError(f"tools[{index}].function.parameters must be a JSON Schema object.")
        out.append(function)
    return out


def generation_overrides(body: dict[str, Any]) -> dict[str, Any]:
    """Sampling settings of a request as ChatModel overrides (validated there)."""
    overrides: dict[str, Any] = {}
    if body.get("temperature") is not None:
        temperature = body["temperature"]
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)) or not 0 <= temperature <= 2:
            raise RequestError("`temperature` must be a number between 0 and 2.")
        overrides["temperature"] = float(temperature)
        overrides["do_sample"] = temperature > 0
    for ours, theirs in (("top_p", "top_p"), ("top_k", "top_k"), ("repetition_penalty", "repetition_penalty")):
        if body.get(theirs) is not None:
            overrides[ours] = body[theirs]
    max_tokens = body.get("max_completion_tokens", body.get("max_tokens"))
    if max_tokens is not None:
        overrides["max_new_tokens"] = max_tokens
    return overrides


def stop_strings(raw: Any) -> list[str]:
    if raw is None:
        return []
    if isinstance(raw, str):
        return [raw]
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return raw
    raise RequestError("`stop` must be a string or a list of strings.")


def openai_tool_calls(reply: Reply) -> list[dict[str, Any]]:
    """The reply's tool calls in OpenAI's shape (arguments as JSON text)."""
    return [
        {
            "id": f"call_{uuid.uuid4().hex[:24]}",
            "type": "function",
            "function": {"name": call["name"], "arguments": json.dumps(call["arguments"], ensure_ascii=False)},
        }
        for call in reply.tool_calls
    ]


def finish_reason(reason: str) -> str:
    return "stop" if reason == "cancelled" else reason


def usage_of(prompt: int, completion: int) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}
