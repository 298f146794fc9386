"""The page a browser gets while the board starts (app.starting_page): answered before gradio is imported, in the
board's language, never a 200 for a script, and the port handed to the board's own server."""

from __future__ import annotations

import json
import socket
import urllib.error
import urllib.request

import pytest

from app.starting_page import MARK, StartingServer, page_language
from tests.app.test_board_start import run_python


def _get(port: int, path: str = "/", **headers: str) -> tuple[int, dict, str]:
    request = urllib.request.Request(f"http://127.0.0.1:{port}{path}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, dict(err.headers), err.read().decode()


def test_browsers_get_the_page_and_scripts_a_503_until_the_port_is_handed_over():
    server = StartingServer("127.0.0.1", 0).start()
    port = server.port
    try:
        status, headers, body = _get(port, "/?view=train", Accept="text/html,application/xhtml+xml",
                                     **{"Accept-Language": "en-GB,en;q=0.9"})
        assert status == 200 and headers[MARK] == "1" and "LF Board is starting" in body
        assert headers["Cache-Control"] == "no-store"  # it must never stand in for the workbench from a cache
        assert "frame-ancestors 'self'" in headers["Content-Security-Policy"]
        assert "script-src 'sha256-" in headers["Content-Security-Policy"]  # its own script only
        assert "view=train" not in body  # nothing of the request is echoed
        zh = _get(port, Accept="text/html", **{"Accept-Language": "zh-CN,zh;q=0.9,en;q=0.5"})
        assert zh[0] == 200 and "正在启动" in zh[2] and 'lang="zh-CN"' in zh[2]
        for path in ("/", "/config", "/gradio_api/info"):  # urllib, gradio's client, curl: not a browser
            status, headers, body = _get(port, path)
            assert status == 503 and headers["Retry-After"] == "1" and "starting" in json.loads(body)["detail"]
        request = urllib.request.Request(f"http://127.0.0.1:{port}/gradio_api/call/list_runs", data=b"{}")
        with pytest.raises(urllib.error.HTTPError, match="503"):
            urllib.request.urlopen(request, timeout=10)
    finally:
        server.hand_over()
    server.hand_over()  # twice: nothing
    with socket.socket() as sock:  # the port is free for the board's own server at once
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))


def test_the_page_follows_the_boards_language_then_the_browsers():
    assert page_language("zh", "en-US,en") == "zh" and page_language("en", "zh-CN") == "en"
    assert page_language("auto", "fr-FR,zh-TW;q=0.8,en;q=0.5") == "zh"
    assert page_language("auto", "fr-FR") == "en" and page_language("auto", None) == "en"
    server = StartingServer("127.0.0.1", 0, lang="zh").start()
    try:
        assert "正在启动" in _get(server.port, Accept="text/html", **{"Accept-Language": "en"})[2]
    finally:
        server.hand_over()


def test_lf_board_answers_a_browser_before_importing_gradio_and_serves_on_that_port(tmp_path):
    """main() with the page build and launch faked: the starting page listens before gradio is imported, answers
    a browser while the workbench is built, and launch gets its port (``--port 0``: the port it was given) free."""
    code = f"""
import json, socket, sys, urllib.request
from app import main, starting_page
seen = {{}}
real_start = starting_page.StartingServer.start
def start(self):
    seen["gradio_before_page"] = "gradio" in sys.modules
    seen["port"] = self.port
    import app.ui  # gradio: only now
    app.ui.build_ui = build_ui
    return real_start(self)
starting_page.StartingServer.start = start
def build_ui(board):
    request = urllib.request.Request(f"http://127.0.0.1:{{seen['port']}}/", headers={{"Accept": "text/html"}})
    with urllib.request.urlopen(request, timeout=10) as response:
        seen["while_building"] = [response.status, response.headers.get({MARK!r}), "starting" in response.read().decode()]
    class Demo:
        local_url = "http://127.0.0.1/"
        def launch(self, **kwargs):
            seen["launch_port"] = kwargs["server_port"]
            with socket.socket() as sock:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                sock.bind(("127.0.0.1", kwargs["server_port"]))
            seen["free"] = True
        def block_thread(self):
            print(json.dumps(seen))
    return Demo()
main.main(["--workspace", {str(tmp_path / "ws")!r}, "--port", "0"])
"""
    found = run_python(code, tmp_path)
    assert found["gradio_before_page"] is False
    assert found["while_building"] == [200, "1", True]
    assert found["launch_port"] == found["port"] and found["free"] is True


def test_a_client_that_never_sends_its_request_holds_neither_the_hand_over_nor_a_thread_for_good(monkeypatch):
    import time

    from app import starting_page

    assert 0 < starting_page._Handler.timeout <= 30
    monkeypatch.setattr(starting_page._Handler, "timeout", 1)  # 10 s in the board
    server = StartingServer("127.0.0.1", 0).start()
    idle = socket.create_connection(("127.0.0.1", server.port))  # connected, says nothing
    try:
        time.sleep(0.2)
        started = time.time()
        server.hand_over()
        assert time.time() - started < 2
        idle.settimeout(15)
        assert idle.recv(1) == b""  # its thread gave up on it (the timeout) and closed it
    finally:
        idle.close()
