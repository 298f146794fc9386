"""The terminal surface of ``lf-engine chat``: an interactive streaming REPL and a one-shot query.

This module is a command-line surface: it writes the conversation to stdout on purpose (logs go to stderr).
"""

from __future__ import annotations

import json
import sys
import threading
from typing import IO, Any

from engine import collector
from engine.config import RunConfig
from engine.infer.chat import ChatModel, Reply
from engine.terminal_text import shown

HELP = "Type a message and press Enter. Commands: `clear` forgets the conversation, `exit` quits."


def format_reply(reply: Reply) -> str:
    """The text printed for a reply: the answer, then one JSON line per tool call."""
    parts = [reply.text] if reply.text else []
    parts += [json.dumps(call, ensure_ascii=False) for call in reply.tool_calls]
    return "\n".join(parts)


def single_query(cfg: RunConfig, query: str, system: str | None = None, *, chat_model: ChatModel | None = None,
                 media: dict[str, list] | None = None) -> str:
    """Answer one message and return the reply (what ``lf-engine chat CONFIG --query TEXT`` prints).

    Args:
        cfg: The run config (model, adapters, template, generation settings).
        query: The user's message.
        system: A system prompt; None uses ``default_system`` or the template's own.
        chat_model: An already loaded model to use instead of loading one.
        media: ``{"images": [paths], "videos": [...], "audios": [...]}`` for a vision-language model.

    Returns:
        The reply text; tool calls, if the model makes any, follow as JSON lines.
    """
    model = chat_model or ChatModel(cfg)
    try:
        reply = model.chat([{"role": "user", "content": query}], system=system, **({"media": media} if media else {}))
    finally:
        if chat_model is None:
            model.unload()
    return format_reply(reply)


def interactive_chat(cfg: RunConfig, system: str | None = None, *, chat_model: ChatModel | None = None,
                     read: Any = input, out: IO[str] | None = None) -> None:
    """Chat in the terminal, streaming each reply as it is generated.

    Ctrl-C while a reply streams stops that reply; Ctrl-C or Ctrl-D at the prompt (or `exit`) quits.

    Args:
        cfg: The run config.
        system: A system prompt; None uses ``default_system`` or the template's own.
        chat_model: An already loaded model to use instead of loading one.
        media: ``{"images": [paths], "videos": [...], "audios": [...]}`` for a vision-language model.
        read: The function that reads one line of user input (``input`` by default).
        out: Where the conversation is written (stdout by default).
    """
    out = out or sys.stdout
    model = chat_model or ChatModel(cfg)
    collector.settle()  # the model lives as long as the conversation
    history: list[dict[str, str]] = []
    out.write(HELP + "\n")
    try:
        while True:
            try:
                query = read("\nUser: ")
            except (EOFError, KeyboardInterrupt):
                out.write("\n")
                break
            except UnicodeDecodeError:
                out.write("That input was not valid text (check the terminal's encoding); try again.\n")
                continue
            command = query.strip()
            if command == "exit":
                break
            if command == "clear":
                history = []
                out.write("The conversation was cleared.\n")
                continue
            if not command:
                continue
            history.append({"role": "user", "content": query})
            reply = _stream_reply(model, history, system, out)
            if reply is None:
                history.pop()
                continue
            if reply.tool_calls:
                history.append({"role": "function", "content": json.dumps(reply.tool_calls, ensure_ascii=False)})
            else:
                history.append({"role": "assistant", "content": reply.text})
    finally:
        if chat_model is None:
            model.unload()


def _stream_reply(model: ChatModel, history: list[dict[str, str]], system: str | None, out: IO[str]) -> Reply | None:
    """Stream one reply to ``out``; None when the user interrupted it."""
    out.write("Assistant: ")
    out.flush()
    generation = model.start(history, system, stop_event=threading.Event())
    terminal = _is_terminal(out)
    try:
        for piece in generation:
            out.write(shown(piece) if terminal else piece)  # a reply's escapes must not drive the terminal
            out.flush()
    except KeyboardInterrupt:
        generation.close()
        out.write("\n[stopped]\n")
        return None
    out.write("\n")
    reply = model.finish(generation)
    if reply.tool_calls:
        for call in reply.tool_calls:
            text = json.dumps(call, ensure_ascii=False)
            out.write(f"[tool call] {shown(text) if terminal else text}\n")
    return reply


def _is_terminal(out: IO[str]) -> bool:
    """Whether ``out`` is a terminal: a model's reply is written there with its control characters as escapes
    (:func:`engine.terminal_text.shown`; byte-level tokens can spell any of them), and elsewhere as it is."""
    try:
        return bool(out.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False
