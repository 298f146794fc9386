"""``lf-board``: start the browser workbench.

Serves on the loopback interface by default. Serving on another address, or through a public share link,
needs ``--auth USER:PASS``; ``--allow-insecure`` overrides that refusal, with a loud warning.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import os
import socket
import sys
from pathlib import Path

from app.workspace import WORKSPACE_ENV, default_workspace

EXIT_REFUSED = 2
AUTH_ENV = "LF_BOARD_AUTH"
CONCURRENCY = 4
"""How many runs of one page event may be handled at once (gradio's default concurrency limit)."""
CONCURRENCY_ENV = "GRADIO_DEFAULT_CONCURRENCY_LIMIT"
QUEUE_ANALYTICS_ENV = {
    # gradio's queue records every event for its monitoring dashboard (off here) and, after every event, summarises
    # all it holds (up to 10,000) in a pandas DataFrame: 5-11 ms of CPU per event that grew with the board's uptime
    # (an open page fires about three events a second). Kept to the last 1,000, summarised never (the dashboard
    # that would show the summary is not enabled).
    "GRADIO_ANALYTICS_MAX_EVENTS": "1000",
    "GRADIO_ANALYTICS_CACHE_FREQUENCY": str(2**62),
}

logger = logging.getLogger("app")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="lf-board",
        description="LF Board: fine-tune, evaluate, chat with and export language models from the browser.",
        epilog="Runs keep going when the browser or the board closes; they are found again on the next start.",
    )
    from engine import __version__

    parser.add_argument("--version", action="version", version=f"lf-board {__version__}")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to serve on (default: 127.0.0.1, this machine only); any other address needs --auth",
    )
    parser.add_argument("--port", type=port_number, default=7860, help="port, 1-65535 (default: 7860)")
    parser.add_argument(
        "--workspace",
        default=None,
        help=f"folder for runs, saved configs, uploaded datasets and exports (default: "
        f"${WORKSPACE_ENV} or ./lfboard-workspace)",
    )
    parser.add_argument(
        "--lang",
        default="auto",
        choices=["auto", "en", "zh"],
        help="page language (default: auto = the browser's language)",
    )
    parser.add_argument(
        "--auth",
        default=None,
        metavar="USER:PASS",
        help=f"require this login (or set ${AUTH_ENV}); needed for non-loopback hosts and --share",
    )
    parser.add_argument("--share", action="store_true", help="also open a public gradio share link (needs --auth)")
    parser.add_argument(
        "--allow-insecure",
        action="store_true",
        help="serve on a non-loopback address or share without a password (not recommended)",
    )
    parser.add_argument(
        "--max-upload-mb",
        type=int,
        default=None,
        help="largest file a page may upload, in MB (default: $LF_BOARD_MAX_UPLOAD_MB or 512)",
    )
    parser.add_argument(
        "--allowed-root",
        action="append",
        default=[],
        metavar="DIR",
        help="a folder (besides the workspace) that configs submitted through the API may write tokenized_path, "
        "export_dir, cache_dir or ray_storage_path to; repeat for several (default: $LF_BOARD_ALLOWED_ROOTS, "
        "separated by ':')",
    )
    parser.add_argument("--debug", action="store_true", help="verbose logging")
    return parser


def is_loopback(host: str) -> bool:
    """Whether ``host`` only reaches this machine (names are resolved; every address must be loopback)."""
    host = host.strip().strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(info[4][0]).is_loopback for info in infos)


def parse_auth(text: str | None) -> tuple[str, str] | None:
    """``USER:PASS`` -> (user, password); raises ValueError with the fix."""
    if not text:
        return None
    user, sep, password = text.partition(":")
    if not sep or not user or not password:
        raise ValueError("--auth must look like USER:PASS (both parts non-empty), e.g. --auth alice:s3cret")
    if user != user.strip():
        raise ValueError("--auth: the user name must not begin or end with spaces (the login page strips them, so "
                         f"`{user}` could never log in); e.g. --auth {user.strip()}:PASSWORD")
    return user, password


def security_problem(host: str, share: bool, auth: tuple[str, str] | None, port: int = 7860) -> str | None:
    """Why starting as asked would expose the board without a password (None when it is safe)."""
    if auth is not None:
        return None
    if share:
        return (
            "--share makes the board reachable by anyone with the link, and it runs code and reads files on this "
            "machine. Add --auth USER:PASS (or set LF_BOARD_AUTH), or drop --share."
        )
    if not is_loopback(host):
        return (
            f"--host {host} makes the board reachable from other machines, and it runs code and reads files on "
            "this machine. Add --auth USER:PASS (or set LF_BOARD_AUTH), or serve on 127.0.0.1 and use an SSH "
            f"tunnel (ssh -L {port}:127.0.0.1:{port} server)."
        )
    return None


def port_number(text: str) -> int:
    """``--port``: a TCP port, 1-65535 (argparse names the option and the value when it is not)."""
    try:
        port = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a port number; give one from 1 to 65535") from None
    if not 0 <= port <= 65535:  # 0: the system picks a free one
        raise argparse.ArgumentTypeError(f"{port} is not a port number; give one from 1 to 65535 (default 7860)")
    return port


def port_problem(host: str, port: int) -> str | None:
    """Why the board cannot listen on ``host:port`` (None when it can). Checked before the page is built: gradio
    would fail only after building it, with a traceback about its ``server_port``."""
    try:
        family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0]
    except OSError as err:
        return f"--host {host} is not an address of this machine ({err.strerror or err}); try --host 127.0.0.1."
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server binds: a just-closed port is free
        try:
            probe.bind(address)
        except OSError as err:
            if err.errno == errno.EADDRINUSE:
                return (f"port {port} is already in use (another lf-board, or another program). Open the board "
                        f"that is running, or start this one on another port: lf-board --port {port + 1}")
            return f"cannot listen on {host}:{port} ({err.strerror or err}); pick another --port or --host."
    return None


def queue_settings() -> None:
    """gradio's queue settings, which it reads from the environment when a page is built (a value the user set
    is kept): the concurrency limit and the bounds on its event records."""
    os.environ.setdefault(CONCURRENCY_ENV, str(CONCURRENCY))
    for name, value in QUEUE_ANALYTICS_ENV.items():
        os.environ.setdefault(name, value)


def listen_while_starting(host: str, port: int, lang: str):
    """Serve :mod:`app.starting_page` on ``host:port`` until the workbench is built (its port: the one asked for,
    or the system's pick for ``--port 0``, which the board then keeps); a str says why it cannot listen."""
    from app.starting_page import StartingServer

    try:
        starting = StartingServer(host, port, lang).start()
    except OSError as err:
        return port_problem(host, port) or f"cannot listen on {host}:{port} ({err.strerror or err})."
    shown = "localhost" if host in ("0.0.0.0", "::") else f"[{host}]" if ":" in host else host
    print(f"LF Board: starting on http://{shown}:{starting.port}/ (open it now: the page becomes the workbench "
          "when it is ready)", flush=True)
    return starting


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if args.debug else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        datefmt="%H:%M:%S",
    )
    logging.getLogger("httpx").setLevel(logging.WARNING)  # gradio's own health checks
    from engine.credentials import install_log_redaction

    install_log_redaction()  # the --auth password and tokens never reach the board's log
    try:
        auth = parse_auth(args.auth or os.environ.get(AUTH_ENV))
        from app.security import max_upload_mb

        upload_mb = max_upload_mb(args.max_upload_mb)
    except ValueError as err:
        print(f"lf-board: {err}", file=sys.stderr)
        return EXIT_REFUSED
    problem = security_problem(args.host, args.share, auth, args.port)
    if problem and not args.allow_insecure:
        print(f"lf-board refuses to start: {problem}\n(--allow-insecure overrides this.)", file=sys.stderr)
        return EXIT_REFUSED
    if problem:
        banner = "!" * 100
        print(
            f"{banner}\nWARNING: serving WITHOUT a password (--allow-insecure). {problem}\n{banner}", file=sys.stderr
        )

    from app.workspace import SecretUnusable, Workspace, WorkspaceBusy

    workspace = Workspace(Path(args.workspace).expanduser() if args.workspace else default_workspace())
    try:
        lock = workspace.ensure().lock()
        workspace.secret()  # read (or written) once before the page is built, so a bad key file is named here
    except (WorkspaceBusy, SecretUnusable) as err:
        print(f"lf-board refuses to start: {err}", file=sys.stderr)
        return EXIT_REFUSED
    except OSError as err:  # a file of that name, a read-only or missing parent, no permission
        where = f" ({err.filename})" if err.filename and str(err.filename) != str(workspace.root) else ""
        print(f"lf-board cannot start: the workspace folder {workspace.root} cannot be used: "
              f"{err.strerror or err}{where}. Pick a folder you can write to with --workspace (or "
              "$LF_BOARD_WORKSPACE).", file=sys.stderr)
        return EXIT_REFUSED
    busy = port_problem(args.host, args.port)  # (after the lock: a second board here is named as such)
    if busy:
        lock.close()
        print(f"lf-board cannot start: {busy}", file=sys.stderr)
        return EXIT_REFUSED
    starting = listen_while_starting(args.host, args.port, args.lang)  # a browser sees a page within a second
    if isinstance(starting, str):
        lock.close()
        print(f"lf-board cannot start: {starting}", file=sys.stderr)
        return EXIT_REFUSED
    from app.context import Board  # gradio and the page: seconds, while the starting page answers
    from app.i18n import set_board_language
    from app.jobs import JobManager
    from app.ui import build_ui, launch_options

    set_board_language(args.lang)  # what a page's first clicks answer in, before its language reaches the board
    jobs = JobManager(workspace.runs_dir).start()
    board = Board(
        workspace=workspace, jobs=jobs, default_lang=args.lang, max_upload_mb=upload_mb, extra_roots=args.allowed_root
    )
    # set before the page is built, which is when gradio's queue reads them; calling demo.queue() afterwards would
    # build gradio's whole server app once more (about 0.2 s of every start)
    queue_settings()
    demo = build_ui(board)
    from engine import collector

    collector.settle()  # gradio and the page are long-lived: the server's collections skip them
    print(f"LF Board: workspace {workspace.root}", flush=True)
    login = None
    if auth is not None:
        from app.security import LoginGuard

        login = LoginGuard(*auth)
    try:
        starting.hand_over()
        demo.launch(
            server_name=args.host,
            server_port=starting.port,
            share=args.share,
            auth=login,
            auth_message=login.message if login else None,
            show_error=True,
            # gradio's own start lines would tell a board user to "set `share=True` in `launch()`"; the URL is printed
            # here instead (and gradio still prints a --share link)
            quiet=True,
            prevent_thread_lock=True,
            # a board with a login, or one served openly on purpose, answers any host name
            **launch_options(board, host=args.host, open_hosts=auth is not None or bool(problem)),
        )
        print(f"* Running on local URL:  {demo.local_url}  (Ctrl+C stops the board; its runs keep going)", flush=True)
        demo.block_thread()
    finally:
        jobs.shutdown()
        lock.close()
        live = jobs.running()
        if live:
            print(f"LF Board stopped; {len(live)} run(s) keep going and will be re-attached on the next start.")
    return 0


def entry() -> int:
    """The ``lf-board`` and ``python -m app`` entry point: :func:`main` with Python's cyclic collector paused while
    gradio and the page load (``engine.collector``; settled before the server starts)."""
    from engine import collector

    return collector.run_command(main)


if __name__ == "__main__":
    raise SystemExit(entry())
