"""The chat worker refuses other sites' pages: Host and Origin checks, JSON only, a bearer key when configured."""

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import tinymodels

from engine.config import build_config
from engine.infer.chat import ChatModel
from engine.infer.server import API_KEY_ENV, LF_API_KEY_ENV, api_key_from_env, make_server
from engine.runs import RunFolder

KEY = "k-" + "x" * 30
HELLO = {"messages": [{"role": "user", "content": "Hello"}], "max_tokens": 2}


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    return tinymodels.build_tiny_model(tmp_path_factory.mktemp("tiny-secure"), max_positions=512)


@pytest.fixture(scope="module")
def servers(model_dir):
    """Two servers on free loopback ports over one model: (port with key, port without key)."""
    chat = ChatModel(build_config({"model_name_or_path": str(model_dir), "template": "chatml", "do_sample": False,
                                   "max_new_tokens": 2}))
    keyed, open_ = make_server(chat, "127.0.0.1", 0, api_key=KEY), make_server(chat, "127.0.0.1", 0)
    threads = [threading.Thread(target=s.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True)
               for s in (keyed, open_)]
    for thread in threads:
        thread.start()
    yield keyed.server_address[1], open_.server_address[1]
    for server in (keyed, open_):
        server.shutdown()
        server.server_close()
    chat.unload()


def request(port, method="POST", path="/v1/chat/completions", body=HELLO, headers=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    data = json.dumps(body).encode() if body is not None and method == "POST" else None
    sent = {"Content-Type": "application/json"} if data is not None else {}
    sent.update(headers or {})
    conn.request(method, path, body=data, headers=sent)
    response = conn.getresponse()
    payload = response.read().decode()
    conn.close()
    return response.status, payload


def test_a_key_is_required_when_configured(servers):
    keyed, _ = servers
    status, text = request(keyed)
    assert status == 401 and "Authorization: Bearer" in text and API_KEY_ENV in text
    assert request(keyed, headers={"Authorization": "Bearer wrong"})[0] == 401
    assert request(keyed, method="GET", path="/v1/models")[0] == 401
    assert request(keyed, headers={"Authorization": f"Bearer {KEY}"})[0] == 200
    assert request(keyed, method="GET", path="/v1/models", headers={"Authorization": f"Bearer {KEY}"})[0] == 200
    assert request(keyed, method="GET", path="/health")[0] == 200  # liveness needs no key


def test_refusals_say_the_connection_closes_so_a_keep_alive_client_does_not_reuse_it(servers):
    """A refused request's body is left unread and its connection closed; the reply says so (`Connection: close`).
    Without that, the board's pooled client sent its next request on the closed connection: "Server disconnected
    without sending a response" (seen in CI right after a 401)."""
    import httpx

    keyed, open_ = servers
    base = f"http://127.0.0.1:{keyed}/v1/chat/completions"
    with httpx.Client(timeout=60) as client:
        for _ in range(5):
            refused = client.post(base, json=HELLO)
            assert refused.status_code == 401 and refused.headers.get("connection") == "close"
            served = client.post(base, json=HELLO, headers={"Authorization": f"Bearer {KEY}"})
            assert served.status_code == 200
        foreign = client.post(base, json=HELLO, headers={"Host": "evil.example.com"})
        assert foreign.status_code == 403 and foreign.headers.get("connection") == "close"
        plain = client.post(f"http://127.0.0.1:{open_}/v1/chat/completions", content=b"hi",
                            headers={"Content-Type": "text/plain"})
        assert plain.status_code == 415 and plain.headers.get("connection") == "close"
        assert client.post(f"http://127.0.0.1:{open_}/v1/chat/completions", json=HELLO).status_code == 200


@pytest.mark.parametrize("host", ["evil.example.com", "evil.example.com:8000", "192.0.2.7", "attacker.localhost.evil"])
def test_foreign_host_headers_are_refused(servers, host):
    for port in servers:
        status, text = request(port, headers={"Host": host, "Authorization": f"Bearer {KEY}"})
        assert status == 403 and "not served here" in text


@pytest.mark.parametrize("host", ["localhost", "127.0.0.1", "[::1]:9", "LOCALHOST:80"])
def test_loopback_host_headers_pass(servers, host):
    assert request(servers[1], headers={"Host": host})[0] == 200


@pytest.mark.parametrize("origin", ["https://evil.example.com", "null", "http://192.0.2.7:8000"])
def test_cross_site_origins_are_refused(servers, origin):
    status, text = request(servers[1], headers={"Origin": origin})
    assert status == 403 and "refused" in text
    assert request(servers[1], headers={"Origin": "http://127.0.0.1:7860"})[0] == 200


@pytest.mark.parametrize("kind", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data", None])
def test_non_json_bodies_are_refused(servers, kind):
    conn = http.client.HTTPConnection("127.0.0.1", servers[1], timeout=30)
    headers = {"Content-Type": kind} if kind else {}
    conn.request("POST", "/v1/chat/completions", body=json.dumps(HELLO).encode(), headers=headers)
    response = conn.getresponse()
    assert response.status == 415 and "application/json" in response.read().decode()
    conn.close()


def test_api_key_from_the_environment():
    assert api_key_from_env({API_KEY_ENV: " abc "}) == "abc"
    assert api_key_from_env({LF_API_KEY_ENV: "lf"}) == "lf"  # LLaMA-Factory's API_KEY variable
    assert api_key_from_env({API_KEY_ENV: "ours", LF_API_KEY_ENV: "theirs"}) == "ours"
    assert api_key_from_env({}) is None
    assert LF_API_KEY_ENV == "API_KEY"


def test_worker_takes_its_key_from_the_environment_never_writes_it_and_records_aborted(model_dir, tmp_path):
    run_dir = tmp_path / "run"
    config = tmp_path / "chat.yaml"
    config.write_text(f"model_name_or_path: {model_dir}\ntemplate: chatml\nmax_new_tokens: 2\n", encoding="utf-8")
    env = {**os.environ, API_KEY_ENV: KEY, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    process = subprocess.Popen([sys.executable, "-m", "engine", "api", str(config), "--port", "0", "--run-dir",
                                str(run_dir)], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        folder = RunFolder(run_dir)
        deadline = time.time() + 120
        while not folder.info().get("ready") and time.time() < deadline and process.poll() is None:
            time.sleep(0.1)
        port = folder.info()["port"]
        assert KEY not in " ".join(folder.info().get("command") or [])
        assert request(port)[0] == 401
        assert request(port, headers={"Authorization": f"Bearer {KEY}"})[0] == 200
        process.send_signal(signal.SIGTERM)
        output = process.communicate(timeout=60)[0].decode()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    info = folder.info()
    assert info["status"] == "aborted" and "Unloaded" in info["error"] and "checkpoint" not in info["error"]
    assert KEY not in output
    for path in run_dir.rglob("*"):
        if path.is_file():
            assert KEY not in path.read_text(encoding="utf-8", errors="replace"), path
