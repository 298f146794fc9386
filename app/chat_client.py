"""A small client for the engine's OpenAI-compatible chat server (``lf-engine api``), with streaming.

The board never loads a model itself: the Chat tab starts a server subprocess through the job manager and
talks to it over HTTP on the loopback interface.
"""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from typing import Any

import httpx

CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 600.0


_CLIENT: httpx.Client | None = None
_CLIENT_LOCK = threading.Lock()


def _client() -> httpx.Client:
    """One HTTP client for every message: a new one per message cost 20-110 ms of first-token latency here (its
    TLS context and connection are built each time; the benchmark in examples/benchmark/run_chat_benchmark.py)."""
    global _CLIENT
    with _CLIENT_LOCK:
        if _CLIENT is None:
            _CLIENT = httpx.Client(timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT))
        return _CLIENT


def prepare() -> None:
    """Build the shared client now, while a worker loads: building it reads the CA bundle for its TLS context
    (35-65 ms here), which the first message after Load otherwise waited for (77 ms to the first token against
    44 ms for the next messages in examples/benchmark/run_chat_benchmark.py)."""
    _client()


class ChatError(RuntimeError):
    """The server refused or failed a request; the message is the server's explanation."""


class ToolsError(ChatError):
    """The tools typed in the page are not usable; ``detail`` is the reason (the Chat tab frames it in the page's
    language, ``chat_tools_unusable``)."""

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(f"The tools are not usable: {detail}. Give a JSON list of tool definitions.")


def parse_tools(text: str | None) -> list[dict[str, Any]] | None:
    """Tools typed in the page as JSON (a list of OpenAI tool or function objects); None when empty."""
    if not text or not text.strip():
        return None
    from engine.templates.tool_base import normalize_tools  # light: no torch, shared with the data layer

    try:
        declarations = normalize_tools(text)
    except ValueError as err:
        raise ToolsError(str(err)) from None
    return [{"type": "function", "function": tool} for tool in declarations]


def stream_chat(
    base_url: str,
    messages: list[dict[str, Any]],
    *,
    tools: list[dict[str, Any]] | None = None,
    stop: threading.Event | None = None,
    api_key: str | None = None,
    **sampling: Any,
) -> Iterator[dict[str, Any]]:
    """Yield the deltas of a streamed reply: ``{"content": text}`` or ``{"tool_calls": [...]}``.

    Closing the generator (or setting ``stop``) closes the connection, which stops the server's generation.
    ``api_key`` is sent as ``Authorization: Bearer`` (the board's chat workers require their key).
    """
    body: dict[str, Any] = {"model": "default", "messages": messages, "stream": True}
    body.update({k: v for k, v in sampling.items() if v is not None})
    if tools:
        body["tools"] = tools
    timeout = httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT)
    try:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        with _client().stream(
            "POST", f"{base_url}/chat/completions", json=body, headers=headers, timeout=timeout
        ) as response:
            if response.status_code != 200:
                response.read()
                raise ChatError(_error_text(response))
            for line in response.iter_lines():
                if stop is not None and stop.is_set():
                    return
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    return
                chunk = json.loads(data)
                if "error" in chunk:
                    raise ChatError(str(chunk["error"].get("message", chunk["error"])))
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if delta.get("content"):
                        yield {"content": delta["content"]}
                    if delta.get("tool_calls"):
                        yield {"tool_calls": delta["tool_calls"]}
    except httpx.HTTPError as err:
        raise ChatError(f"The chat server at {base_url} did not answer: {err}") from None


def _error_text(response: httpx.Response) -> str:
    try:
        data = response.json()
        return str(data.get("error", {}).get("message") or data)
    except ValueError:
        return f"HTTP {response.status_code}: {response.text[:500]}"


def merge_streams(streams: dict[str, Iterator[dict[str, Any]]], stop: threading.Event) -> Iterator[tuple[str, Any]]:
    """Run several streams at once; yield (name, delta) as they come, (name, None) when one ends.

    A failing stream yields (name, ChatError). Setting ``stop`` ends every stream early.
    """
    inbox: queue.Queue[tuple[str, Any]] = queue.Queue()

    def pump(name: str, stream: Iterator[dict[str, Any]]) -> None:
        try:
            for delta in stream:
                inbox.put((name, delta))
                if stop.is_set():
                    break
        except ChatError as err:
            inbox.put((name, err))
        except Exception as err:  # report, never hang the page
            inbox.put((name, ChatError(str(err))))
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
            inbox.put((name, None))

    threads = [threading.Thread(target=pump, args=item, daemon=True) for item in streams.items()]
    for thread in threads:
        thread.start()
    remaining = len(threads)
    while remaining:
        name, item = inbox.get()
        if item is None:
            remaining -= 1
        yield name, item
