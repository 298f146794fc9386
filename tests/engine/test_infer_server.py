"""The OpenAI-compatible server: a real round trip over HTTP against a tiny model, SSE framing, errors."""

import http.client
import json
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import tinymodels

from engine.config import build_config
from engine.infer.chat import ChatModel, Reply
from engine.infer.server import RequestError, convert_messages, convert_tools, generation_overrides
from engine.runs import RunFolder


def build_tiny_model(folder):
    return tinymodels.build_tiny_model(folder, max_positions=512)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """`serve` running in a thread on a free port; yields (base url, run folder)."""
    from engine.infer.server import serve

    model_dir = build_tiny_model(tmp_path_factory.mktemp("tiny-server-model"))
    run_dir = tmp_path_factory.mktemp("chat-run")
    cfg = build_config({"model_name_or_path": str(model_dir), "template": "chatml", "do_sample": False,
                        "max_new_tokens": 6})
    stop = threading.Event()
    errors = []

    def target():
        try:
            serve(cfg, "127.0.0.1", 0, run_dir=str(run_dir), stop_event=stop)
        except BaseException as err:  # reported by the fixture below
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    folder = RunFolder(run_dir)
    deadline = time.time() + 60
    while not folder.info().get("ready") and time.time() < deadline and not errors:
        time.sleep(0.05)
    assert not errors, errors
    info = folder.info()
    assert info["ready"] is True
    yield f"http://127.0.0.1:{info['port']}", folder
    stop.set()
    thread.join(timeout=30)
    assert not thread.is_alive()
    assert not errors, errors


def post(base, body, raw=None):
    data = raw if raw is not None else json.dumps(body).encode("utf-8")
    request = urllib.request.Request(f"{base}/v1/chat/completions", data=data,
                                     headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, response.headers.get("Content-Type"), response.read().decode("utf-8")
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type"), err.read().decode("utf-8")


def sse_events(text):
    assert text.endswith("\n\n")
    blocks = text[:-2].split("\n\n")
    assert all(block.startswith("data: ") and "\n" not in block for block in blocks)
    return [block[len("data: "):] for block in blocks]


HELLO = {"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hello"}]}


def test_run_json_records_the_server(server):
    base, folder = server
    info = folder.info()
    assert (info["kind"], info["status"], info["host"]) == ("chat", "running", "127.0.0.1")
    assert info["port"] > 0 and base.endswith(str(info["port"])) and info["pid"] > 0


def test_health_and_models(server):
    base, _ = server
    with urllib.request.urlopen(f"{base}/health", timeout=10) as response:
        assert json.loads(response.read())["status"] == "ok"
    with urllib.request.urlopen(f"{base}/v1/models", timeout=10) as response:
        models = json.loads(response.read())
    assert models["object"] == "list" and models["data"][0]["object"] == "model"


def test_non_streaming_completion(server):
    base, _ = server
    status, kind, text = post(base, {**HELLO, "max_tokens": 4})
    assert status == 200 and kind.startswith("application/json")
    body = json.loads(text)
    assert body["object"] == "chat.completion" and body["id"].startswith("chatcmpl-")
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] == "length"
    usage = body["usage"]
    assert usage["completion_tokens"] == 4
    assert usage["total_tokens"] == usage["prompt_tokens"] + 4


def test_streaming_completion_uses_sse_and_done(server):
    base, _ = server
    status, kind, text = post(base, {**HELLO, "stream": True, "stream_options": {"include_usage": True}})
    assert status == 200 and kind.startswith("text/event-stream")
    events = sse_events(text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    assert all(c["object"] == "chat.completion.chunk" for c in chunks)
    assert len({c["id"] for c in chunks}) == 1
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == 6
    streamed = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[:-1])
    # Greedy decoding: the streamed text is the non-streamed answer.
    _, _, whole = post(base, HELLO)
    assert json.loads(whole)["choices"][0]["message"]["content"] == streamed.strip()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (None, "not valid JSON"),
        ({"messages": []}, "non-empty list"),
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "out of order"),
        ({"messages": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}]}, "last message"),
        ({"messages": [{"role": "wizard", "content": "a"}]}, "role 'wizard'"),
        ({"messages": [{"role": "user", "content": "a"}], "temperature": 9}, "temperature"),
        ({"messages": [{"role": "user", "content": "a"}], "max_tokens": 0}, "max_new_tokens"),
        ({"messages": [{"role": "user", "content": "a"}], "n": 2}, "n: 1"),
        ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "image_url"),
    ],
)
def test_bad_requests_get_400_with_a_message(server, body, message):
    base, _ = server
    status, kind, text = post(base, body, raw=b"{not json" if body is None else None)
    assert status == 400 and kind.startswith("application/json")
    assert message in json.loads(text)["error"]["message"]


USER = '{"messages": [{"role": "user", "content": "a"}]'


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (USER + ', "max_tokens": Infinity}', "Infinity"),
        (USER + ', "repetition_penalty": NaN}', "NaN"),
        (USER + ', "max_tokens": 1' + "0" * 5000 + "}", "cannot be read"),
        ('{"a": ' + "[" * 100_000 + "]" * 100_000 + "}", "nests too deeply"),
        (USER + ', "stream": "false"}', "`stream` must be true or false"),
        (USER + ', "n": true}', "n: 1"),
        (USER + ', "tools": [{"type": "function", "function": {"name": "f", "parameters": "x"}}]}',
         "JSON Schema object"),
        (USER + ', "tools": [{"type": "function", "function": {"name": 5}}]}', "name must be text"),
        ('{"messages": [{"role": "user", "content": "' + "hello world " * 20_000 + '"}]}', "far more than"),
        ('{"messages": [{"role": "user", "content": "' + "hello " * 700 + '"}]}', "this model reads at most 512"),
    ],
)
def test_unreadable_or_oversized_requests_get_400_and_the_server_goes_on(server, raw, message):
    """Bodies that had crashed the handler (no response), reached generation (500 with Python's words) or held the
    generation turn for a minute on a prompt 60 times the model's context. Found by an outside review."""
    base, _ = server
    started = time.monotonic()
    status, kind, text = post(base, None, raw=raw.encode("utf-8"))
    assert status == 400 and kind.startswith("application/json"), text
    assert message in json.loads(text)["error"]["message"]
    assert time.monotonic() - started < 10
    assert post(base, HELLO)[0] == 200


def test_unknown_route_is_404(server):
    base, _ = server
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(f"{base}/v2/nothing", timeout=10)
    assert info.value.code == 404
    assert "/v1/models" in json.loads(info.value.read())["error"]["message"]


def test_tool_calls_come_back_in_openai_shape(server, monkeypatch):
    base, _ = server
    call = {"name": "get_weather", "arguments": {"city": "Paris"}}
    monkeypatch.setattr(ChatModel, "finish", lambda self, generation: Reply(
        text="", tool_calls=[call], prompt_tokens=generation.prompt_tokens,
        completion_tokens=generation.completion_tokens, finish_reason="tool_calls"))
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                               "parameters": {"type": "object",
                                                              "properties": {"city": {"type": "string"}}}}}]
    body = {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": tools}
    status, _, text = post(base, body)
    assert status == 200
    choice = json.loads(text)["choices"][0]
    assert choice["finish_reason"] == "tool_calls"
    (sent,) = choice["message"]["tool_calls"]
    assert sent["type"] == "function" and sent["id"].startswith("call_")
    assert sent["function"]["name"] == "get_weather" and json.loads(sent["function"]["arguments"]) == call["arguments"]

    status, _, text = post(base, {**body, "stream": True})
    chunks = [json.loads(e) for e in sse_events(text)[:-1]]
    deltas = [c["choices"][0]["delta"] for c in chunks]
    (streamed,) = [d["tool_calls"] for d in deltas if "tool_calls" in d]
    assert streamed[0]["index"] == 0 and streamed[0]["function"]["name"] == "get_weather"
    assert chunks[-1]["choices"][0]["finish_reason"] == "tool_calls"


def test_client_disconnect_stops_generation(server, monkeypatch):
    base, _ = server
    started = []
    original = ChatModel.start

    def recording_start(self, *args, **kwargs):
        generation = original(self, *args, **kwargs)
        started.append(generation)
        return generation

    monkeypatch.setattr(ChatModel, "start", recording_start)
    host, port = base.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=30)
    body = json.dumps({"messages": [{"role": "user", "content": "Hello"}], "stream": True, "max_tokens": 5000})
    connection.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    assert response.status == 200
    assert response.readline().startswith(b"data: ")
    response.close()
    connection.close()
    deadline = time.time() + 30
    while not (started and not started[0]._thread.is_alive()) and time.time() < deadline:
        time.sleep(0.05)
    generation = started[0]
    assert not generation._thread.is_alive()
    assert generation.completion_tokens < 5000
    # The server is free again for the next request.
    assert post(base, HELLO)[0] == 200


def test_sigterm_stops_the_server_and_marks_the_run_aborted(tmp_path):
    model_dir = build_tiny_model(tmp_path / "model")
    run_dir = tmp_path / "run"
    script = (
        "from engine.config import build_config\n"
        "from engine.infer.server import serve\n"
        f"cfg = build_config({{'model_name_or_path': {str(model_dir)!r}, 'template': 'chatml'}})\n"
        f"serve(cfg, '127.0.0.1', 0, run_dir={str(run_dir)!r})\n"
    )
    repo_root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-c", script], cwd=repo_root, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
    try:
        folder = RunFolder(run_dir)
        deadline = time.time() + 120
        while not folder.info().get("ready") and time.time() < deadline and process.poll() is None:
            time.sleep(0.1)
        info = folder.info()
        assert info.get("ready") is True, process.stderr.read().decode() if process.poll() is not None else info
        assert info["pid"] == process.pid and info["status"] == "running"
        with urllib.request.urlopen(f"http://127.0.0.1:{info['port']}/health", timeout=10) as response:
            assert response.status == 200
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=60) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    info = folder.info()
    assert (info["status"], info["ready"], info["exit_code"]) == ("aborted", False, 0)
    assert info["finished_at"] >= info["started_at"]


def test_a_board_started_server_ends_once_no_board_holds_the_workspace(tmp_path):
    """`lf-engine api --board-lock`: alive while a board holds the lock, past the grace too; once the board is gone
    for the grace period the server stops by itself and run.json says why."""
    import fcntl

    model_dir = build_tiny_model(tmp_path / "model")
    run_dir, lock = tmp_path / "run", tmp_path / ".board.lock"
    config = tmp_path / "chat.yaml"
    config.write_text(f"model_name_or_path: {model_dir}\ntemplate: chatml\n")
    board = open(lock, "a+")
    fcntl.flock(board, fcntl.LOCK_EX | fcntl.LOCK_NB)
    repo_root = Path(__file__).resolve().parents[2]
    process = subprocess.Popen([sys.executable, "-m", "engine", "api", str(config), "--port", "0", "--run-dir",
                                str(run_dir), "--board-lock", str(lock), "--board-grace", "1"], cwd=repo_root,
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        folder = RunFolder(run_dir)
        deadline = time.time() + 120
        while not folder.info().get("ready") and time.time() < deadline and process.poll() is None:
            time.sleep(0.1)
        assert folder.info().get("ready") is True, process.stderr.read().decode() if process.poll() else None
        time.sleep(2.5)  # longer than the grace, with the board holding its lock
        assert process.poll() is None
        board.close()  # the board goes away and does not come back
        assert process.wait(timeout=30) == 0
    finally:
        board.close()
        if process.poll() is None:
            process.kill()
            process.wait()
    info = folder.info()
    assert (info["status"], info["ready"], info["exit_code"]) == ("aborted", False, 0)
    assert "no board had the workspace open for 1 s" in info["error"] and "Load the model again" in info["error"]


def test_a_board_lock_that_does_not_exist_is_warned_about(tmp_path, caplog):
    from engine.infer.server import serve

    chat_model = type("Loaded", (), {"model_name": "m", "unload": lambda self: None})()
    stop = threading.Event()
    threading.Timer(0.5, stop.set).start()
    with caplog.at_level("WARNING", logger="engine.infer.server"):
        serve(None, "127.0.0.1", 0, stop_event=stop, chat_model=chat_model, board_lock=str(tmp_path / "typo.lock"),
              board_grace=120)
    assert "typo.lock does not exist: no board holds it, so this server stops in 2 min" in caplog.text


def test_board_grace_must_be_positive(tmp_path, capsys):
    from engine.cli import main

    assert main(["api", str(tmp_path / "missing.yaml"), "--board-lock", "x", "--board-grace", "0"]) != 0
    assert "--board-grace 0 must be a positive number of seconds" in capsys.readouterr().err


def _listening_port():
    import socket

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    return taken


def _no_load(*args, **kwargs):
    raise AssertionError("the model was loaded before the port was checked")


def test_a_taken_port_is_refused_before_the_config_checks_and_the_model_load(tmp_path, capsys, monkeypatch):
    """`lf-engine api --port N` with N taken found out only after the model's load (seconds; a big model minutes)."""
    from engine import cli
    from engine.infer import chat

    monkeypatch.setattr(chat, "ChatModel", _no_load)
    monkeypatch.setattr(cli, "_load", _no_load)
    with _listening_port() as taken:
        port = taken.getsockname()[1]
        assert cli.main(["api", str(tmp_path / "chat.yaml"), "--port", str(port)]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"Cannot listen on 127.0.0.1:{port} (Address already in use); another process listens" in err, err
    assert "Traceback" not in err


def test_a_taken_port_is_refused_before_torch_is_imported(tmp_path):
    """The refusal comes in about a second: the server module binds before it imports torch and transformers."""
    script = ("import sys\nfrom engine.cli import main\ncode = main(sys.argv[1:])\n"
              "print('torch imported' if 'torch' in sys.modules else 'torch not imported', code)\n")
    with _listening_port() as taken:
        port = taken.getsockname()[1]
        done = subprocess.run([sys.executable, "-c", script, "api", str(tmp_path / "chat.yaml"), "--port", str(port)],
                              capture_output=True, text=True, timeout=120, cwd=Path(__file__).resolve().parents[2])
    assert "torch not imported 2" in done.stdout, done.stdout + done.stderr
    assert f"Cannot listen on 127.0.0.1:{port}" in done.stderr


@pytest.mark.parametrize(("host", "shown"), [("2001:db8::1", "[2001:db8::1]:0"), ("192.0.2.1", "192.0.2.1:0")])
def test_a_host_it_cannot_listen_on_is_named_with_the_host_as_the_fix(host, shown, capsys):
    """An address of no interface here (IPv6 or IPv4) was told to 'choose another --port'."""
    from engine import cli

    assert cli.main(["api", "missing.yaml", "--host", host, "--port", "0"]) == cli.EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"Cannot listen on {shown} (" in err and "); give a --host this machine listens on" in err, err
    assert "choose another --port" not in err


def test_a_low_port_refused_for_its_rights_says_so():
    import errno

    from engine.infer.listen_address import cannot_listen

    message = str(cannot_listen("127.0.0.1", 80, PermissionError(errno.EACCES, "Permission denied")))
    assert message == ("Cannot listen on 127.0.0.1:80 (Permission denied); a port below 1024 needs administrator "
                       "rights: choose a port from 1024 up (0 picks a free one).")


def test_serve_refuses_a_taken_port_before_the_model_load_and_records_it(tmp_path, monkeypatch):
    from engine.errors import UserError
    from engine.infer import chat
    from engine.infer import server as chat_server

    monkeypatch.setattr(chat, "ChatModel", _no_load)
    with _listening_port() as taken:
        port = taken.getsockname()[1]
        with pytest.raises(UserError, match=f"Cannot listen on 127.0.0.1:{port} \\(Address already in use\\)"):
            chat_server.serve(None, "127.0.0.1", port, run_dir=str(tmp_path / "run"))
    info = RunFolder(tmp_path / "run").info()
    assert info["status"] == "failed" and "Cannot listen on" in info["error"] and info["ready"] is False


def test_the_port_is_bound_but_closed_while_the_model_loads(tmp_path, monkeypatch):
    """Bound early (another socket cannot bind the port), but not listening until the model is loaded: a client
    sees the port closed during the load, as before, not a connection that hangs until the load ends."""
    import socket

    from engine.infer import chat
    from engine.infer import server as chat_server

    seen = []

    def loading(cfg):
        port = int(seen_server[0].server_address[1])
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=5)
        with socket.socket() as other, pytest.raises(OSError, match="Address already in use"):
            other.bind(("127.0.0.1", port))
        seen.append(port)
        raise RuntimeError("stop here")

    seen_server = [chat_server.bind_server("127.0.0.1", 0)]
    monkeypatch.setattr(chat, "ChatModel", loading)
    with pytest.raises(RuntimeError, match="stop here"):
        chat_server.serve(None, "127.0.0.1", 0, bound=seen_server[0])
    assert seen and seen_server[0].socket.fileno() == -1  # checked during the load, and closed after it failed


# -- request conversion ---------------------------------------------------------------------------------------------


def test_convert_messages_maps_openai_roles():
    messages, system = convert_messages([
        {"role": "system", "content": "Be kind."},
        {"role": "user", "content": [{"type": "text", "text": "Weather "}, {"type": "text", "text": "in Paris?"}]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "tool", "tool_call_id": "call_2", "content": "20C"},
    ])
    assert system == "Be kind."
    assert [m["role"] for m in messages] == ["user", "function", "observation"]
    assert messages[0]["content"] == "Weather in Paris?"
    assert json.loads(messages[1]["content"]) == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert messages[2]["content"] == "sunny\n20C"
    with pytest.raises(RequestError, match="system message must come before"):
        convert_messages([{"role": "user", "content": "a"}, {"role": "system", "content": "b"}])
    with pytest.raises(RequestError, match="only system messages"):
        convert_messages([{"role": "system", "content": "b"}])


def test_convert_tools_and_overrides():
    assert convert_tools(None) is None
    assert convert_tools([{"type": "function", "function": {"name": "f"}}]) == [{"name": "f"}]
    with pytest.raises(RequestError, match="needs a `name`"):
        convert_tools([{"type": "function", "function": {}}])
    assert generation_overrides({"temperature": 0, "max_tokens": 5, "top_p": 0.5}) == {
        "temperature": 0.0, "do_sample": False, "max_new_tokens": 5, "top_p": 0.5}
    assert generation_overrides({"max_completion_tokens": 3, "max_tokens": 9}) == {"max_new_tokens": 3}


def test_a_client_that_resets_its_connection_leaves_no_traceback(server, capfd):
    """Clients that drop a kept-alive connection (a refused upload, a killed script) had each printed socketserver's
    "Exception occurred during processing of request" traceback into the server's log."""
    import socket
    import struct

    base, _ = server
    port = int(base.rsplit(":", 1)[1])
    for _ in range(3):
        conn = socket.create_connection(("127.0.0.1", port))
        conn.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert b" 200 " in conn.recv(4096).split(b"\r\n", 1)[0]
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close with a reset
        conn.close()
    time.sleep(0.5)
    assert post(base, HELLO)[0] == 200
    assert "Traceback" not in capfd.readouterr().err
