"""A saved config is checked and read through one opened descriptor (app.workspace.Workspace.read_config): its size
was looked up on the path and the path then read again, so a file swapped in between (a sparse file of hundreds of
MB, a named pipe) was read whole or waited on for good, holding the board's start and every page load."""

from __future__ import annotations

import os

import pytest

from app.workspace import SavedConfigError, Workspace
from tests.engine.test_cache_files_bounded import bounded, plant
from tests.engine.test_config_read_once import swap_after_check


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
def test_a_config_swapped_after_its_size_was_checked_is_not_read(tmp_path, monkeypatch, kind):
    ws = Workspace(tmp_path / "ws").ensure()
    ws.save_config("mine", {"learning_rate": 0.001})
    path = ws.config_path("mine")
    swap_after_check(monkeypatch, path, kind)
    mapping = bounded(lambda: ws.read_config("mine"), pipe=path if kind == "pipe" else None)
    assert mapping == {"learning_rate": 0.001}


def test_configs_that_are_no_regular_file_or_too_large_are_named(tmp_path):
    ws = Workspace(tmp_path / "ws").ensure()
    ws.configs_dir.mkdir(parents=True, exist_ok=True)
    assert ws.read_config("missing") == {}
    os.mkfifo(ws.config_path("pipe"))
    with pytest.raises(SavedConfigError, match="pipe.yaml: not a regular file"):
        bounded(lambda: ws.read_config("pipe"), pipe=ws.config_path("pipe"))
    ws.config_path("folder").mkdir()
    with pytest.raises(SavedConfigError, match="folder.yaml: a folder, not a config file"):
        ws.read_config("folder")
    plant(ws.config_path("huge"), "sparse")
    with pytest.raises(SavedConfigError, match="is larger than 1,000,000 bytes"):
        bounded(lambda: ws.read_config("huge"))
