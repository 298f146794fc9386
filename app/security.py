"""The board's guards: failed-login backoff, the upload size limit, and the folders API configs may write to.

- :class:`LoginGuard` is the ``auth`` callable given to gradio: after ``free_failures`` wrong passwords in a row
  from one client address, logins from it pause (30 s, doubling up to 15 min), even with the right password; after
  as many for the board's user name from anywhere, that user's logins pause for the addresses that sent a wrong
  password, while an address with none on record still logs in (so nobody can lock the owner out by guessing
  from elsewhere). A success clears the counts. :class:`ClientAddressMiddleware` tells it the client's address.
- Uploads larger than ``--max-upload-mb`` are refused by gradio (``max_file_size``) and again before a file is
  registered as a dataset.
- ``tokenized_path`` and ``export_dir`` in a config submitted through the API must lie under one of the allowed
  roots (``--allowed-root`` / ``$LF_BOARD_ALLOWED_ROOTS``; default: the workspace).
"""

from __future__ import annotations

import contextvars
import hmac
import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

ALLOWED_ROOTS_ENV = "LF_BOARD_ALLOWED_ROOTS"
MAX_UPLOAD_ENV = "LF_BOARD_MAX_UPLOAD_MB"
DEFAULT_MAX_UPLOAD_MB = 512
PATH_KEYS = ("tokenized_path", "export_dir")
"""Config keys naming a folder the job writes to, checked against the allowed roots."""

_client: contextvars.ContextVar[str] = contextvars.ContextVar("lfboard_client", default="?")


class ClientAddressMiddleware:
    """A plain ASGI middleware that records the client's address for :class:`LoginGuard` (same task context)."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") == "http":
            client = scope.get("client") or ("?", 0)
            _client.set(str(client[0]))
        await self.app(scope, receive, send)


class LoginRefused(Exception):
    """Raised by the guard while logins are paused; turned into an HTTP 400 with the message."""


class LoginGuard:
    """Checks USER:PASS with a per-address and a per-user backoff after repeated failures.

    The per-address pause refuses every login from that address. The per-user pause (failures for the board's own
    user name, from any address) refuses only addresses that have a failure on record, so an attacker guessing
    from elsewhere slows guessing down to one try per fresh address without locking the owner out.

    Args:
        user: The user name.
        password: The password.
        free_failures: Wrong passwords allowed in a row before logins pause.
        base_delay: The first pause in seconds; each further failure doubles it.
        max_delay: The longest pause.
        clock: Time source (tests).
    """

    MAX_TRACKED = 10_000
    """Addresses remembered at most; beyond it, those not paused are forgotten (memory stays bounded)."""

    def __init__(self, user: str, password: str, *, free_failures: int = 5, base_delay: float = 30.0,
                 max_delay: float = 900.0, clock: Callable[[], float] = time.monotonic):
        self.user, self.password = user, password
        self.free_failures, self.base_delay, self.max_delay = free_failures, base_delay, max_delay
        self.clock = clock
        self._lock = threading.Lock()
        self._failures: dict[str, int] = {}
        self._until: dict[str, float] = {}

    @property
    def message(self) -> str:
        """What the login page says (gradio's ``auth_message``)."""
        return (f"LF Board. After {self.free_failures} wrong passwords in a row from one address, logins from it "
                f"pause for {int(self.base_delay)} s (longer after each further failure), even with the right "
                "password.")

    def _user_key(self, user: str) -> str | None:
        """The per-user key, for the board's own user name only (other names are counted per address)."""
        return "user" if hmac.compare_digest(user.encode(), self.user.encode()) else None

    def _refusal(self, user: str, client: str) -> tuple[float, str]:
        """(seconds left, whose pause) for a login of ``user`` from ``client``; (0, "") when it may proceed."""
        now = self.clock()
        with self._lock:
            wait = self._until.get(f"ip:{client}", 0.0) - now
            if wait > 0:
                return wait, f"from {client}"
            key = self._user_key(user)
            wait = self._until.get(key, 0.0) - now if key else 0.0
            if wait > 0 and self._failures.get(f"ip:{client}", 0) > 0:
                return wait, f"for `{user}`"
        return 0.0, ""

    def wait_seconds(self, user: str, client: str | None = None) -> float:
        """How long logins of ``user`` from ``client`` (default: the current request's) are paused; 0 when not."""
        return self._refusal(user, client if client is not None else _client.get())[0]

    def __call__(self, user: str, password: str) -> bool:
        client = _client.get()
        wait, whose = self._refusal(user, client)
        if wait > 0:
            raise _http_error(f"Too many failed logins {whose}: wait {int(wait) + 1} s, then try again.")
        ok = self._user_key(user) is not None and hmac.compare_digest(password.encode(), self.password.encode())
        keys = [key for key in (f"ip:{client}", self._user_key(user)) if key]
        with self._lock:
            for key in keys:
                if ok:
                    self._failures.pop(key, None)
                    self._until.pop(key, None)
                    continue
                count = self._failures[key] = self._failures.get(key, 0) + 1
                if count >= self.free_failures:
                    delay = min(self.max_delay, self.base_delay * 2 ** (count - self.free_failures))
                    self._until[key] = self.clock() + delay
            if len(self._failures) > self.MAX_TRACKED:
                self._forget_unpaused()
        return ok

    def _forget_unpaused(self) -> None:
        """Drop the counts of addresses not paused now (called with the lock held)."""
        now = self.clock()
        for key in [k for k in self._failures if k.startswith("ip:") and self._until.get(k, 0.0) <= now]:
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
