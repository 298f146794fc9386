"""An OpenAI-compatible chat server built on the standard library's ``http.server``.

Endpoints: ``GET /health``, ``GET /v1/models`` and ``POST /v1/chat/completions`` (streaming with server-sent
events, or one JSON answer). One generation runs at a time; a client that goes away stops its generation.
:func:`serve` runs the server for ``lf-engine api`` and records its address in the run folder's run.json.
"""

from __future__ import annotations

import hmac
import json
import logging
import os
import select
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from engine import collector
from engine.config import RunConfig
from engine.credentials import API_KEY_ENV, LF_API_KEY_ENV, api_key_from_env  # noqa: F401 (re-exported)
from engine.hostnames import WILDCARD_HOSTS, host_name, is_loopback_name, names_this_machine, origin_host
from engine.infer.board_watch import DEFAULT_GRACE, BoardWatch
from engine.infer.listen_address import bare_host, cannot_listen, listen_family, netloc
from engine.infer.openai_format import (  # noqa: F401 (convert_* re-exported)
    RequestError,
    convert_messages,
    convert_tools,
    finish_reason,
    generation_overrides,
    openai_tool_calls,
    stop_strings,
    usage_of,
)
from engine.runs import RunFolder, package_versions, process_start_time

if TYPE_CHECKING:  # imported where a model loads: torch and transformers take seconds, and `lf-engine api` binds
    from engine.infer.chat import ChatModel  # its port before that (a taken port is refused at once)

logger = logging.getLogger(__name__)

MAX_BODY_BYTES = 16 * 1024 * 1024
CHAT_PATH = "/v1/chat/completions"


class ChatServer(ThreadingHTTPServer):
    """The HTTP server; holds the chat model and the lock that keeps generations one at a time."""

    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int], chat_model: ChatModel | None, model_name: str | None = None, *,
                 api_key: str | None = None, bind_and_activate: bool = True):
        self.address_family = listen_family(str(address[0]))  # `--host ::` or `::1`: an IPv6 socket
        super().__init__(address, ChatHandler, bind_and_activate=bind_and_activate)
        self.chat_model = chat_model
        self.model_name = model_name or getattr(chat_model, "model_name", "model")
        self.generation_lock = threading.Lock()
        self.started = int(time.time())
        self.api_key = api_key or None
        self.bind_host = host_name(str(address[0]))

    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that reset or dropped its connection between requests is routine, not a traceback."""
        if isinstance(sys.exc_info()[1], GONE):
            logger.debug("Client %s went away: %s", client_address, sys.exc_info()[1])
            return
        super().handle_error(request, client_address)

    def host_allowed(self, name: str) -> bool:
        """Whether a request naming host ``name`` (Host header or Origin) may be served.

        Loopback names always; the address the server was started with; any name when the server listens on
        every interface *and* requires an API key (a page that rebinds a name to us cannot know the key).
        """
        if names_this_machine(name, self.bind_host):
            return True
        return self.bind_host in WILDCARD_HOSTS and self.api_key is not None


CLIENT_TIMEOUT = 120.0
"""Seconds a client may leave its connection without progress (sending its request, or reading a reply) before it is
dropped. Generations run one at a time, so a client that stopped reading a long streamed reply would otherwise hold
every other client's turn for as long as it kept the connection open."""

GONE = (BrokenPipeError, ConnectionResetError, ConnectionAbortedError, TimeoutError)
"""How a client that went away, or stopped reading for :data:`CLIENT_TIMEOUT`, shows up in a write."""


class ChatHandler(BaseHTTPRequestHandler):
    """Handles one HTTP request."""

    server: ChatServer
    protocol_version = "HTTP/1.1"
    server_version = "lf-engine"
    timeout = CLIENT_TIMEOUT  # on the connection's socket: every read and write (socketserver applies it)

    def log_message(self, format: str, *args: Any) -> None:
        logger.info("%s - %s", self.address_string(), format % args)

    # -- plumbing ------------------------------------------------------------------------------------------
    def _send_json(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload, ensure_ascii=False).encode("utf-8")
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        if self.close_connection:
            # a reply after which this connection closes (a refused request's body is left unread) says so:
            # otherwise a keep-alive client pools the connection and its next request fails with "Server
            # disconnected without sending a response"
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)

    def _send_error(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        try:
            self._send_json(status, {"error": {"message": message, "type": kind, "code": status}})
        except GONE:  # the client has gone: nobody to tell
            self.close_connection = True

    def _refused(self, need_auth: bool = True, need_json: bool = False) -> bool:
        """Answer (and return True) when the request fails the Host, Origin, API-key or content-type checks."""
        host = host_name(self.headers.get("Host", ""))
        if not self.server.host_allowed(host):
            self.close_connection = True
            self._send_error(403, f"Host `{host or '(none)'}` is not served here: use http://127.0.0.1:"
                             f"{self.server.server_address[1]} (or the --host the server was started with).",
                             kind="forbidden")
            return True
        origin = self.headers.get("Origin")
        if origin is not None:
            if origin == "null" or not self.server.host_allowed(origin_host(origin)):
                self.close_connection = True
                self._send_error(403, f"Requests from web pages at {origin} are refused: browsers of other sites "
                                 "may not use this server.", kind="forbidden")
                return True
        if need_auth and self.server.api_key is not None:
            header = self.headers.get("Authorization", "")
            scheme, _, token = header.partition(" ")
            if scheme.lower() != "bearer" or not hmac.compare_digest(token.strip().encode(),
                                                                      self.server.api_key.encode()):
                self.close_connection = True
                self._send_json(401, {"error": {
                    "message": "A valid API key is required: send `Authorization: Bearer <key>` (the key given "
                               f"with --api-key or ${API_KEY_ENV}).",
                    "type": "invalid_api_key", "code": 401}}, headers={"WWW-Authenticate": 'Bearer realm="lf-engine"'})
                return True
        if need_json:
            kind = self.headers.get("Content-Type", "").split(";", 1)[0].strip().lower()
            if kind != "application/json":
                self.close_connection = True
                self._send_error(415, f"The body must be JSON with `Content-Type: application/json` (got "
                                 f"`{kind or 'none'}`).")
                return True
        return False

    def _read_body(self) -> dict[str, Any]:
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            raise RequestError("The Content-Length header must be a number.") from None
        if length <= 0:
            raise RequestError("The request has no body; send a JSON object.")
        if length > MAX_BODY_BYTES:
            self.close_connection = True
            raise RequestError(f"The request body is larger than {MAX_BODY_BYTES} bytes.", status=413)
        try:
            raw = self.rfile.read(length)
        except TimeoutError:
            self.close_connection = True
            raise RequestError(f"The request body did not arrive within {self.timeout:.0f} s.", status=408) from None
        try:
            body = json.loads(raw, parse_constant=_refuse_constant)
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise RequestError(f"The request body is not valid JSON: {err}.") from None
        except RecursionError:
            raise RequestError("The request body nests too deeply to be read.") from None
        except ValueError as err:  # NaN/Infinity (refused above), or a number of more than 4,300 digits
            raise RequestError(f"The request body has a value that cannot be read: {err}.") from None
        if not isinstance(body, dict):
            raise RequestError("The request body must be a JSON object.")
        return body

    # -- routes --------------------------------------------------------------------------------------------
    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._refused(need_auth=path != "/health"):
            return
        if path == "/health":
            self._send_json(200, {"status": "ok", "model": self.server.model_name})
        elif path == "/v1/models":
            self._send_json(200, {"object": "list", "data": [{
                "id": self.server.model_name, "object": "model", "created": self.server.started,
                "owned_by": "lf-board",
            }]})
        else:
            self._send_error(404, f"No route GET {path}; use /health, /v1/models or POST {CHAT_PATH}.")

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        if self._refused(need_json=True):
            return
        if path != CHAT_PATH:
            self._send_error(404, f"No route POST {path}; use POST {CHAT_PATH}.")
            return
        try:
            body = self._read_body()
            request = self._parse_chat(body)
        except RequestError as err:
            self._send_error(err.status, str(err))
            return
        with self.server.generation_lock:
            if _gone(self.connection):  # it left while it waited for its turn: no work for nobody
                self.close_connection = True
                logger.info("A client went away while it waited for its turn; its request is skipped.")
                return
            try:
                generation = self.server.chat_model.start(
                    request["messages"], request["system"], request["tools"], stop=request["stop"],
                    **({"media": request["media"]} if request["media"] else {}), **request["overrides"],
                )
            except ValueError as err:
                self._send_error(400, str(err))
                return
            except Exception as err:
                logger.exception("Generation failed to start")
                self._send_error(500, f"Generation failed: {err}", kind="server_error")
                return
            watcher = _DisconnectWatcher(self.connection, generation.cancel)
            try:
                if request["stream"]:
                    self._stream(generation, request)
                else:
                    self._complete(generation, request)
            except GONE as err:
                self.close_connection = True
                logger.info("Client went away or stopped reading (%s); generation stopped, the next request goes "
                            "ahead.", type(err).__name__)
            finally:
                watcher.stop()
                generation.close()

    def _parse_chat(self, body: dict[str, Any]) -> dict[str, Any]:
        n = body.get("n", 1)
        if isinstance(n, bool) or n not in (1, None):
            raise RequestError("Only `n: 1` is supported.")
        for key in ("stream", "logprobs"):
            if body.get(key) is not None and not isinstance(body[key], bool):
                raise RequestError(f"`{key}` must be true or false.")
        media: dict[str, list] = {}
        messages, system = convert_messages(body.get("messages"), media)
        # before the request waits for its turn: a prompt that cannot fit the model is refused without tokenizing
        try:
            self.server.chat_model.check_prompt_size([system or "", *(m.get("content") for m in messages)])
        except ValueError as err:
            raise RequestError(str(err)) from None
        tools = None if body.get("tool_choice") == "none" else convert_tools(body.get("tools"))
        stream_options = body.get("stream_options") or {}
        return {
            "messages": messages,
            "media": media,
            "system": system,
            "tools": tools,
            "stop": stop_strings(body.get("stop")),
            "overrides": generation_overrides(body),
            "stream": bool(body.get("stream", False)),
            "include_usage": bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "created": int(time.time()),
        }

    def _complete(self, generation: Any, request: dict[str, Any]) -> None:
        try:
            generation.wait()
            reply = self.server.chat_model.finish(generation)
        except Exception as err:
            logger.exception("Generation failed")
            self._send_error(500, f"Generation failed: {err}", kind="server_error")
            return
        message: dict[str, Any] = {"role": "assistant", "content": reply.text}
        if reply.thinking:
            message["reasoning_content"] = reply.thinking
        if reply.tool_calls:
            message["tool_calls"] = openai_tool_calls(reply)
        self._send_json(200, {
            "id": request["id"],
            "object": "chat.completion",
            "created": request["created"],
            "model": self.server.model_name,
            "choices": [{"index": 0, "message": message, "finish_reason": finish_reason(reply.finish_reason)}],
            "usage": usage_of(reply.prompt_tokens, reply.completion_tokens),
        })

    def _stream(self, generation: Any, request: dict[str, Any]) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        for chunk in self._chunks(generation, request):  # a client gone (GONE) ends it: see do_POST
            self.wfile.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode("utf-8") + b"\n\n")
            self.wfile.flush()
        self.wfile.write(b"data: [DONE]\n\n")
        self.wfile.flush()

    def _chunks(self, generation: Any, request: dict[str, Any]) -> Iterator[dict[str, Any]]:
        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            return {
                "id": request["id"], "object": "chat.completion.chunk", "created": request["created"],
                "model": self.server.model_name,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            }

        yield chunk({"role": "assistant", "content": ""})
        try:
            if request["tools"]:
                # Tool calls are only known once the reply is complete: parse it, then send it in one piece.
                generation.wait()
                reply = self.server.chat_model.finish(generation)
                if reply.text:
                    yield chunk({"content": reply.text})
                if reply.tool_calls:
                    calls = [{"index": i, **call} for i, call in enumerate(openai_tool_calls(reply))]
                    yield chunk({"tool_calls": calls})
                finish, usage = finish_reason(reply.finish_reason), usage_of(reply.prompt_tokens, reply.completion_tokens)
            else:
                for piece in generation:
                    yield chunk({"content": piece})
                finish = finish_reason(generation.finish_reason)
                usage = usage_of(generation.prompt_tokens, generation.completion_tokens)
        except GONE:
            raise
        except Exception as err:
            logger.exception("Generation failed")
            yield {"error": {"message": f"Generation failed: {err}", "type": "server_error", "code": 500}}
            return
        yield chunk({}, finish)
        if request["include_usage"]:
            yield {**chunk({}), "choices": [], "usage": usage}


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"`{name}` is not a JSON number; send a finite number")


def _client_state(connection: socket.socket) -> str:
    """``"gone"`` (closed or broken), ``"data"`` (it sent more: a pipelined request) or ``"quiet"``, without waiting."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        if not readable:
            return "quiet"
        return "gone" if connection.recv(1, socket.MSG_PEEK) == b"" else "data"
    except (OSError, ValueError):
        return "gone"


def _gone(connection: socket.socket) -> bool:
    """Whether the client has closed its side of the connection (a pipelined request's data counts as present)."""
    return _client_state(connection) == "gone"


class _DisconnectWatcher:
    """Watches a client socket while a reply is generated and calls ``on_disconnect`` if the client closes it."""

    def __init__(self, connection: socket.socket, on_disconnect: Any, interval: float = 0.25):
        self._connection = connection
        self._on_disconnect = on_disconnect
        self._interval = interval
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="lf-disconnect-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._done.wait(self._interval):
            state = _client_state(self._connection)
            if state == "gone":
                self._on_disconnect()
            if state != "quiet":
                return  # closed, or the client sent more data (a pipelined request): stop watching

    def stop(self) -> None:
        self._done.set()
        self._thread.join()


def make_server(chat_model: ChatModel, host: str = "127.0.0.1", port: int = 8000, *,
                api_key: str | None = None) -> ChatServer:
    """Bind a :class:`ChatServer` (port 0 picks a free port; read it from ``server.server_address``).

    With ``api_key`` every route but ``/health`` needs ``Authorization: Bearer <api_key>``.
    """
    server = bind_server(host, port, api_key=api_key)
    open_server(server, chat_model)
    return server


def bind_server(host: str = "127.0.0.1", port: int = 8000, *, api_key: str | None = None) -> ChatServer:
    """A :class:`ChatServer` bound to ``host:port`` but not yet listening, and with no model yet.

    Bound before the model loads (seconds, for a big model minutes), so a port another process listens on is
    refused at once; not listening until :func:`open_server`, so a client sees the port closed while the model
    loads (as before), not a connection that hangs. ``server.server_address`` has the real port (port 0).
    """
    try:
        server = ChatServer((bare_host(host), port), None, api_key=api_key, bind_and_activate=False)
    except OSError as err:  # the address family: a host that does not resolve
        raise cannot_listen(host, port, err) from None
    try:
        server.server_bind()
    except OSError as err:
        server.server_close()
        raise cannot_listen(host, port, err) from None
    return server


def open_server(server: ChatServer, chat_model: ChatModel, model_name: str | None = None) -> None:
    """Give a server from :func:`bind_server` its model and start listening (closes the server if that fails)."""
    server.chat_model = chat_model
    server.model_name = model_name or getattr(chat_model, "model_name", "model")
    try:
        server.server_activate()
    except OSError as err:  # another process bound the same port with SO_REUSEADDR and listened first
        server.server_close()
        raise cannot_listen(server.bind_host, int(server.server_address[1]), err) from None


def serve(cfg: RunConfig, host: str = "127.0.0.1", port: int = 8000, run_dir: str | None = None, *,
          stop_event: threading.Event | None = None, chat_model: ChatModel | None = None,
          api_key: str | None = None, board_lock: str | None = None, board_grace: float = DEFAULT_GRACE,
          bound: ChatServer | None = None) -> None:
    """Load the chat model and serve the OpenAI-compatible API until SIGTERM/SIGINT (or ``stop_event``).

    With ``run_dir``, run.json records kind ``chat``, status, pid, host, the real port and ``ready`` (true once
    the model is loaded and the port is open); status becomes ``completed`` on a normal stop, ``failed`` when
    loading fails.

    Args:
        cfg: The run config (model, adapters, template, generation settings).
        host: The address to listen on.
        port: The port; 0 picks a free one.
        run_dir: The run folder, or None.
        stop_event: Setting this event stops the server (used by tests and embedding code).
        chat_model: An already loaded model to serve instead of loading one from ``cfg``.
        api_key: The bearer token clients must send (None: ``$LF_ENGINE_API_KEY`` or ``$API_KEY``; unset: none).
            It is never written to run.json or the log.
        board_lock: The workspace lock file of the board that started this server: the server stops once no board
            has held it for ``board_grace`` seconds (see :mod:`engine.infer.board_watch`). None: never.
        board_grace: Seconds without a board before that stop.
        bound: A server from :func:`bind_server` for ``host:port`` (``lf-engine api`` binds before it reads the
            config); None: bound here, before the model loads. Closed by this function.

    A stop by SIGTERM/SIGINT (the board's Unload, or Ctrl-C) is recorded as ``aborted``; a chat server holds no
    training state, so nothing is saved.
    """
    api_key = api_key or api_key_from_env()
    if bound is not None and api_key and bound.api_key is None:
        bound.api_key = api_key
    if api_key is None and not is_loopback_name(host_name(host)):
        logger.warning("Serving on %s without an API key: anyone who can reach this port can use the model. "
                       "Set --api-key or $%s.", host, API_KEY_ENV)
    folder = RunFolder(run_dir) if run_dir else None
    if folder is not None:
        folder.update(
            id=folder.info().get("id", folder.id), kind="chat", status="running", pid=os.getpid(),
            pgid=os.getpgid(0), pid_started=process_start_time(os.getpid()), started_at=time.time(), finished_at=None, exit_code=None, error=None,
            host=host, port=port, ready=False, versions=package_versions(),
        )
    owns_model = chat_model is None
    server = bound
    try:
        if server is None:
            server = bind_server(host, port, api_key=api_key)  # a taken port is refused before the model loads
        if chat_model is None:
            from engine.infer import chat

            chat_model = chat.ChatModel(cfg)
        open_server(server, chat_model)
        collector.settle()  # the model and the libraries live as long as the server
    except BaseException as err:
        if server is not None:
            server.server_close()
        if folder is not None:
            folder.update(status="failed", ready=False, finished_at=time.time(), exit_code=1,
                          error=f"{type(err).__name__}: {err}")
        raise
    real_port = int(server.server_address[1])
    stop = stop_event or threading.Event()
    signalled: list[int] = []

    def on_signal(signum: int, frame: Any) -> None:
        signalled.append(signum)
        stop.set()

    old_handlers = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            old_handlers[sig] = signal.signal(sig, on_signal)
        except ValueError:  # not in the main thread
            pass
    stopper = threading.Thread(target=lambda: (stop.wait(), server.shutdown()), name="lf-server-stop", daemon=True)
    stopper.start()
    orphaned: list[float] = []

    def on_board_gone(seconds: float) -> None:
        logger.info("No board has held the workspace for %s: stopping this chat server.", _minutes(seconds))
        orphaned.append(seconds)
        stop.set()

    watch = BoardWatch(board_lock, board_grace, on_board_gone).start() if board_lock else None
    if board_lock and not os.path.exists(board_lock):
        logger.warning("--board-lock %s does not exist: no board holds it, so this server stops in %s. lf-board "
                       "passes its workspace's .board.lock; leave --board-lock out to serve until stopped.",
                       board_lock, _minutes(board_grace))
    if folder is not None:
        folder.update(port=real_port, ready=True, url=f"http://{netloc(host, real_port)}/v1")
    logger.info("Serving %s at http://%s/v1 (POST %s).", server.model_name, netloc(host, real_port), CHAT_PATH)
    outcome: dict[str, Any] = {"status": "completed", "exit_code": 0, "error": None}
    try:
        server.serve_forever(poll_interval=0.2)
    except BaseException as err:
        outcome = {"status": "failed", "exit_code": 1, "error": f"{type(err).__name__}: {err}"}
        raise
    finally:
        stop.set()
        stopper.join()
        if watch is not None:
            watch.stop()
        server.server_close()
        for sig, handler in old_handlers.items():
            signal.signal(sig, handler)
        if owns_model:
            chat_model.unload()
        if signalled and outcome["status"] == "completed":
            outcome = {"status": "aborted", "exit_code": 0, "error": "Unloaded on request: the chat server was "
                       "stopped and its memory freed (a chat server holds no training state; nothing to save)."}
        elif orphaned and outcome["status"] == "completed":
            outcome = {"status": "aborted", "exit_code": 0, "error": (
                f"Stopped because no board had the workspace open for {_minutes(orphaned[0])} (the board that "
                "started this chat server was closed and not started again), to free the model's memory; start "
                "lf-board and Load the model again in Chat.")}
        if folder is not None:
            folder.update(ready=False, finished_at=time.time(), **outcome)
        logger.info("Server stopped.")


def _minutes(seconds: float) -> str:
    return f"{round(seconds / 60)} min" if seconds >= 90 else f"{round(seconds)} s"
