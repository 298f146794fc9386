"""Failed-login backoff, the upload size limit, and the folders API configs may write to."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import gradio as gr
import pytest
from fastapi import HTTPException

from app import security
from app.api import Automation
from app.security import ALLOWED_ROOTS_ENV, LoginGuard, allowed_roots, max_upload_mb, path_problems
from app.tabs import train

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_logins_pause_after_repeated_failures_even_with_the_right_password(clock):
    guard = LoginGuard("alice", "s3cret", free_failures=5, base_delay=30, clock=clock)
    assert guard("alice", "s3cret")
    for _ in range(5):
        assert not guard("alice", "wrong")
    with pytest.raises(HTTPException) as refused:
        guard("alice", "s3cret")
    assert "Too many failed logins" in refused.value.detail and "wait 31 s" in refused.value.detail
    clock.now += 31
    assert not guard("alice", "wrong")  # one more failure: the pause doubles
    clock.now += 31
    with pytest.raises(HTTPException):
        guard("alice", "s3cret")
    clock.now += 30
    assert guard("alice", "s3cret")  # the pause is over; success clears the count
    assert not guard("alice", "wrong") and guard("alice", "s3cret")
    assert "5 wrong passwords" in guard.message


def test_guessing_many_user_names_from_one_address_pauses_that_address(clock):
    guard = LoginGuard("alice", "s3cret", free_failures=3, clock=clock)
    for name in ("bob", "carol", "dave"):
        assert not guard(name, "x")
    with pytest.raises(HTTPException, match="Too many failed logins"):
        guard("alice", "s3cret")  # same (unknown) client address


@pytest.fixture(autouse=True)
def _request():
    token = security._request.set(security.LoginRequest())
    yield
    security._request.reset(token)


def _from(address: str, device: str = "") -> security.LoginRequest:
    """A new request from ``address`` with ``device`` as its device cookie (what ClientAddressMiddleware records)."""
    request = security.LoginRequest(client=address, device=device)
    security._request.set(request)
    return request


def _owner_browser(guard: LoginGuard, address: str) -> str:
    """The device cookie the owner's browser gets from a successful login."""
    request = _from(address)
    assert guard("alice", "s3cret") and request.new_device
    return request.new_device


def test_guessing_from_many_addresses_pauses_the_user_but_not_the_owners_browser(clock):
    guard = LoginGuard("alice", "s3cret", free_failures=3, base_delay=30, clock=clock)
    cookie = _owner_browser(guard, "10.0.0.2")
    for n in range(3):  # one guess per address (or per forged X-Forwarded-For)
        _from(f"198.51.100.{n}")
        assert not guard("alice", "guess")
    _from("198.51.100.200")  # a fresh address is paused too: guesses stay bounded per user name
    with pytest.raises(HTTPException, match="Too many failed logins: wait 31 s"):
        guard("alice", "s3cret")
    _from("10.0.0.9", device=cookie)  # the owner's browser, even from another address, is not
    assert guard.wait_seconds("alice") == 0
    _from("10.0.0.9", device=cookie)
    assert not guard("alice", "typo")  # a typo there counts for that browser only
    _from("10.0.0.9", device=cookie)
    assert guard("alice", "s3cret")


def test_a_browsers_own_wrong_passwords_pause_it_and_a_forged_cookie_counts_for_nothing(clock):
    guard = LoginGuard("alice", "s3cret", free_failures=3, base_delay=30, clock=clock)
    cookie = _owner_browser(guard, "10.0.0.2")
    for _ in range(3):
        _from("10.0.0.2", device=cookie)
        assert not guard("alice", "guess")
    _from("10.0.0.2", device=cookie)
    with pytest.raises(HTTPException, match="Too many failed logins: wait 31 s"):
        guard("alice", "s3cret")
    device_id, issued, _ = cookie.split(".")
    expired = guard._sign(device_id, int(time.time()) - security.DEVICE_MAX_AGE - 10)
    for forged in (f"{device_id}.{issued}.{'0' * 32}", "x.y", "nodot", cookie + "0", "a" * 200, expired,
                   f"\xe9{cookie[1:]}", f"{device_id}.x.{cookie.split('.')[2]}"):
        _from("203.0.113.9", device=forged)
        assert guard._keys("alice", security._request.get()) == ["ip:203.0.113.9", "user"]
    other = LoginGuard("alice", "s3cret", clock=clock)  # a restarted board: earlier cookies are not trusted
    assert other._keys("alice", _from("10.0.0.2", device=cookie)) == ["ip:10.0.0.2", "user"]


def test_an_address_that_guesses_is_paused_for_every_name(clock):
    guard = LoginGuard("alice", "s3cret", free_failures=3, base_delay=30, clock=clock)
    _from("203.0.113.9")
    for name in ("bob", "carol", "dave"):
        assert not guard(name, "x")
    with pytest.raises(HTTPException, match="Too many failed logins: wait"):
        guard("alice", "s3cret")
    _from("10.0.0.2")
    assert guard("alice", "s3cret")  # other names never pause the user name


def test_pauses_stay_capped_after_any_number_of_failures_and_memory_stays_bounded(clock, monkeypatch):
    guard = LoginGuard("alice", "s3cret", free_failures=3, clock=clock)
    monkeypatch.setattr(LoginGuard, "MAX_TRACKED", 50)
    for n in range(2000):
        _from(f"192.0.2.{n}")
        try:
            assert not guard("alice" if n % 2 else f"user{n}", "x")
        except HTTPException as refused:
            assert "Too many failed logins" in refused.detail
        clock.now += 1000  # every pause (at most 15 min) over: each failure is counted
    assert guard._until["user"] - clock.now <= 900
    assert len(guard._failures) <= 51
    clock.now += 1000
    _from("192.0.2.1")
    assert guard("alice", "s3cret")


def test_filling_the_table_never_resets_a_devices_or_the_users_count(clock, monkeypatch):
    guard = LoginGuard("alice", "s3cret", free_failures=3, clock=clock)
    monkeypatch.setattr(LoginGuard, "MAX_TRACKED", 40)
    stolen = _owner_browser(guard, "10.0.0.2")
    for n in range(200):  # paused addresses, enough to overflow the table many times
        for _ in range(3):
            _from(f"198.51.100.{n}")
            assert not guard("bob", "x")
    refused = 0
    for n in range(20):
        _from(f"203.0.113.{n}", device=stolen)
        try:
            assert not guard("alice", f"guess{n}")
        except HTTPException:
            refused += 1
    assert refused == 17  # 3 guesses, then the browser is paused
    assert len(guard._failures) <= 41


@pytest.mark.parametrize("header", [
    'prefs={"theme":"dark"}; lfboard-device=COOKIE', "msg=hello world; lfboard-device=COOKIE",
    "version=1; lfboard-device=COOKIE", 'x="\\\\"; lfboard-device="COOKIE"', "lfboard-device=COOKIE;",
])
def test_the_device_cookie_is_found_beside_other_sites_cookies(header):
    scope = {"headers": [(b"host", b"x"), (b"cookie", header.encode())]}
    assert security._cookie(scope, security.DEVICE_COOKIE) == "COOKIE"


def test_cookie_parsing_is_linear_and_addresses_are_normalised():
    scope = {"headers": [(b"cookie", b'x="' + b"\\" * 200_000 + b'"; lfboard-device=v')]}
    started = time.perf_counter()
    assert security._cookie(scope, security.DEVICE_COOKIE) == ""  # past the searched part of the header
    assert time.perf_counter() - started < 0.5
    assert security._address("10.0.0.1") == "10.0.0.1" and security._address(" ::1 ") == "::1"
    assert security._address("<img src=x onerror=alert(1)>" * 100) == "?"


def test_upload_limit(board, tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as fh:
        fh.truncate(3 * 1024 * 1024)
    board.max_upload_mb = 2
    message, name = train.upload_dataset(board, str(big), "big", "en")
    assert name is None and "upload limit of 2 MB" in message and "--max-upload-mb" in message
    message = train.upload_dataset(board, str(big), "big", "zh")[0]  # was the English sentence in a Chinese frame
    assert message.startswith("无法注册该文件：文件大小为 3 MB，超过看板的上传上限 2 MB") and "--max-upload-mb" in message
    assert not (board.workspace.datasets_dir / "big.json").exists()
    assert max_upload_mb(None) == 512 and max_upload_mb(7) == 7
    with pytest.raises(ValueError, match="at least 1"):
        max_upload_mb(0)


def test_api_paths_must_stay_under_the_allowed_roots(board, tmp_path, monkeypatch):
    monkeypatch.delenv(ALLOWED_ROOTS_ENV, raising=False)
    auto = Automation(board)
    data = REPO_ROOT / "examples" / "data"
    base = f"model_name_or_path: demo\ntemplate: chatml\ndataset: demo_identity\ndataset_dir: {data}\n"
    outside = tmp_path / "elsewhere"
    with pytest.raises(gr.Error, match="outside the folders this board may write to"):
        auto.submit_run(base + f"tokenized_path: {outside / 'tok'}\n")
    with pytest.raises(gr.Error, match="--allowed-root"):
        auto.submit_run(base.replace("dataset: demo_identity\n", "") + "adapter_name_or_path: x\n"
                        "export_dir: /etc/lf-export\n", "export")
    with pytest.raises(gr.Error, match="must be an absolute path"):
        auto.submit_run(base + "tokenized_path: relative/tok\n")
    assert auto.submit_run(base + f"tokenized_path: {board.workspace.root / 'tok'}\n")
    board.extra_roots = [str(outside)]
    assert auto.submit_run(base + f"tokenized_path: {outside / 'tok'}\n")
    monkeypatch.setenv(ALLOWED_ROOTS_ENV, f"/srv/a{os.pathsep}/srv/b")
    assert allowed_roots(Path("/w"), None) == [Path("/w"), Path("/srv/a"), Path("/srv/b")]
    for mapping in ({"cache_dir": "/etc/x"}, {"ray_storage_path": "/etc/x", "use_ray": True}):  # hub downloads, Ray
        assert "is outside the folders this board may write to" in path_problems(mapping, allowed_roots(Path("/w")))[0]
    # a saved run's whole config (History's Resume) holds Ray's default folder, which nothing writes to without Ray
    assert path_problems({"ray_storage_path": "./saves", "use_ray": False}, allowed_roots(Path("/w"))) == []
    assert path_problems({"export_dir": "/srv/a/x/../y"}, allowed_roots(Path("/w"))) == []
    assert path_problems({"export_dir": "/srv/a/../c"}, allowed_roots(Path("/w")))
    # an export's lock lies beside its folder: an allowed folder itself would have it written outside the roots
    assert "is an allowed folder itself" in path_problems({"export_dir": "/srv/a/"}, allowed_roots(Path("/w")))[0]
    assert path_problems({"tokenized_path": "/srv/a"}, allowed_roots(Path("/w"))) == []


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def post_login(url: str, user: str, password: str, opener=None) -> tuple[int, str]:
    data = urllib.parse.urlencode({"username": user, "password": password}).encode()
    try:
        with (opener or urllib.request.build_opener()).open(urllib.request.Request(url + "login", data=data),
                                                              timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def login_from(source: str, port: int, user: str, password: str, headers: dict | None = None) -> int:
    """POST /login over a connection from the local address ``source``; the HTTP status."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30, source_address=(source, 0))
    try:
        conn.request("POST", "/login", urllib.parse.urlencode({"username": user, "password": password}),
                     {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})})
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.slow
def test_live_board_rate_limits_logins_and_limits_uploads(tmp_path):
    port = free_port()
    log = open(tmp_path / "board.log", "wb")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), GRADIO_ANALYTICS_ENABLED="False")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--workspace", str(tmp_path / "ws"), "--auth",
         "alice:s3cret", "--max-upload-mb", "1"],
        cwd=REPO_ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.time() + 120
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except urllib.error.HTTPError as err:  # the login page's 401 is the board; the starting page's 503 is not
                if err.code != 503:
                    break
                assert proc.poll() is None and time.time() < deadline, (tmp_path / "board.log").read_text()[-3000:]
                time.sleep(0.1)
            except OSError:
                assert proc.poll() is None and time.time() < deadline, (tmp_path / "board.log").read_text()[-3000:]
                time.sleep(0.1)
        import http.cookiejar

        session = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()))
        assert post_login(url, "alice", "s3cret", session)[0] == 200
        # logged in, the board's own page reads who is logged in (and gradio_api/token the login itself); another
        # local port's page may not
        own = urllib.request.Request(url + "gradio_api/user", headers={"Origin": url.rstrip("/")})
        with session.open(own, timeout=30) as response:
            assert response.read() == b'"alice"'
        other = urllib.request.Request(url + "gradio_api/user", headers={"Origin": f"http://127.0.0.1:{port + 1}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            session.open(other, timeout=30)
        assert refused.value.code == 403
        for _ in range(5):
            assert post_login(url, "alice", "nope")[0] == 400
        status, text = post_login(url, "alice", "s3cret")
        assert status == 400 and "Too many failed logins" in text
        # neither another address (Linux routes all of 127/8 to the loopback device) nor a forged forwarding header
        # gets more guesses: the user name is paused for browsers without a device cookie
        assert login_from("127.0.0.2", port, "alice", "s3cret") == 400
        assert login_from("127.0.0.3", port, "alice", "s3cret", {"X-Forwarded-For": "10.9.8.7"}) == 400
        # the browser that logged in before holds the board's device cookie: it is not locked out
        assert post_login(url, "alice", "s3cret", session)[0] == 200
        # uploads above --max-upload-mb are refused by the server itself
        boundary = "lfboardboundary"
        body = (f"--{boundary}\r\nContent-Disposition: form-data; name=\"files\"; filename=\"big.json\"\r\n"
                "Content-Type: application/json\r\n\r\n").encode() + b"[" + b" " * (2 * 1024 * 1024) + b"]\r\n" + \
            f"--{boundary}--\r\n".encode()
        request = urllib.request.Request(url + "gradio_api/upload", data=body,
                                         headers={"Content-Type": f"multipart/form-data; boundary={boundary}"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            session.open(request, timeout=30)  # logged in: only the size can refuse it
        assert refused.value.code == 413, refused.value.read()[:300]
        small = body.replace(b" " * (2 * 1024 * 1024), b" ")
        with session.open(urllib.request.Request(url + "gradio_api/upload", data=small, headers={
                "Content-Type": f"multipart/form-data; boundary={boundary}"}), timeout=30) as response:
            assert response.status == 200
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=20)
        log.close()


def _guarded(**options):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.testclient import TestClient

    async def hello(request):
        return PlainTextResponse("hello")

    async def socket(websocket):
        await websocket.accept()
        await websocket.send_text("hello")
        await websocket.close()

    app = Starlette(routes=[Route("/", hello, methods=["GET", "POST"]), WebSocketRoute("/ws", socket)])
    return TestClient(security.HostGuardMiddleware(app, **options), base_url="http://127.0.0.1:7860")


@pytest.mark.parametrize("host", ["127.0.0.1:7860", "localhost:7860", "[::1]:7860", "LOCALHOST", "board.localhost:1"])
def test_a_board_without_a_login_answers_this_machines_names(host):
    response = _guarded().get("/", headers={"Host": host, "Origin": f"http://{host}"})
    assert response.status_code == 200 and response.text == "hello"


@pytest.mark.parametrize("headers", [
    {"Host": "evil.example.com:7860"},  # a rebound name: the page's own origin, so the browser sends it along
    {"Host": "evil.example.com"},
    {"Host": "127.0.0.1:7860", "Origin": "http://evil.example.com"},  # a cross-site form post
    {"Host": "127.0.0.1:7860", "Origin": "null"},  # a sandboxed frame or a file:// page
    {"Host": ""},
    {"Host": "localhost:80@evil.example.com"},  # no host[:port]: user info and a name after it
    {"Host": "127.0.0.1:7860", "Origin": "http://127.0.0.1:7860.evil.example.com"},  # a port that is no number
    {"Host": "[::1]evil.example.com"},
])
def test_a_board_without_a_login_refuses_other_names_and_pages(headers):
    client = _guarded()
    response = client.post("/", headers=headers)
    assert response.status_code == 403
    assert "this board has no login" in response.text and "--auth USER:PASS" in response.text
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws", headers=headers) as ws:
        ws.receive_text()


@pytest.mark.parametrize("origin", [
    "http://localhost:8000",  # a page another local server shows (a notebook, a docs preview, another app)
    "http://127.0.0.1:7861",
    "http://127.0.0.1",  # port 80
    "https://127.0.0.1",  # port 443
    "http://localhost:7860",  # the same port under another name: another origin to the browser
])
def test_a_board_without_a_login_refuses_pages_of_other_local_origins(origin):
    """gradio answers loopback origins with CORS and credentials, so a page on another local port could read the
    API's answers and start runs; only the board's own page (Origin equal to Host, name and port) is served."""
    response = _guarded().post("/", headers={"Host": "127.0.0.1:7860", "Origin": origin})
    assert response.status_code == 403 and "not the board's own page" in response.text


@pytest.mark.parametrize(("host", "origin"), [
    ("127.0.0.1:7860", "http://127.0.0.1:7860"),
    ("localhost:8000", "http://localhost:8000"),  # an SSH tunnel's port: the browser sends it in both
    ("localhost", "http://localhost"),
    ("localhost:80", "http://localhost"),
    ("[::1]:7860", "http://[::1]:7860"),
])
def test_the_boards_own_page_is_served_through_any_local_port(host, origin):
    assert _guarded().post("/", headers={"Host": host, "Origin": origin}).text == "hello"


def test_the_bound_address_and_boards_with_a_login_answer_any_name():
    assert _guarded(bind_host="192.168.1.5").get("/", headers={"Host": "192.168.1.5:7860"}).status_code == 200
    assert _guarded(bind_host="192.168.1.5").get("/", headers={"Host": "evil.example.com"}).status_code == 403
    open_board = _guarded(open_hosts=True)  # --auth (a rebound page cannot log in) or --allow-insecure
    assert open_board.get("/", headers={"Host": "evil.example.com", "Origin": "http://evil.example.com"}).text == "hello"


@pytest.mark.parametrize(("host", "headers"), [
    # a page of another local server (a notebook) beside a board on 127.0.0.1 with --auth: the browser sends the
    # login cookie along (another port is the same site) and gradio answers it with CORS and credentials
    ("127.0.0.1:7860", {"Origin": "http://127.0.0.1:8888"}),
    ("localhost:7860", {"Origin": "http://localhost:8888"}),
    # another site's page beside a board served over HTTPS (a share link, a proxy): the cookie is SameSite=None
    ("board.example.com", {"Origin": "https://evil.example.com"}),
    ("board.example.com:8443", {"Origin": "https://evil.example.com:8443"}),
    ("board.example.com:8443", {"Origin": "https://board.example.com:9443"}),
    ("board.example.com", {"Origin": "https://board.example.com:8443"}),  # another port of the same name
    ("board.example.com", {"Origin": "null"}),  # a sandboxed frame or a file:// page
    # no Origin, but the browser says another site's or port's page sent it (an <img> or <script> of that page)
    ("board.example.com", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "no-cors"}),
    ("127.0.0.1:7860", {"Sec-Fetch-Site": "same-site", "Sec-Fetch-Mode": "no-cors"}),
])
def test_a_board_with_a_login_refuses_what_other_pages_send(host, headers):
    """With a login gradio's cookie rides along: a page at http://127.0.0.1:8888 read the token at /gradio_api/token
    and called /submit_run of a logged-in board at 127.0.0.1:7860 in Chromium (and so did https://evil.test beside
    https://board.test)."""
    client = _guarded(open_hosts=True)
    response = client.post("/", headers={"Host": host, **headers})
    assert response.status_code == 403, response.text
    assert "only the board's own page" in response.text and "proxy_set_header Host $http_host" in response.text
    from starlette.websockets import WebSocketDisconnect

    with pytest.raises(WebSocketDisconnect), client.websocket_connect("/ws", headers={"Host": host, **headers}) as ws:
        ws.receive_text()


@pytest.mark.parametrize(("host", "headers"), [
    ("127.0.0.1:7860", {"Origin": "http://127.0.0.1:7860", "Sec-Fetch-Site": "same-origin"}),
    ("192.168.1.5:7860", {"Origin": "http://192.168.1.5:7860"}),
    # a share link or a proxy ending TLS: the page is https://NAME, the board is reached over plain HTTP
    ("abc123.gradio.live", {"Origin": "https://abc123.gradio.live"}),
    ("board.example.com:8443", {"Origin": "https://board.example.com:8443"}),
    ("board.example.com", {}),  # a script or gradio_client: no page sent it
    ("board.example.com", {"Sec-Fetch-Site": "cross-site", "Sec-Fetch-Mode": "navigate"}),  # a link to the board
    ("board.example.com", {"Sec-Fetch-Site": "none", "Sec-Fetch-Mode": "navigate"}),  # the address typed in
])
def test_a_board_with_a_login_serves_its_own_page_under_any_name(host, headers):
    assert _guarded(open_hosts=True).post("/", headers={"Host": host, **headers}).text == "hello"


def test_a_board_without_a_login_refuses_what_another_ports_page_sends_without_an_origin():
    response = _guarded().get("/", headers={"Host": "127.0.0.1:7860", "Sec-Fetch-Site": "same-site",
                                             "Sec-Fetch-Mode": "no-cors"})
    assert response.status_code == 403 and "this board has no login" in response.text


def _limited(max_bytes=1000):
    from starlette.applications import Starlette
    from starlette.responses import PlainTextResponse
    from starlette.routing import Route
    from starlette.testclient import TestClient

    async def echo(request):
        return PlainTextResponse(str(len(await request.body())))

    app = Starlette(routes=[Route("/gradio_api/queue/join", echo, methods=["POST"]),
                            Route("/gradio_api/upload", echo, methods=["POST"])])
    return TestClient(security.BodyLimitMiddleware(app, max_bytes=max_bytes), base_url="http://127.0.0.1:7860")


def test_a_request_body_past_the_limit_is_refused_before_gradio_reads_it():
    """gradio reads a whole body before it checks anything, the login included (a 200 MB body took a board with
    --auth from 0.2 to 0.8 GB for a client refused as not logged in)."""
    client = _limited()
    refused = client.post("/gradio_api/queue/join", content=b"x" * 1001)  # Content-Length: refused unread
    assert refused.status_code == 413 and "at most 1,000" in refused.text
    chunked = client.post("/gradio_api/queue/join", content=iter([b"x" * 600, b"x" * 600]))  # no length given
    assert chunked.status_code == 413
    assert client.post("/gradio_api/queue/join", content=b"x" * 1000).text == "1000"
    assert client.post("/gradio_api/queue/join", content=iter([b"x" * 500, b"x" * 500])).text == "1000"
    assert client.post("/gradio_api/upload/", content=b"x" * 5000).text == "5000"  # files: gradio bounds each one


def _device_cookie(monkeypatch, scheme="http", client="127.0.0.1", **headers):
    """The Set-Cookie line ClientAddressMiddleware adds to a login's response for a request like this one."""
    import asyncio

    async def login(scope, receive, send):
        security._current().new_device = "DEVICE"  # what the guard does on a right password
        await send({"type": "http.response.start", "status": 200, "headers": []})

    sent = []

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "scheme": scheme, "client": (client, 5000), "path": "/login",
             "headers": [(b"host", b"board.example"),
                         *((k.replace("_", "-").lower().encode(), v.encode()) for k, v in headers.items())]}
    asyncio.run(security.ClientAddressMiddleware(login)(scope, None, send))
    return next(v.decode() for k, v in sent[0]["headers"] if k == b"set-cookie")


def test_the_device_cookie_is_secure_whenever_the_browser_is_on_https(monkeypatch):
    """Behind a TLS proxy the board is reached over plain HTTP: the cookie had Secure only when uvicorn had turned a
    loopback proxy's X-Forwarded-Proto into the scheme, not for an https:// page, RFC 7239's Forwarded, or a proxy
    on another machine named in FORWARDED_ALLOW_IPS. Never on plain http://localhost (the browser would drop it)."""
    monkeypatch.delenv("FORWARDED_ALLOW_IPS", raising=False)
    plain = _device_cookie(monkeypatch, origin="http://127.0.0.1:7860")
    assert plain.startswith("lfboard-device=DEVICE;") and "Secure" not in plain
    assert "Secure" in _device_cookie(monkeypatch, scheme="https")
    assert "Secure" in _device_cookie(monkeypatch, origin="https://board.example")
    assert "Secure" in _device_cookie(monkeypatch, forwarded='for=10.1.2.3;proto="https";host=board.example')
    assert "Secure" in _device_cookie(monkeypatch, x_forwarded_proto="https")
    # a proxy on another machine counts once it is trusted, as uvicorn trusts it
    assert "Secure" not in _device_cookie(monkeypatch, client="10.0.0.5", x_forwarded_proto="https")
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "10.0.0.0/8")
    assert "Secure" in _device_cookie(monkeypatch, client="10.0.0.5", x_forwarded_proto="https")
    assert "Secure" not in _device_cookie(monkeypatch, client="10.0.0.5", x_forwarded_proto="http")
