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
- :class:`HostGuardMiddleware` refuses requests that name another host than this machine (the ``Host`` header, and
  ``Origin`` when a browser sends one) on a board without a login: a web page could otherwise point its own domain
  at 127.0.0.1 ("DNS rebinding") or post a form to it, and drive the board, which runs code on this machine. On
  every board, a login or not, it refuses what another page sends (an ``Origin`` that is not the board's own, or
  ``Sec-Fetch-Site`` saying another site or port sent it), as the browser sends the login cookie along.
- :class:`BodyLimitMiddleware` refuses request bodies past 32 MB (files aside: gradio's upload routes bound each
  file), which gradio would read whole before it checks the login.
- :class:`ContentPolicyMiddleware` gives the page a Content-Security-Policy: nothing it shows (a model's reply, a
  quoted name) can load images or media from elsewhere or send a form elsewhere.
- ``tokenized_path``, ``export_dir``, ``cache_dir`` and ``ray_storage_path`` in a config submitted through the API
  must lie under one of the allowed roots (``--allowed-root`` / ``$LF_BOARD_ALLOWED_ROOTS``; default: the
  workspace).
"""

from __future__ import annotations

import abc
import contextvars
import hashlib
import hmac
import ipaddress
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.hostnames import host_name, names_this_machine, origin_host

ALLOWED_ROOTS_ENV = "LF_BOARD_ALLOWED_ROOTS"
MAX_UPLOAD_ENV = "LF_BOARD_MAX_UPLOAD_MB"
DEFAULT_MAX_UPLOAD_MB = 512
PATH_KEYS = ("tokenized_path", "export_dir", "cache_dir", "ray_storage_path")
"""Config keys naming a folder the job writes to, checked against the allowed roots (``output_dir`` is always the
run's own folder)."""

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


class HTTPMiddleware(abc.ABC):
    """A plain ASGI middleware that handles HTTP requests (:meth:`handle`) and passes everything else through."""

    def __init__(self, app: Any):
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") != "http":
            await self.app(scope, receive, send)
            return
        await self.handle(scope, receive, send)

    @abc.abstractmethod
    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        """Serve one HTTP request (pass it to ``self.app``, wrapping ``send`` as needed)."""


class ClientAddressMiddleware(HTTPMiddleware):
    """Records the client's address and device cookie for :class:`LoginGuard` (gradio calls the guard in the
    request's own task), and adds the device cookie the guard hands out to the response."""

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        client = scope.get("client") or ("?", 0)
        info = LoginRequest(client=_address(client[0]), device=_cookie(scope, DEVICE_COOKIE))
        _request.set(info)

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start" and info.new_device:
                secure = "; Secure" if served_over_https(scope) else ""
                cookie = (f"{DEVICE_COOKIE}={info.new_device}; Path=/; Max-Age={DEVICE_MAX_AGE}; HttpOnly; "
                          f"SameSite=Lax{secure}")
                message = {**message, "headers": [*message.get("headers", []), (b"set-cookie", cookie.encode())]}
            await send(message)

        await self.app(scope, receive, send_with_cookie)


FORWARDED_ALLOW_ENV = "FORWARDED_ALLOW_IPS"
"""uvicorn's list of proxies whose forwarding headers it trusts (default: this machine's loopback addresses)."""


def _trusted_proxy(address: str) -> bool:
    """Whether a request from ``address`` comes from a proxy whose forwarding headers count (uvicorn's rule: an
    address or network in $FORWARDED_ALLOW_IPS, ``*`` for any; loopback when it is not set)."""
    allowed = os.environ.get(FORWARDED_ALLOW_ENV, "127.0.0.1,::1")
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return False
    for item in allowed.split(","):
        item = item.strip()
        if item == "*":
            return True
        try:
            if ip in ipaddress.ip_network(item, strict=False):
                return True
        except ValueError:
            continue
    return False


def _forwarded_https(headers: dict[bytes, bytes]) -> bool:
    """Whether forwarding headers say the browser's own connection is HTTPS (``X-Forwarded-Proto``, or RFC 7239's
    ``Forwarded: proto=https``, which uvicorn does not read); the first (client-side) hop's word counts."""
    proto = headers.get(b"x-forwarded-proto", b"").decode("latin-1").split(",")[0].strip().lower()
    if proto == "https":
        return True
    first = headers.get(b"forwarded", b"")[:MAX_COOKIE_HEADER].decode("latin-1").split(",")[0]
    return any(part.strip().lower().replace('"', "") == "proto=https" for part in first.split(";"))


def served_over_https(scope: dict[str, Any]) -> bool:
    """Whether the browser reaches the board over HTTPS, so its cookies may be ``Secure``: the request came over TLS
    (the server's own, or a trusted proxy's ``X-Forwarded-Proto`` that uvicorn turned into the scheme), a trusted
    proxy says so in ``Forwarded``, or the page that sent it is an ``https://`` page (``Origin``: the guard has let
    through only the board's own page, the one a TLS proxy or a share link serves; a browser cannot forge it).
    Never on plain ``http://localhost``, where a Secure cookie would not be kept and the device would be lost."""
    if scope.get("scheme") in ("https", "wss"):
        return True
    headers = {key.lower(): value for key, value in scope.get("headers") or []}
    if headers.get(b"origin", b"").strip().lower().startswith(b"https://"):
        return True
    client = (scope.get("client") or ("?", 0))[0]
    return _trusted_proxy(str(client)) and _forwarded_https(headers)


MAX_BODY_BYTES = 32 << 20
"""The largest request body the board reads, files aside (a page's event carries a config of at most 1,000,000
characters, a conversation, a form's values)."""
STREAMED_ROUTES = ("/gradio_api/upload", "/gradio_api/process_recording")
"""gradio's file routes: they stream the body to disk, each file bounded by ``--max-upload-mb``."""


class BodyLimitMiddleware(HTTPMiddleware):
    """Refuses (413) a request body past :data:`MAX_BODY_BYTES`, files sent to gradio's upload routes aside.

    gradio reads and parses a whole body before it checks anything, the login included: a 200 MB body took the board
    from 0.2 to 1.5 GB (0.8 GB refused as not logged in), so a client that cannot log in could still have a board
    served with ``--auth`` killed for its memory with a few such requests. A body with a Content-Length past the
    limit is refused before it is read; one without (chunked) is read up to the limit, then handed on whole."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES):
        super().__init__(app)
        self.max_bytes = max_bytes

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        path = str(scope.get("path") or "").rstrip("/")
        if scope.get("method") in ("GET", "HEAD", "OPTIONS") or path.endswith(STREAMED_ROUTES):
            await self.app(scope, receive, send)
            return
        declared = {key.lower(): value for key, value in scope.get("headers") or []}.get(b"content-length", b"")
        if declared.strip().isdigit() and int(declared) > self.max_bytes:
            await self._refuse(send, int(declared))
            return
        chunks, size = [], 0
        while True:
            message = await receive()
            if message.get("type") != "http.request":  # the client went away
                return
            chunks.append(message.get("body", b""))
            size += len(chunks[-1])
            if size > self.max_bytes:
                await self._refuse(send, size)
                return
            if not message.get("more_body"):
                break
        whole = [{"type": "http.request", "body": b"".join(chunks), "more_body": False}]

        async def replay() -> dict[str, Any]:
            return whole.pop() if whole else await receive()

        await self.app(scope, replay, send)

    async def _refuse(self, send: Any, size: int) -> None:
        body = (f"LF Board refuses a request body of {size:,} bytes or more: it reads at most {self.max_bytes:,} "
                "(files go through the upload, up to --max-upload-mb).\n").encode()
        await send({"type": "http.response.start", "status": 413,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode()), (b"connection", b"close")]})
        await send({"type": "http.response.body", "body": body})


DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _port(netloc: str, scheme: str) -> int | None:
    """The port of ``host[:port]``: the scheme's default when none is given, None when it is no number."""
    value = netloc.strip()
    if value.startswith("["):
        rest = value.partition("]")[2]
    elif value.count(":") > 1:  # a bare IPv6 address
        rest = ""
    else:
        rest = "".join(value.partition(":")[1:])
    if not rest:
        return DEFAULT_PORTS.get(scheme.lower())
    digits = rest[1:]
    return int(digits) if rest.startswith(":") and digits.isdigit() and digits.isascii() else None


def same_origin(origin: str, host: str, scheme: str) -> bool:
    """Whether the page at ``origin`` (an ``Origin`` header) is the one served under ``host`` (the ``Host`` header
    of a request that arrived over ``scheme``): the same host name and port. An SSH tunnel or a port forward keeps
    them equal (the browser sends the forwarded port in both); a page of another port never is."""
    origin_scheme, sep, rest = origin.strip().partition("://")
    if not sep:
        return False
    netloc = rest.split("/", 1)[0]
    port = _port(netloc, origin_scheme)
    return port is not None and (host_name(netloc), port) == (host_name(host), _port(host, scheme))


def own_page(origin: str, host: str, scheme: str) -> bool:
    """Whether ``origin`` is the page served under ``host`` on a board that answers any host name: :func:`same_origin`,
    or, for a ``Host`` without a port, the same host name on the default port of the origin's own scheme. A share
    link or a reverse proxy that ends TLS before the board hands it ``https://NAME`` pages over plain HTTP, so the
    request's scheme is not the page's; a browser always puts a port other than its scheme's default in ``Host``."""
    if same_origin(origin, host, scheme):
        return True
    origin_scheme, sep, rest = origin.strip().partition("://")
    netloc = rest.split("/", 1)[0]
    no_port = ":" not in host.strip().rpartition("]")[2]
    return (bool(sep) and no_port and host_name(netloc) == host_name(host)
            and _port(netloc, origin_scheme) == DEFAULT_PORTS.get(origin_scheme.lower()))


OTHER_SITES = (b"cross-site", b"same-site")
"""``Sec-Fetch-Site`` values of a request another page made: another site's, or another port's of this one."""


class HostGuardMiddleware:
    """A plain ASGI middleware: on a board without a login, HTTP and websocket requests whose ``Host`` (or, when
    present, ``Origin``) names anything but a loopback name or the address the board serves on get 403, and so do
    those from a page of another origin (:func:`same_origin`: a page another local server shows on another port).

    A board with a login answers any host name (a rebound page cannot log in: the browser keeps the login cookie for
    the board's own name), and so does one the user chose to serve openly (``--allow-insecure``): both are built with
    ``open_hosts=True``, for reverse proxies and share links. They still refuse a page of another origin
    (:func:`own_page`): gradio's login cookie is ``SameSite=None`` over HTTPS and sent to another port of the same
    name over HTTP, and gradio answers such pages with CORS and credentials, so another site's page (or another local
    server's) could read the login token at /gradio_api/token and start runs with it. Every board also refuses a
    request the browser marks as sent by another site or port's page (``Sec-Fetch-Site``) unless it opens the board
    (a link to it); a request without an ``Origin`` (scripts, gradio_client) is not a page's.
    """

    def __init__(self, app: Any, bind_host: str = "127.0.0.1", open_hosts: bool = False):
        self.app, self.bind_host, self.open_hosts = app, host_name(bind_host), open_hosts

    def refusal(self, scope: dict[str, Any]) -> str | None:
        """Why this request is refused, or None."""
        headers = {key.lower(): value for key, value in scope.get("headers") or []}
        host = headers.get(b"host", b"").decode("latin-1")
        if not self.open_hosts and not names_this_machine(host_name(host), self.bind_host):
            return f"requests for host '{host[:100]}'"
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1")
            if text == "null" or not self.open_hosts and not names_this_machine(origin_host(text), self.bind_host):
                return f"requests from the page at '{text[:100]}'"
            # another port of this machine is another site: a local server's page (a notebook, a docs preview,
            # another app) would otherwise get gradio's CORS answer for loopback origins, credentials included
            mine = own_page if self.open_hosts else same_origin
            if not mine(text, host, str(scope.get("scheme") or "http")):
                return f"requests from the page at '{text[:100]}', which is not the board's own page"
        site, mode = headers.get(b"sec-fetch-site", b"").lower(), headers.get(b"sec-fetch-mode", b"").lower()
        if site in OTHER_SITES and mode != b"navigate":
            return f"requests made by a page of another site or port (Sec-Fetch-Site: {site.decode('latin-1')})"
        return None

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope.get("type") not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        why = self.refusal(scope)
        if why is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            await send({"type": "websocket.close", "code": 1008})
            return
        if self.open_hosts:
            body = (f"LF Board refuses {why}: only the board's own page may use it (another page would act with "
                    "your login). Open the board at its own address; behind a reverse proxy, pass the browser's Host "
                    "header on (nginx: proxy_set_header Host $http_host).\n").encode()
        else:
            body = (f"LF Board refuses {why}: this board has no login, so it answers only its own page on this "
                    "machine (http://127.0.0.1:PORT or http://localhost:PORT). To reach it under another name, start "
                    "it with --auth USER:PASS.\n").encode()
        await send({"type": "http.response.start", "status": 403,
                    "headers": [(b"content-type", b"text/plain; charset=utf-8"),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


CONTENT_POLICY = ("img-src 'self' data: blob:; media-src 'self' data: blob:; frame-src 'self'; object-src 'none'; "
                  "form-action 'self'; base-uri 'self'; frame-ancestors 'self'")
"""The page's Content-Security-Policy: images, sound, video and frames from the board alone, forms sent to it alone.
The page shows text from outside (model replies in the chat, quoted names and errors); gradio's sanitizer keeps
``<img>``, ``<video>`` and ``<form>`` in it, and Markdown images, so without this a reply or a name could load a
remote image (and tell a third party the page was opened, and what the URL carries) or post a form elsewhere.
No other page may frame the board (``frame-ancestors``): a page of another local port framed a logged-in board,
drawn and working under its own decoy ("clickjacking": a click meant for the page presses Start or Abort).
Scripts and styles are left to gradio's own rules (its page needs inline ones)."""


class ContentPolicyMiddleware(HTTPMiddleware):
    """Adds :data:`CONTENT_POLICY` to every HTTP response that sets none itself."""

    async def handle(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        async def send_with_policy(message: dict[str, Any]) -> None:
            if message.get("type") == "http.response.start":
                headers = list(message.get("headers", []))
                if not any(key.lower() == b"content-security-policy" for key, _ in headers):
                    headers.append((b"content-security-policy", CONTENT_POLICY.encode()))
                    message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_policy)


MAX_COOKIE_HEADER = 65536
"""Bytes of a Cookie header searched for the device cookie (browsers send at most a few KB)."""


def _address(value: Any) -> str:
    """The client's address, normalised; anything that is not an IP address (a forged forwarding header) is "?"."""
    try:
        return str(ipaddress.ip_address(str(value).strip()))
    except ValueError:
        return "?"


def _cookie(scope: dict[str, Any], name: str) -> str:
    """The value of cookie ``name`` (the last one given), split by ``;`` as browsers join them: linear in the
    header and lenient to other cookies' syntax (http.cookies drops the whole header at the first value it rejects,
    and is quadratic on some quoted values)."""
    found = ""
    for key, value in scope.get("headers") or []:
        if key.lower() != b"cookie":
            continue
        for part in value[:MAX_COOKIE_HEADER].decode("latin-1").split(";"):
            cookie_name, sep, cookie_value = part.partition("=")
            if sep and cookie_name.strip() == name:
                found = cookie_value.strip().strip('"')
    return found


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
    """Counts remembered at most; beyond it, address counts are forgotten (see :meth:`_forget_addresses`)."""

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
    def _sign(self, device_id: str, issued: int) -> str:
        mac = hmac.new(self._key, f"{self.user}\0{device_id}\0{issued}".encode(), hashlib.sha256).hexdigest()[:32]
        return f"{device_id}.{issued}.{mac}"

    def _device(self, cookie: str) -> str | None:
        """The device id of a valid, unexpired cookie for the board's user, else None."""
        if not cookie or len(cookie) > 100 or not cookie.isascii():
            return None
        device_id, _, rest = cookie.partition(".")
        issued, _, mac = rest.partition(".")
        if not device_id or not mac or not issued.isdigit():
            return None
        if not 0 <= time.time() - int(issued) <= DEVICE_MAX_AGE:
            return None
        return device_id if hmac.compare_digest(self._sign(device_id, int(issued)).encode(), cookie.encode()) else None

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
        return self._wait(self._keys(user, request or _current()))

    def _wait(self, keys: list[str]) -> float:
        now = self.clock()
        with self._lock:
            return max([self._until.get(key, 0.0) - now for key in keys] + [0.0])

    def __call__(self, user: str, password: str) -> bool:
        request = _current()
        keys = self._keys(user, request)
        wait = self._wait(keys)
        if wait > 0:  # one message whichever pause applies: it tells nothing about the user name
            raise _http_error(f"Too many failed logins: wait {int(wait) + 1} s, then try again.")
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
                self._forget_addresses()
        if ok:
            device = self._device(request.device)
            device_id = device if device is not None else secrets.token_urlsafe(12).replace(".", "_")
            request.new_device = self._sign(device_id, int(time.time()))  # a fresh cookie, 30 more days
        return ok

    def _forget_addresses(self) -> None:
        """Drop address counts (called with the lock held, past MAX_TRACKED): those not paused now, then the oldest,
        down to half the limit. Never the user name's or a device's count (their number is bounded: the one user
        name, and one device per successful login), so neither is reset by filling the table."""
        now = self.clock()
        addresses = [k for k in self._failures if k.startswith("ip:")]
        idle = [k for k in addresses if self._until.get(k, 0.0) <= now]
        busy = [k for k in addresses if self._until.get(k, 0.0) > now]
        for key in idle + busy[:max(0, len(busy) - self.MAX_TRACKED // 2)]:
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


def upload_too_large(path: str | Path, limit_mb: int) -> int | None:
    """The size in MB (rounded) of an uploaded file above the board's upload limit, else None; the caller says it
    in the page's language (``upload_too_large``)."""
    size = Path(path).stat().st_size
    return round(size / 1024 / 1024) if size > limit_mb * 1024 * 1024 else None


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
    """A problem for every folder of :data:`PATH_KEYS` outside the allowed roots."""
    problems = []
    ray = bool(mapping.get("use_ray")) or os.environ.get("USE_RAY", "").lower() in ("1", "true")
    for key in PATH_KEYS:
        value = mapping.get(key)
        if value in (None, "") or (key == "ray_storage_path" and not ray):  # only Ray writes there
            continue
        if "\0" in str(value):  # no path holds one (resolve() raised ValueError); the config's checks name it
            continue
        path = Path(str(value)).expanduser()
        if not path.is_absolute():
            problems.append(f"`{key}: {value}` must be an absolute path under an allowed folder "
                            f"({', '.join(map(str, roots))}).")
            continue
        resolved = path.resolve()
        if key == "export_dir" and resolved in roots:  # an export locks its folder from beside it, in its parent
            problems.append(f"`{key}: {value}` is an allowed folder itself, and an export also writes its lock file "
                            f"beside its folder (.{resolved.name}.export.lock); use a folder under it, such as "
                            f"{resolved / 'merged'}.")
            continue
        if not any(resolved == root or root in resolved.parents for root in roots):
            problems.append(f"`{key}: {value}` is outside the folders this board may write to "
                            f"({', '.join(map(str, roots))}). Use a folder under one of them, or ask the board's "
                            f"owner to add one with --allowed-root (or ${ALLOWED_ROOTS_ENV}).")
    return problems
