"""The page a browser gets while the board starts.

Importing gradio and building the workbench takes seconds (gradio's import alone 2-4 s here), and until the server
listens, a browser opened on the board's address shows "connection refused" and stays there. So ``lf-board`` first
listens with this small server of the standard library, a fraction of a second after it starts, and hands the port
to gradio's server once the workbench is built:

- a browser (a request that accepts ``text/html``) gets a short page saying the board is starting, in the board's
  language (``--lang``, else the browser's). The page asks the address again every quarter second and reloads once
  the answer is the workbench (or its login page), so it turns into the board by itself; while the port changes
  hands (a refused connection) it keeps asking;
- any other request (scripts, the API, gradio's client) gets ``503`` with ``Retry-After: 1``, never a ``200`` they
  could take for the board: a script that waits for the board as before still waits for the board.

The page shows nothing of the workspace and echoes nothing of the request; it is not cached (it would stand in for
the workbench), it may not be framed by another site and runs only its own script (a Content-Security-Policy with
the script's hash).
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
import logging
import socket
import socketserver
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

logger = logging.getLogger(__name__)

LOCALES = Path(__file__).resolve().parent.parent / "locales"
MARK = "X-LF-Board-Starting"
"""The response header that tells the starting page (and a test) that the answer is still this page."""

SCRIPT = (
    "(function(){var mark='" + MARK.lower() + "';function ask(){fetch(location.href,{cache:'no-store',"
    "headers:{Accept:'text/html'}}).then(function(r){if(r.ok&&!r.headers.get(mark)){location.reload();}"
    "else{setTimeout(ask,250);}},function(){setTimeout(ask,250);});}setTimeout(ask,250);})();"
)
CSP = ("default-src 'none'; script-src 'sha256-" + base64.b64encode(hashlib.sha256(SCRIPT.encode()).digest()).decode()
       + "'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'self'; base-uri 'none'; form-action 'none'")
PAGE = """<!doctype html>
<html lang="{lang}"><head><meta charset="utf-8"><title>LF Board</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>body{{font-family:system-ui,sans-serif;display:flex;align-items:center;justify-content:center;height:90vh;
color:#334;margin:0}}p{{font-size:1.2rem}}</style></head>
<body><p role="status">{text}</p><script>{script}</script></body></html>
"""


def starting_text(lang: str) -> str:
    """The page's sentence in ``lang`` (en or zh), read from the locale files (English where one lacks it)."""
    for name in (lang, "en"):
        try:
            text = json.loads((LOCALES / f"{name}.json").read_text(encoding="utf-8")).get("board_starting")
        except (OSError, ValueError):
            text = None
        if isinstance(text, str) and text:
            return text
    return "LF Board is starting..."


def page_language(board_lang: str, accept_language: str | None) -> str:
    """``zh`` or ``en``: the board's ``--lang``, else the browser's first choice of the two."""
    if board_lang in ("en", "zh"):
        return board_lang
    for part in (accept_language or "").split(","):
        tag = part.split(";")[0].strip().lower()
        if tag.startswith("zh"):
            return "zh"
        if tag.startswith("en"):
            return "en"
    return "en"


class StartingServer(ThreadingHTTPServer):
    """Listens on the board's address until :meth:`hand_over`; serves :data:`PAGE` to browsers and 503 to others."""

    daemon_threads = True
    allow_reuse_address = True  # as gradio's uvicorn binds: the port is free again the moment this one closes

    def __init__(self, host: str, port: int, lang: str = "auto"):
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
        self.address_family = family
        self.lang = lang
        self.pages = {name: PAGE.format(lang="zh-CN" if name == "zh" else "en", script=SCRIPT,
                                        text=html.escape(starting_text(name))).encode() for name in ("en", "zh")}
        super().__init__(address[:2] if family == socket.AF_INET else address, _Handler)
        self._thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="lf-board-starting", daemon=True)

    def server_bind(self) -> None:
        """Bind without ``http.server``'s reverse lookup of the host's name (``socket.getfqdn``: seconds where no
        name server answers)."""
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = str(self.server_address[0]), self.server_address[1]

    @property
    def port(self) -> int:
        return self.server_address[1]

    def start(self) -> StartingServer:
        self._thread.start()
        return self

    def hand_over(self) -> None:
        """Stop answering and free the port for the board's own server (idempotent)."""
        if self._thread.is_alive():
            self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    server: StartingServer
    protocol_version = "HTTP/1.0"  # one answer per connection: nothing holds the port when it changes hands
    timeout = 10  # a client that sends its request slowly, or never, lets go of its thread

    def do_GET(self) -> None:  # noqa: N802 (http.server's name)
        if "text/html" in (self.headers.get("Accept") or ""):
            lang = page_language(self.server.lang, self.headers.get("Accept-Language"))
            self._answer(200, "text/html; charset=utf-8", self.server.pages[lang])
        else:
            self._answer(503, "application/json", b'{"detail": "LF Board is starting; ask again in a moment"}',
                         {"Retry-After": "1"})

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(503, "application/json", b"", {"Retry-After": "1"}, send=False)

    def do_POST(self) -> None:  # noqa: N802
        self._answer(503, "application/json", b'{"detail": "LF Board is starting; ask again in a moment"}',
                     {"Retry-After": "1"})

    do_PUT = do_DELETE = do_PATCH = do_OPTIONS = do_POST  # noqa: N815

    def _answer(self, code: int, kind: str, body: bytes, extra: dict[str, str] | None = None, *,
                send: bool = True) -> None:
        self.send_response(code)
        for name, value in {"Content-Type": kind, "Content-Length": str(len(body)), "Cache-Control": "no-store",
                            MARK: "1", "Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
                            "Referrer-Policy": "no-referrer", **(extra or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        if send:
            self.wfile.write(body)

    def log_message(self, format: str, *args) -> None:  # noqa: A002 (http.server's name)
        logger.debug("starting page: " + format, *args)  # the request line never reaches the board's log at INFO
