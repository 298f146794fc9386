"""Where `lf-engine api` listens: IPv6 addresses as well as IPv4 ones, and one server per port."""

import json
import socket
import threading
import time
import urllib.request

import pytest

from engine.errors import UserError
from engine.infer.listen_address import listen_family, netloc
from engine.infer.server import bind_server, open_server, serve
from engine.runs import RunFolder


class FakeChatModel:
    model_name = "fake"

    def unload(self):
        pass


def _has_ipv6_loopback() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
        return True
    except OSError:
        return False


needs_ipv6 = pytest.mark.skipif(not _has_ipv6_loopback(), reason="this machine has no IPv6 loopback")


def test_the_family_follows_the_host():
    assert listen_family("::") == listen_family("::1") == listen_family("[::1]") == socket.AF_INET6
    assert listen_family("127.0.0.1") == listen_family("0.0.0.0") == listen_family("") == socket.AF_INET
    assert netloc("::1", 80) == netloc("[::1]", 80) == "[::1]:80" and netloc("localhost", 80) == "localhost:80"


@needs_ipv6
@pytest.mark.parametrize("host", ["::1", "[::1]"])
def test_an_ipv6_host_is_served_and_its_url_is_bracketed(tmp_path, host):
    """`lf-engine api --host ::1` (or `::`) was refused: the server's socket was always IPv4 ("Address family for
    hostname not supported")."""
    stop, errors = threading.Event(), []

    def target():
        try:
            serve(None, host, 0, run_dir=str(tmp_path), stop_event=stop, chat_model=FakeChatModel())
        except BaseException as err:
            errors.append(err)

    thread = threading.Thread(target=target, daemon=True)
    thread.start()
    folder = RunFolder(tmp_path)
    deadline = time.time() + 30
    while not folder.info().get("ready") and time.time() < deadline and not errors:
        time.sleep(0.05)
    try:
        assert not errors, errors
        port = folder.info()["port"]
        assert folder.info()["url"] == f"http://[::1]:{port}/v1"
        with urllib.request.urlopen(f"http://[::1]:{port}/health", timeout=10) as response:
            assert json.loads(response.read())["status"] == "ok"
    finally:
        stop.set()
        thread.join(timeout=30)
    assert not errors, errors


@needs_ipv6
def test_the_ipv6_wildcard_binds_an_ipv6_socket():
    server = bind_server("::", 0)
    try:
        assert server.socket.family == socket.AF_INET6 and server.bind_host == "::"
    finally:
        server.server_close()


def test_a_second_server_on_a_listening_port_is_refused_at_once_saying_what_holds_it():
    first = bind_server("127.0.0.1", 0)
    open_server(first, FakeChatModel())
    port = first.server_address[1]
    try:
        with pytest.raises(UserError) as info:
            bind_server("127.0.0.1", port)
    finally:
        first.server_close()
    assert f"Cannot listen on 127.0.0.1:{port} (Address already in use); another process listens on that port" \
        in str(info.value)


def test_of_two_servers_bound_while_their_models_load_only_the_first_to_listen_serves():
    """Both bind (the port is reusable, so a restarted server need not wait out TIME_WAIT), and neither listens
    while its model loads; the second to finish loading is refused, so two servers never both seem to run."""
    first = bind_server("127.0.0.1", 0)
    port = first.server_address[1]
    second = bind_server("127.0.0.1", port)
    try:
        open_server(first, FakeChatModel())
        with pytest.raises(UserError, match="Address already in use"):
            open_server(second, FakeChatModel())
        assert second.socket.fileno() == -1  # closed
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # the first serves
    finally:
        first.server_close()
        second.server_close()
