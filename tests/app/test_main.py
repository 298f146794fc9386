"""`lf-board` start-up: refuses to expose itself without a password, and imports no torch before serving."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from app.main import is_loopback, main, parse_auth, port_problem, security_problem

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_loopback_detection():
    assert is_loopback("127.0.0.1") and is_loopback("localhost") and is_loopback("::1") and is_loopback("127.0.0.5")
    assert not is_loopback("0.0.0.0") and not is_loopback("192.168.1.10") and not is_loopback("::")


def test_auth_parsing():
    assert parse_auth("alice:s3:cret") == ("alice", "s3:cret")
    assert parse_auth(None) is None
    with pytest.raises(ValueError, match="must not begin or end with spaces"):
        parse_auth(" alice:pw")
    with pytest.raises(ValueError, match="USER:PASS"):
        parse_auth("alice")


def test_exposure_needs_a_password():
    assert security_problem("127.0.0.1", False, None) is None
    assert "--auth" in security_problem("0.0.0.0", False, None)
    assert "ssh -L 7894:127.0.0.1:7894" in security_problem("0.0.0.0", False, None, 7894)
    assert "--share" in security_problem("127.0.0.1", True, None)
    assert security_problem("0.0.0.0", True, ("a", "b")) is None


@pytest.mark.parametrize("argv", [["--host", "0.0.0.0"], ["--share"], ["--auth", "nopassword"]])
def test_refuses_to_start(argv, capsys, tmp_path):
    assert main([*argv, "--workspace", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "lf-board" in err and ("--auth" in err or "USER:PASS" in err)
    assert not (tmp_path / "runs").exists()  # refused before touching the workspace


def test_a_port_in_use_is_named_with_the_fix(capsys, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["--port", str(port), "--workspace", str(tmp_path)]) == 2
        err = capsys.readouterr().err
        assert f"port {port} is already in use" in err and f"--port {port + 1}" in err
        assert "Traceback" not in err
    assert port_problem("127.0.0.1", port) is None  # free again once the other server is gone


def test_building_the_page_imports_no_torch(tmp_path):
    code = (
        "import sys\n"
        "from app.context import Board\nfrom app.jobs import JobManager\nfrom app.ui import build_ui, launch_options\n"
        "from app.workspace import Workspace\n"
        f"ws = Workspace({str(tmp_path)!r}).ensure()\n"
        "board = Board(ws, JobManager(ws.runs_dir))\nbuild_ui(board)\nlaunch_options(board)\n"
        "heavy = [m for m in ('torch', 'transformers', 'peft', 'trl', 'datasets') if m in sys.modules]\n"
        "print('HEAVY', heavy)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "HEAVY []" in out.stdout


def test_help_mentions_every_option():
    out = subprocess.run(
        [sys.executable, "-m", "app", "--help"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60
    )
    for option in ("--host", "--port", "--workspace", "--lang", "--auth", "--share", "--allow-insecure"):
        assert option in out.stdout


def test_one_board_per_workspace(tmp_path, capsys):
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws")
    held = ws.lock()
    try:
        code = (
            "from app.workspace import Workspace, WorkspaceBusy\n"
            f"ws = Workspace({str(ws.root)!r})\n"
            "try:\n    ws.lock()\nexcept WorkspaceBusy as err:\n    print('BUSY', err)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
        assert "BUSY" in out.stdout and "--workspace" in out.stdout
        assert main(["--workspace", str(ws.root)]) == 2  # named first, whether or not its port is in use
        assert "Another lf-board" in capsys.readouterr().err
    finally:
        held.close()
    ws.lock().close()  # free again once the first board is gone


def test_the_queue_keeps_few_event_records_and_never_summarises_them():
    """gradio summarised every event it held (up to 10,000) in a DataFrame after each event: CPU per page tick that
    grew with the board's uptime. The board's page bounds the records and skips the summary; a user's value stays."""
    code = (
        "import os, time\n"
        "os.environ.pop('GRADIO_ANALYTICS_MAX_EVENTS', None)\n"
        "os.environ['GRADIO_ANALYTICS_CACHE_FREQUENCY'] = '1'\n"  # set by the user: kept
        "from app.main import queue_settings\n"
        "queue_settings()\n"
        "assert os.environ['GRADIO_ANALYTICS_CACHE_FREQUENCY'] == '1'\n"
        "del os.environ['GRADIO_ANALYTICS_CACHE_FREQUENCY']\n"
        "queue_settings()\n"
        "import gradio as gr\n"
        "with gr.Blocks() as demo:\n    gr.Textbox()\n"
        "queue = demo._queue\n"
        "records = [{'time': time.time(), 'status': 'success', 'process_time': 0.01, 'function': 'f',"
        " 'session_hash': 's'}] * 50\n"
        "queue.events_recorded = 10**6\n"
        "queue.compute_analytics_summary(records)\n"
        "print('MAX', queue.ANALYTICS_MAX_EVENTS, 'SUMMARY', queue.cached_event_analytics_summary)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO_ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "MAX 1000 SUMMARY {'functions': {}}" in out.stdout  # bounded, and the summary was not computed


def test_an_unusable_workspace_folder_is_named_with_the_fix(tmp_path, capsys):
    """--workspace naming a file, or a folder that cannot be created, ended in a raw NotADirectoryError or
    FileNotFoundError traceback."""
    a_file = tmp_path / "notes.txt"
    a_file.write_text("x")
    for workspace in (a_file, a_file / "ws"):
        assert main(["--workspace", str(workspace)]) == 2
        err = capsys.readouterr().err
        assert f"the workspace folder {workspace} cannot be used" in err and "--workspace" in err
        assert "Not a directory" in err and "Traceback" not in err


@pytest.mark.parametrize("port", ["99999", "-1", "65536", "http"])
def test_a_port_out_of_range_is_refused_by_name(port, capsys, tmp_path):
    """--port 99999 ended in an OverflowError traceback from bind(), and --port -1 in advice to use --host
    127.0.0.1 (which it was)."""
    with pytest.raises(SystemExit) as stop:
        main(["--port", port, "--workspace", str(tmp_path / "ws")])
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert "--port" in err and "1 to 65535" in err and "Traceback" not in err and "--host" not in err.split("error:")[-1]
    assert not (tmp_path / "ws").exists()


def test_version_is_answered_as_lf_engine_answers_it(capsys):
    """`lf-engine --version` answers; `lf-board --version` said "unrecognized arguments: --version"."""
    from engine import __version__

    with pytest.raises(SystemExit) as info:
        main(["--version"])
    assert info.value.code == 0
    assert capsys.readouterr().out.strip() == f"lf-board {__version__}"
