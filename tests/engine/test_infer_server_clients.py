"""The chat worker serves one generation at a time, so a client that stops reading must not hold everyone's turn: it
is dropped after the client timeout, and the next request goes ahead. The model here is a stand-in that streams a
long reply (far larger than the sockets' buffers) without any weights."""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from types import SimpleNamespace

import pytest

from engine.infer import server as chat_server

PIECE = "x" * 65536


class LongGeneration:
    """A reply of 400 pieces of 64 KiB (25 MiB), as a streamed generation."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.finish_reason, self.prompt_tokens, self.completion_tokens = "stop", 3, 400

    def __iter__(self):
        for _ in range(400):
            if self.cancelled.is_set():
                return
            yield PIECE

    def cancel(self) -> None:
        self.cancelled.set()

    close = cancel

    def wait(self) -> None:
        pass


class LongChat:
    model_name = "stand-in"

    def __init__(self) -> None:
        self.generations: list[LongGeneration] = []

    def check_prompt_size(self, texts):  # a stand-in without a context limit
        pass

    def start(self, messages, system, tools, stop=None, **overrides):
        self.generations.append(LongGeneration())
        return self.generations[-1]

    def finish(self, generation):
        return SimpleNamespace(text="done", thinking=None, tool_calls=None, finish_reason="stop", prompt_tokens=3,
                               completion_tokens=1)

    def unload(self) -> None:
        pass


@pytest.fixture
def server(monkeypatch):
    monkeypatch.setattr(chat_server.ChatHandler, "timeout", 1.0)
    chat = LongChat()
    served = chat_server.make_server(chat, "127.0.0.1", 0)
    thread = threading.Thread(target=served.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield served, chat
    served.shutdown()
    served.server_close()


def _post(port: int, body: dict, timeout: float = 30) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    conn.request("POST", "/v1/chat/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = conn.getresponse()
    payload = json.loads(response.read())
    conn.close()
    return response.status, payload


def test_a_client_that_stops_reading_a_stream_is_dropped_and_the_next_one_is_served(server):
    served, chat = server
    port = served.server_address[1]
    stalled = socket.create_connection(("127.0.0.1", port))
    stalled.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    body = json.dumps({"messages": [{"role": "user", "content": "long"}], "stream": True}).encode()
    stalled.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                    + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)  # and never reads the reply
    deadline = time.monotonic() + 60
    while not chat.generations and time.monotonic() < deadline:
        time.sleep(0.05)
    started = time.monotonic()
    status, payload = _post(port, {"messages": [{"role": "user", "content": "hi"}]})
    waited = time.monotonic() - started
    assert status == 200 and payload["choices"][0]["message"]["content"] == "done"
    assert waited < 15, f"the next request waited {waited:.1f} s"
    assert chat.generations[0].cancelled.is_set()  # the stalled reply was stopped, not generated to the end
    stalled.close()


def test_a_request_body_that_never_arrives_is_answered_408_without_taking_a_turn(server):
    served, chat = server
    port = served.server_address[1]
    slow = socket.create_connection(("127.0.0.1", port))
    slow.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100\r\n\r\n{\"messa")  # then nothing
    slow.settimeout(10)
    reply = b""
    while b"did not arrive" not in reply:  # the headers and the body may arrive in separate reads
        part = slow.recv(65536)
        if not part:
            break
        reply += part
    assert reply.decode().startswith("HTTP/1.1 408") and "did not arrive within 1 s" in reply.decode()
    assert chat.generations == []
    slow.close()


def test_every_client_connection_has_a_finite_timeout():
    """Without one (the http.server default), a client that stopped reading held the generation lock for as long as it
    kept its connection open."""
    assert chat_server.ChatHandler.timeout == chat_server.CLIENT_TIMEOUT and 0 < chat_server.CLIENT_TIMEOUT <= 300
