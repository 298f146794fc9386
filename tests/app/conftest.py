"""Fixtures for the board's tests: a temp workspace and a board whose jobs run a fake engine."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from app.context import Board
from app.jobs import JobManager
from app.workspace import Workspace

FAKE_ENGINE = Path(__file__).with_name("fake_engine.py")
REPO_ROOT = Path(__file__).resolve().parents[2]
DEMO_DATA = REPO_ROOT / "examples" / "data"


@pytest.fixture()
def workspace(tmp_path) -> Workspace:
    return Workspace(tmp_path / "ws").ensure()


@pytest.fixture()
def board(workspace):
    jobs = JobManager(workspace.runs_dir, [sys.executable, str(FAKE_ENGINE)], kill_grace=1.0, poll_interval=0.05)
    jobs.start()
    yield Board(workspace=workspace, jobs=jobs)
    jobs.shutdown()
    for run_id in jobs.running():
        jobs.abort(run_id)


@pytest.fixture()
def demo(board, monkeypatch):
    """The whole page built on :func:`board` (the device report given, as the board collects it in a subprocess)."""
    from app import catalog
    from app.ui import build_ui

    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}}, None))
    return build_ui(board)
