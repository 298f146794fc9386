"""The board's guards: failed-login backoff, the upload size limit, and the folders API configs may write to.

- :class:`LoginGuard` is the ``auth`` callable given to gradio. After ``free_failures`` wrong passwords in a row
  for the board's user name, or from one client address, logins pause (30 s, doubling up to 15 min), even with the
  right password. A browser that has logged in here before (it holds a signed device cookie the guard gave it) is
  exempt from those pauses and paused only by its own wrong passwords, so guessing from elsewhere cannot lock the
  owner out of a browser they use (OWASP's "device cookies"). A success clears the counts.
  :class:`ClientAddressMiddleware` tells the guard the client's address and device cookie, and hands a new device
  cookie to the browser after a successful login.
- Uploads larger than ``--max-upload-mb`` are refused by gradio (``max_file_size``) and again before a file is
  registered as a dataset.
- ``tokenized_path`` and ``export_dir`` in a config submitted through the API must lie under one of the allowed
  roots (``--allowed-root`` / ``$LF_BOARD_ALLOWED_ROOTS``; default: the workspace).
"""

from __future__ import annotations

import contextvars
import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.cookies import CookieError, SimpleCookie
from pathlib import Path
from typing import Any

ALLOWED_ROOTS_ENV = "LF_BOARD_ALLOWED_ROOTS"
MAX_UPLOAD_ENV = "LF_BOARD_MAX_UPLOAD_MB"
DEFAULT_MAX_UPLOAD_MB = 512
PATH_KEYS = ("tokenized_path", "export_dir")
"""Config keys naming a folder the job writes to, checked against the allowed roots."""

DEVICE_COOKIE = "lfboard-device"
DEVICE_MAX_AGE = 30 * 24 * 3600
"""How long a browser keeps its device cookie (seconds); the board's restart also ends it (the key is in memory)."""


@dataclass
class LoginRequest:
    """What :class:`ClientAddressMiddleware` knows of a request: the client's address, its device cookie, and a
    device cookie to hand out (set by the guard on a successful login)."""

    client: str = "?"
    device: str = ""
    new_device: str = ""


_request: contextvars.ContextVar[LoginRequest | None] = contextvars.ContextVar("lfboard_login", default=None)


def _current() -> LoginRequest:
    return _request.get() or LoginRequest()


class ClientAddressMiddleware:
    """A plain ASGI middleware: records the client's address and device cookie for :class:`LoginGuard` (gradio
    calls the guard in the request's own task), and adds the device cookie the guard hands out to the response."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        client = scope.get("client") or ("?", 0)
        info = LoginRequest(client=str(client[0]), device=_cookie(scope, DEVICE_COOKIE))
        _request.set(info)

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start" and info.new_device:
                cookie = (f"{DEVICE_COOKIE}={info.new_device}; Path=/; Max-Age={DEVICE_MAX_AGE}; HttpOnly; "
                          "SameSite=Lax")
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _cookie(scope: dict[str, Any], name: str) -> str:
    for key, value in scope.get("headers") or []:
        if key.lower() == b"cookie":
            jar = SimpleCookie()
            try:
                jar.load(value.decode("latin-1"))
            except CookieError:
                continue
            if name in jar:
                return jar[name].value
    return ""


class LoginRefused(Exception):
    """Raised by the guard while logins are paused; turned into an HTTP 400 with the message."""


class LoginGuard:
    """Checks USER:PASS with backoffs after repeated failures (see the module's docstring).

    Pause keys: ``ip:ADDRESS`` (every login from that address), ``user`` (the board's user name, from any browser
    without a device cookie) and ``device:ID`` (one browser with a device cookie, which the first two do not
    pause). Wrong passwords for other user names count for their address only.

    Args:
        user: The user name.
        password: The password.
        free_failures: Wrong passwords allowed in a row before logins pause.
        base_delay: The first pause in seconds; each further failure doubles it.
        max_delay: The longest pause.
        clock: Time source (tests).
    """

    MAX_TRACKED = 10_000
    """Keys remembered at most; beyond it, those not paused now are forgotten (memory stays bounded)."""

    def __init__(self, user: str, password: str, *, free_failures: int = 5, base_delay: float = 30.0,
                 max_delay: float = 900.0, clock: Callable[[], float] = time.monotonic):
        self.user, self.password = user, password
        self.free_failures, self.base_delay, self.max_delay = free_failures, base_delay, max_delay
        self.clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}
        self._key = secrets.token_bytes(32)  # signs device cookies; in memory only

    @property
    def message(self) -> str:
        """What the login page says (gradio's ``auth_message``)."""
        return (f"LF Board. After {self.free_failures} wrong passwords in a row, logins pause for "
                f"{int(self.base_delay)} s (longer after each further failure), even with the right password; a "
                "browser that has logged in here before is paused only by its own wrong passwords.")

    # -- device cookies
    def _sign(self, device_id: str) -> str:
        mac = hmac.new(self._key, f"{self.user}\0{device_id}".encode(), hashlib.sha256).hexdigest()[:32]
        return f"{device_id}.{mac}"

    def _device(self, cookie: str) -> str | None:
        """The device id of a valid cookie for the board's user, else None."""
        device_id, _, mac = cookie.partition(".")
        if not device_id or not mac or len(cookie) > 100:
            return None
        return device_id if hmac.compare_digest(self._sign(device_id), cookie) else None

    def _keys(self, user: str, request: LoginRequest) -> list[str]:
        """The pause keys a login of ``user`` in ``request`` counts under."""
        if not hmac.compare_digest(user.encode(), self.user.encode()):
            return [f"ip:{request.client}"]
        device = self._device(request.device)
        if device is not None:
            return [f"device:{device}"]
        return [f"ip:{request.client}", "user"]

    def wait_seconds(self, user: str, request: LoginRequest | None = None) -> float:
        """How long a login of ``user`` (in ``request``, default the current one) is paused; 0 when it is not."""
        return self._refusal(self._keys(user, request or _current()))[0]

    def _refusal(self, keys: list[str]) -> tuple[float, str]:
        now = self.clock()
        with self._lock:
            waits = [(self._until.get(key, 0.0) - now, key) for key in keys]
        wait, key = max(waits)
        return (wait, key) if wait > 0 else (0.0, "")

    def __call__(self, user: str, password: str) -> bool:
        request = _current()
        keys = self._keys(user, request)
        wait, key = self._refusal(keys)
        if wait > 0:
            whose = {"user": f"for `{user}`"}.get(key, f"from {request.client}" if key.startswith("ip:") else
                                                  "from this browser")
            raise _http_error(f"Too many failed logins {whose}: wait {int(wait) + 1} s, then try again.")
        ok = hmac.compare_digest(user.encode(), self.user.encode()) and hmac.compare_digest(
            password.encode(), self.password.encode())
        with self._lock:
            for key in keys:
                if ok:
                    self._failures.pop(key, None)
                    self._until.pop(key, None)
                    continue
                count = self._failures[key] = self._failures.get(key, 0) + 1
                if count >= self.free_failures:
                    doublings = min(count - self.free_failures, 32)  # 2 ** 32 x the first pause is past any cap
                    self._until[key] = self.clock() + min(self.max_delay, self.base_delay * 2 ** doublings)
            if len(self._failures) > self.MAX_TRACKED:
                self._forget_unpaused()
        if ok:
            device = self._device(request.device)
            request.new_device = self._sign(device if device is not None else secrets.token_urlsafe(12))
        return ok

    def _forget_unpaused(self) -> None:
        """Drop the counts of keys not paused now (called with the lock held)."""
        now = self.clock()
        for key in [k for k in self._failures if k != "user" and self._until.get(k, 0.0) <= now]:
            self._failures.pop(key, None)
            self._until.pop(key, None)


def _http_error(message: str) -> Exception:
    try:
        from fastapi import HTTPException

        # 400: the status gradio's login page reacts to; the detail explains it to scripts and logs.
        return HTTPException(status_code=400, detail=message)
    except ImportError:  # pragma: no cover - fastapi comes with gradio
        return LoginRefused(message)


# -- uploads -------------------------------------------------------------------------------------------------------


def max_upload_mb(value: int | None = None) -> int:
    """The upload limit in MB: ``value``, else ``$LF_BOARD_MAX_UPLOAD_MB``, else the default."""
    if value is None:
        text = os.environ.get(MAX_UPLOAD_ENV, "").strip()
        value = int(text) if text.isdigit() else DEFAULT_MAX_UPLOAD_MB
    if value < 1:
        raise ValueError("--max-upload-mb must be at least 1 (MB).")
    return value


def upload_problem(path: str | Path, limit_mb: int) -> str | None:
    """Why an uploaded file cannot be registered (too large), or None."""
    size = Path(path).stat().st_size
    if size > limit_mb * 1024 * 1024:
        return (f"The file is {size / 1024 / 1024:.0f} MB, above the board's upload limit of {limit_mb} MB. Put large "
                "datasets in a folder on the server and point `dataset_dir` at it, or start the board with a larger "
                "--max-upload-mb.")
    return None


# -- allowed roots ---------------------------------------------------------------------------------------------------


def allowed_roots(workspace_root: Path, given: Iterable[str] | None = None) -> list[Path]:
    """The folders API configs may write to: ``given`` (``--allowed-root``), else ``$LF_BOARD_ALLOWED_ROOTS``
    (separated by ``os.pathsep``), else the workspace alone. The workspace is always allowed."""
    items = [g for g in (given or []) if g]
    if not items:
        items = [p for p in os.environ.get(ALLOWED_ROOTS_ENV, "").split(os.pathsep) if p.strip()]
    roots = [Path(workspace_root).expanduser().resolve()]
    roots += [Path(p).expanduser().resolve() for p in items]
    return list(dict.fromkeys(roots))


def path_problems(mapping: dict[str, Any], roots: list[Path]) -> list[str]:
    """A problem for every ``tokenized_path`` / ``export_dir`` outside the allowed roots."""
    problems = []
    for key in PATH_KEYS:
        value = mapping.get(key)
        if value in (None, ""):
            continue
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            problems.append(f"`{key}: {value}` must be an absolute path under an allowed folder "
                            f"({', '.join(map(str, roots))}).")
            continue
        resolved = path.resolve()
        if not any(resolved == root or root in resolved.parents for root in roots):
            problems.append(f"`{key}: {value}` is outside the folders this board may write to "
                            f"({', '.join(map(str, roots))}). Use a folder under one of them, or ask the board's "
                            f"owner to add one with --allowed-root (or ${ALLOWED_ROOTS_ENV}).")
    return problems
