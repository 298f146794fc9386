"""A live board in a subprocess (fresh workspace, free port), for the gradio_client and browser tests; the one
Chromium the browser tests share, and the board shared by those that only add run folders of their own and read."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120
E2E = Path(__file__).resolve().parent
CHROMIUM = shutil.which("chromium")
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync"]


def wait_for(predicate, timeout: float, what: str, every: float = 0.1):
    """``predicate()``'s first true value, asked every ``every`` seconds for ``timeout`` seconds (an AssertionError
    naming ``what`` after that). A page's text costs a millisecond to read: a 0.5 s pause lost 0.25 s a wait."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(every)
    raise AssertionError(f"timed out waiting for {what}")


FAILURES = Path(os.environ.get("LF_E2E_FAILURES") or Path(tempfile.gettempdir()) / "lf-e2e-failures")
"""Where a browser test that fails keeps what it saw (:func:`kept_on_failure`): outside pytest's temporary folders,
which later runs rotate away."""


def watch_network(page, words: tuple[str, ...] = ("/upload",)) -> list[str]:
    """A list that fills with the page's console messages and with its requests whose address contains one of
    ``words`` (sent, answered with its status, failed): what :func:`kept_on_failure` keeps beside the screenshot."""
    seen: list[str] = []
    start = time.time()

    def note(*parts) -> None:
        seen.append(f"{time.time() - start:7.2f}s " + " ".join(str(p) for p in parts))

    def wanted(request) -> bool:
        return any(word in request.url for word in words)

    page.on("console", lambda message: note("console", message.type, message.text[:500]))
    page.on("pageerror", lambda error: note("pageerror", str(error)[:500]))
    page.on("request", lambda r: wanted(r) and note("request", r.method, r.url))
    page.on("response", lambda r: wanted(r.request) and note("response", r.status, r.url))
    page.on("requestfailed", lambda r: wanted(r) and note("requestfailed", r.failure, r.url))
    return seen


@contextlib.contextmanager
def kept_on_failure(page, board_folder: Path, name: str, seen: list[str] | None = None):
    """Run the block; when it raises an AssertionError (a wait ran out), keep the page's screenshot, the board's log
    (``board_folder/board.log``) and ``seen`` (:func:`watch_network`) in a new folder under :data:`FAILURES`, and
    raise again with that folder named in the message."""
    try:
        yield
    except AssertionError as err:
        folder = FAILURES / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
        folder.mkdir(parents=True, exist_ok=True)
        kept = []
        try:
            page.screenshot(path=str(folder / "page.png"), full_page=True)
            kept.append("page.png")
        except Exception as shot_err:  # a page that is gone still leaves the log
            (folder / "screenshot-failed.txt").write_text(f"{shot_err}\n")
        log = board_folder / "board.log"
        if log.is_file():
            shutil.copyfile(log, folder / "board.log")
            kept.append("board.log")
        if seen is not None:
            (folder / "page-events.txt").write_text("\n".join(seen) + "\n")
            kept.append("page-events.txt")
        raise AssertionError(f"{err} (kept {', '.join(kept) or 'nothing'} in {folder})") from err


REPLY_ENDED = "() => !!document.querySelector('#lf-chatbot .wrap.default')?.classList.contains('hide')"


def reply_ended(page) -> bool:
    """Whether the Chat tab's send has ended (its reply streamed whole): gradio shows the chatbot's progress tracker
    (``.wrap.default``) from the press to the stream's end and hides it (class ``hide``) once the event completes.
    Ask it after the reply has begun to show: before the press, the last send's hidden tracker answers true."""
    return page.evaluate(REPLY_ENDED)


def open_on_example(tmp_path: Path, example: str, **overrides) -> None:
    """Make an example config (shortened by ``overrides``) the workspace's last-used one, so the page opens on it."""
    import yaml

    config = yaml.safe_load((REPO_ROOT / "examples" / example).read_text())
    config.update(dataset_dir=str(REPO_ROOT / "examples" / "data"), **overrides)
    config.pop("output_dir")
    folder = tmp_path / "workspace" / "configs"
    folder.mkdir(parents=True)
    (folder / "last-used.yaml").write_text(yaml.safe_dump(config))


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def board_in(folder: Path):
    """Start ``python -m app`` on a free port with ``folder/workspace``; yields (url, workspace path)."""
    if not (REPO_ROOT / "examples" / "data" / "dataset_info.json").is_file():
        pytest.skip("examples/data is missing")
    port = free_port()
    workspace = folder / "workspace"
    log = open(folder / "board.log", "wb")
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), GRADIO_ANALYTICS_ENABLED="False")
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "--port", str(port), "--workspace", str(workspace)],
        cwd=REPO_ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}/"
    deadline = time.time() + START_TIMEOUT
    while True:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                if response.status == 200:
                    break
        except OSError:
            pass
        if proc.poll() is not None or time.time() > deadline:
            log.close()
            proc.kill()
            pytest.fail("the board did not start:\n" + (folder / "board.log").read_text(errors="replace")[-3000:])
        time.sleep(0.1)  # a refused connection costs nothing; each 0.5 s wait lost 0.25 s a board on average
    try:
        yield url, workspace
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
        log.close()
        # runs started by the board live in their own sessions: stop any that are still going
        for run_json in (workspace / "runs").glob("*/run.json"):
            import json

            info = json.loads(run_json.read_text())
            if info.get("status") == "running" and info.get("pgid"):
                try:
                    os.killpg(int(info["pgid"]), signal.SIGKILL)
                except ProcessLookupError:
                    pass


@pytest.fixture()
def live_board(tmp_path):
    """A board of the test's own (workspace and log in ``tmp_path``); yields (url, workspace path)."""
    with board_in(tmp_path) as board:
        yield board


class _Shared:
    """What the tests of this folder share while they run one after another: one Chromium (a launch took 1-2 s) and
    one board (a start took 5-9 s). Each starts on first use and ends once the next test is not one of this folder's
    (or none is left); a later test of the folder starts a fresh one."""

    def __init__(self):
        self.stack: contextlib.ExitStack | None = None
        self.browser = None
        self.board: tuple[str, Path] | None = None

    def _stack(self) -> contextlib.ExitStack:
        if self.stack is None:
            self.stack = contextlib.ExitStack()
        return self.stack

    def chromium(self):
        if self.browser is None:
            from playwright.sync_api import sync_playwright

            playwright = self._stack().enter_context(sync_playwright())
            self.browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
            self.stack.callback(self.browser.close)
        return self.browser

    def live_board(self, folder: Path) -> tuple[str, Path]:
        if self.board is None:
            self.board = self._stack().enter_context(board_in(folder))
        return self.board

    def close(self) -> None:
        stack, self.stack, self.browser, self.board = self.stack, None, None, None
        if stack is not None:
            stack.close()


_SHARED = _Shared()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    try:
        return (yield)  # the test's own fixtures first (they close its browser contexts)
    finally:
        if nextitem is None or E2E not in nextitem.path.parents:
            _SHARED.close()


@pytest.fixture()
def browser():
    """The folder's one Chromium; every browser context a test opened is closed after it (no page's timers, cookies
    or storage reach the next test). Tests open pages with ``browser.new_context(...).new_page()``."""
    if CHROMIUM is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    shared = _SHARED.chromium()
    assert not shared.contexts, "a browser context outlived the test before"
    yield shared
    for context in list(shared.contexts):
        context.close()


@pytest.fixture()
def shared_board(tmp_path_factory):
    """A board that several tests look at, one after another; yields (url, workspace path). A test on it only adds
    run folders and datasets under names no other test uses, and reads; it starts no run, loads no model and saves
    no config (a test that does, or needs a workspace as a fresh board has it, takes ``live_board``)."""
    if _SHARED.board is None:
        _SHARED.live_board(tmp_path_factory.mktemp("shared-board"))
    return _SHARED.board
