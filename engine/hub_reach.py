"""Whether the Hugging Face hub can be reached at all, answered in seconds.

Without a network, or behind one that drops packets, huggingface_hub finds out only after its retries and timeouts
(20 s and more, nothing said meanwhile). Before anything downloads a model that is not in the local cache, the
pre-flight check and the model loader ask :func:`unreachable`: one TCP connection to the hub's host (or, when the
environment names a proxy for it, a CONNECT through that proxy, which must answer 200), given
``$LF_HUB_PROBE_TIMEOUT`` seconds (default 3; ``0`` skips the probe), name lookup included. The answer is remembered
for a minute. A machine with network connects in milliseconds and goes on to download as before; ``HF_HUB_OFFLINE=1``
(:func:`downloads_off`) says the same without probing.

:func:`hub_model_problems` is that question for a model a run loads from the hub (``model_name_or_path``,
``ref_model``, a reward model's LoRA base): none when it is in the local cache, else why it cannot be had.
"""

from __future__ import annotations

import os
import re
import socket
import threading
import time
import urllib.request
from typing import Any
from urllib.parse import urlsplit

HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*/[\w.\-]+$")
"""A model id on the hub (``owner/name``)."""
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


def cached_hub_config(cfg: Any, name: str) -> str | None:
    """The path of hub model ``name``'s config.json in the local cache (the config's cache_dir and revision, as the
    loader asks for it), or None when it is not there."""
    from huggingface_hub import try_to_load_from_cache

    cached = try_to_load_from_cache(name, "config.json", cache_dir=cfg.model.cache_dir,
                                    revision=cfg.model.model_revision or None)
    return cached if isinstance(cached, str) else None


def hub_model_problems(cfg: Any, name: str, what: str, point: str) -> list[str]:
    """A hub model the run loads (``name``; the config ``cfg`` says where its cache is) must be in the local cache when
    downloads are switched off or the hub cannot be reached (found out in seconds rather than after the download's
    own retries). ``what`` says what the id is (`` `model_name_or_path: X` is a hub id``) and ``point`` how the
    config then names the downloaded folder (``set `model_name_or_path` to it``). Each problem's code:
    ``hub_offline``."""
    from engine.data.hub import use_modelscope, use_openmind
    from engine.errors import Problem

    offline = downloads_off()
    if not offline and (use_modelscope() or use_openmind() or getattr(cfg.methods, "use_modelscope_hub", False)
                        or getattr(cfg.methods, "use_openmind_hub", False)):
        return []  # another hub: the loader fetches it, or explains why it cannot
    try:
        if cached_hub_config(cfg, name) is not None:
            return []
    except (ImportError, ValueError):  # no huggingface_hub; an id the hub cannot hold (the loader names it)
        return []
    fetch = f"download it where there is network (`hf download {name} --local-dir DIR`), copy DIR here and {point}"
    if offline:
        return [Problem(f"{what} that is not in the local cache, and downloads are off (HF_HUB_OFFLINE). To use it, "
                        f"{fetch}.", "hub_offline")]
    reason = unreachable()
    if reason is None:
        return []  # the loader downloads it, or explains why it cannot
    return [Problem(f"{what} that is not in the local cache, and the hub ({endpoint()}) cannot be reached ({reason}). "
                    f"Connect this machine to the network, or {fetch}; with HF_HUB_OFFLINE=1 the hub is not tried at "
                    "all.", "hub_offline")]


def forget() -> None:
    """Drop the remembered answers (tests; a network that came back)."""
    with _lock:
        _answers.clear()
