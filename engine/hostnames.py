"""Host names in requests: the part of a ``Host`` header or an ``Origin`` that names the host, and whether it names
this machine. The chat worker (``engine.infer.server``) and the board (``app.security``) both refuse requests for
other names when they have no key or login, so that a web page cannot point its own domain at 127.0.0.1 ("DNS
rebinding") and drive them. Nothing here imports more than the standard library (the board loads it at start)."""

from __future__ import annotations

import ipaddress

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1", "localhost.localdomain", "ip6-localhost"})
WILDCARD_HOSTS = frozenset({"", "0.0.0.0", "::"})


def host_name(value: str) -> str:
    """The host part of a ``Host`` header or an origin's netloc, lower-cased, without port or brackets. A value that
    is no ``host[:port]`` (a port that is not digits, text after the brackets, user info such as
    ``localhost:80@elsewhere``) is given back whole, so that it names no host of this machine."""
    value = value.strip().lower()
    if value.startswith("["):
        inside, _, rest = value[1:].partition("]")
        return inside if _port_only(rest) else value
    if value.count(":") > 1:  # a bare IPv6 address
        return value
    name, colon, port = value.partition(":")
    return name if not colon or port.isdigit() and port.isascii() else value


def _port_only(rest: str) -> bool:
    """Whether ``rest`` (what follows a bracketed IPv6 address) is nothing or ``:digits``."""
    return rest == "" or (rest.startswith(":") and rest[1:].isdigit() and rest[1:].isascii())


def origin_host(origin: str) -> str:
    """The host named by an ``Origin`` header (``scheme://host[:port]``)."""
    return host_name(origin.split("://", 1)[-1].split("/", 1)[0])


def names_this_machine(name: str, bind_host: str) -> bool:
    """Whether ``name`` is a loopback name or the address the server was started with (``bind_host``)."""
    return is_loopback_name(name) or (bool(name) and name == bind_host)


def is_loopback_name(name: str) -> bool:
    """Whether ``name`` (from :func:`host_name`) can only mean this machine."""
    if name in LOOPBACK_NAMES or name.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False
