"""Whether the Hugging Face hub can be reached at all, answered in seconds.

Without a network, or behind one that drops packets, huggingface_hub finds out only after its retries and timeouts
(20 s and more, nothing said meanwhile). Before anything downloads a model that is not in the local cache, the
pre-flight check and the model loader ask :func:`unreachable`: one TCP connection to the hub's host (or, when the
environment names a proxy for it, a CONNECT through that proxy, which must answer 200), given
``$LF_HUB_PROBE_TIMEOUT`` seconds (default 3; ``0`` skips the probe), name lookup included. The answer is remembered
for a minute. A machine with network connects in milliseconds and goes on to download as before; ``HF_HUB_OFFLINE=1``
(:func:`downloads_off`) says the same without probing.
"""

from __future__ import annotations

import os
import socket
import threading
import time
import urllib.request
from urllib.parse import urlsplit

DEFAULT_ENDPOINT = "https://huggingface.co"
DEFAULT_TIMEOUT = 3.0
REMEMBER_S = 60.0

_answers: dict[tuple[str, int, str], tuple[float, str | None]] = {}
_lock = threading.Lock()


def downloads_off() -> bool:
    """Whether the environment switches hub downloads off (``HF_HUB_OFFLINE`` or ``TRANSFORMERS_OFFLINE``)."""
    return any(os.environ.get(name, "").strip().lower() in ("1", "true", "yes", "on")
               for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def endpoint() -> str:
    """The hub's address (``$HF_ENDPOINT``, else huggingface.co)."""
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


def probe_timeout() -> float:
    try:
        return max(0.0, float(os.environ.get("LF_HUB_PROBE_TIMEOUT", DEFAULT_TIMEOUT)))
    except ValueError:
        return DEFAULT_TIMEOUT


Target = tuple[str, int, str]
"""(host, port to connect to, ``host:port`` to ask a proxy for; '' when the connection goes straight to the hub)."""


def _target(url: str) -> Target | None:
    """Where a connection to ``url`` goes first: its proxy when the environment names one for it."""
    parts = urlsplit(url)
    if not parts.hostname:
        return None
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = None if urllib.request.proxy_bypass(parts.hostname) else urllib.request.getproxies().get(parts.scheme)
    if proxy:
        proxied = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        if proxied.hostname and proxied.scheme in ("http", "https"):
            return proxied.hostname, proxied.port or (443 if proxied.scheme == "https" else 80), f"{parts.hostname}:{port}"
    return parts.hostname, port, ""


def _connect(target: Target, timeout: float, result: list[str | None]) -> None:
    host, port, via = target
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            if via:  # a proxy that accepts connections may still reach nothing: ask it for the hub
                sock.sendall(f"CONNECT {via} HTTP/1.1\r\nHost: {via}\r\n\r\n".encode())
                status = sock.recv(256).split(b"\r\n", 1)[0].decode("latin-1")
                if status.split(" ")[1:2] != ["200"]:
                    result.append(f"the proxy {host}:{port} answered {status or 'nothing'!r} for {via}")
                    return
        result.append(None)
    except OSError as err:
        result.append(f"{type(err).__name__}: {err.strerror or err}")


def unreachable(url: str | None = None) -> str | None:
    """None when the hub (``url``, default :func:`endpoint`) accepts a connection in time; else why not, in words."""
    timeout = probe_timeout()
    target = _target(url or endpoint())
    if target is None or timeout <= 0:
        return None
    now = time.monotonic()
    with _lock:
        known = _answers.get(target)
        if known and now - known[0] < REMEMBER_S:
            return known[1]
    result: list[str | None] = []
    worker = threading.Thread(target=_connect, args=(target, timeout, result), daemon=True, name="lf-hub-probe")
    worker.start()
    worker.join(timeout + 0.2)  # the name lookup has no timeout of its own: the thread is left behind when it hangs
    answer = result[0] if result else f"no answer from {target[0]}:{target[1]} within {timeout:g} s"
    if answer and target[2] and not answer.startswith("the proxy"):
        answer += f" (the proxy the environment names for {target[2]})"
    with _lock:
        _answers[target] = (time.monotonic(), answer)
    return answer


def forget() -> None:
    """Drop the remembered answers (tests; a network that came back)."""
    with _lock:
        _answers.clear()
