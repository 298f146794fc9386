"""A live board in a subprocess (fresh workspace, free port), for the gradio_client and browser tests."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT = 120


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


@pytest.fixture(scope="module")
def module_board(tmp_path_factory):
    """One board for a module's tests (they must not disturb each other's state); yields (url, workspace path)."""
    with board_in(tmp_path_factory.mktemp("board")) as board:
        yield board
