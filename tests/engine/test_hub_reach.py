"""No network: a hub model id that is not cached is refused in seconds, not after the download's retries."""

from __future__ import annotations

import socket
import threading
import time

import pytest

from engine import hub_reach
from engine.config import build_config
from engine.errors import ModelError
from engine.preflight import check


@pytest.fixture()
def online(monkeypatch, tmp_path):
    """Downloads allowed (the suite runs with HF_HUB_OFFLINE=1), an empty hub cache, nothing remembered."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy",
                 "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    hub_reach.forget()
    yield monkeypatch
    hub_reach.forget()


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]  # closed again when the block ends: connecting is refused


def hanging_lookup(monkeypatch):
    """A network whose name lookups hang (what makes huggingface_hub wait for its retries)."""
    def hang(*_args, **_kwargs):
        time.sleep(30)
        raise OSError("never")

    monkeypatch.setattr(socket, "create_connection", hang)


def test_a_refused_or_hanging_hub_is_found_out_in_seconds(online):
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert "ConnectionRefusedError" in hub_reach.unreachable()
    hub_reach.forget()
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    started = time.monotonic()
    assert "no answer" in hub_reach.unreachable()
    assert time.monotonic() - started < 2
    started = time.monotonic()
    assert "no answer" in hub_reach.unreachable()  # remembered: no second wait
    assert time.monotonic() - started < 0.1


def fake_proxy(answer: bytes | None) -> tuple[socket.socket, int]:
    """A proxy on localhost that answers each CONNECT with ``answer`` (None: accepts, then says nothing)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(4)
    held = []

    def serve():
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            held.append(conn)
            conn.recv(1024)
            if answer is not None:
                conn.sendall(answer)

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


def test_a_hub_that_answers_is_reachable_and_a_proxy_is_asked_for_it(online):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        assert hub_reach.unreachable() is None
    online.setenv("HF_ENDPOINT", "https://hub.invalid")
    good, port = fake_proxy(b"HTTP/1.1 200 Connection established\r\n\r\n")
    with good:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        hub_reach.forget()
        assert hub_reach._target("https://hub.invalid") == ("127.0.0.1", port, "hub.invalid:443")
        assert hub_reach.unreachable() is None  # the proxy reaches the hub: downloads go through it
    refusing, port = fake_proxy(b"HTTP/1.1 502 Bad Gateway\r\n\r\n")
    with refusing:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        hub_reach.forget()
        assert "502 Bad Gateway" in hub_reach.unreachable()
    silent, port = fake_proxy(None)  # accepts, never forwards: what hangs a download behind a dead proxy
    with silent:
        online.setenv("HTTPS_PROXY", f"http://127.0.0.1:{port}")
        online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
        hub_reach.forget()
        started = time.monotonic()
        assert "timed out" in hub_reach.unreachable() or "no answer" in hub_reach.unreachable()
        assert time.monotonic() - started < 2
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0")
    hub_reach.forget()
    online.delenv("HTTPS_PROXY")
    online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{closed_port()}")
    assert hub_reach.unreachable() is None  # the probe switched off


def test_preflight_refuses_an_uncached_hub_id_in_seconds(online):
    cfg = build_config({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "stage": "sft", "template": "qwen"})
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0")
    check(cfg, "chat")  # the checks' own imports, not timed
    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    started = time.monotonic()
    problems = [p for p in check(cfg, "chat") if p.code == "hub_offline"]
    assert time.monotonic() - started < 3
    assert len(problems) == 1 and "`model_name_or_path: Qwen/Qwen2.5-0.5B`" in problems[0]
    assert "cannot be reached" in problems[0] and "hf download Qwen/Qwen2.5-0.5B" in problems[0]


def test_preflight_says_nothing_when_the_hub_answers(online):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        online.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        cfg = build_config({"model_name_or_path": "Qwen/Qwen2.5-0.5B", "stage": "sft", "template": "qwen"})
        assert [p for p in check(cfg, "chat") if p.code in ("hub_offline", "model")] == []


def test_the_loader_fails_fast_without_trying_to_download(online):
    from engine.models import loader

    online.setenv("LF_HUB_PROBE_TIMEOUT", "0.5")
    hanging_lookup(online)
    calls = []
    real = __import__("huggingface_hub").snapshot_download

    def spy(*args, **kwargs):
        calls.append(kwargs.get("local_files_only", False))
        return real(*args, **kwargs)

    online.setattr("huggingface_hub.snapshot_download", spy)
    started = time.monotonic()
    with pytest.raises(ModelError, match="cannot be reached"):
        loader.resolve_model_path("Qwen/Qwen2.5-0.5B")
    assert time.monotonic() - started < 3 and calls == [True]  # the cache was looked in, the network never tried
