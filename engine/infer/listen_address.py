"""The address ``lf-engine api`` listens on: its family (IPv4 or IPv6, from the ``--host`` given), how a URL or a
message writes it, and the refusal of one it cannot listen on. Standard library only: the port is bound before
torch and transformers load."""

from __future__ import annotations

import errno
import ipaddress
import socket

from engine.errors import UserError


def bare_host(host: str) -> str:
    """``host`` without the brackets a URL puts around an IPv6 address (``[::1]`` is ``::1``)."""
    host = host.strip()
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def listen_family(host: str) -> socket.AddressFamily:
    """IPv6 for an IPv6 address (``::``, ``::1``) or a name with IPv6 addresses only; IPv4 otherwise (a name with
    both, as ``localhost`` often is, and a name that does not resolve, which binding then refuses with its reason)."""
    host = bare_host(host)
    try:
        return socket.AF_INET6 if ipaddress.ip_address(host.split("%")[0]).version == 6 else socket.AF_INET
    except ValueError:
        pass
    try:
        families = {info[0] for info in socket.getaddrinfo(host or None, None, type=socket.SOCK_STREAM)}
    except (OSError, UnicodeError):
        return socket.AF_INET
    return socket.AF_INET6 if families == {socket.AF_INET6} else socket.AF_INET


def netloc(host: str, port: int) -> str:
    """``host:port`` as a URL writes it (``[::1]:8000`` for an IPv6 address)."""
    host = bare_host(host)
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def cannot_listen(host: str, port: int, err: OSError) -> UserError:
    """The refusal of ``host:port``, with the fix for what was wrong: the host (a name that does not resolve, an
    address of no interface here, IPv6 where the machine has none), a port below 1024 without the rights, or the
    port (another process listens on it)."""
    if isinstance(err, socket.gaierror) or err.errno in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
        fix = ("give a --host this machine listens on: an address or name of one of its interfaces (127.0.0.1 or ::1 "
               "for this machine only, 0.0.0.0 or :: for every interface)")
    elif err.errno in (errno.EACCES, errno.EPERM) and 0 < port < 1024:
        fix = "a port below 1024 needs administrator rights: choose a port from 1024 up (0 picks a free one)"
    elif err.errno == errno.EADDRINUSE:
        fix = ("another process listens on that port (another `lf-engine api`, or a board's chat server?): stop it, or "
               "choose another --port (0 picks a free one)")
    else:
        fix = "choose another --port (0 picks a free one)"
    return UserError(f"Cannot listen on {netloc(host, port)} ({err.strerror or err}); {fix}.")
