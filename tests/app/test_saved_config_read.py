"""A saved config is checked and read through one opened descriptor (app.workspace.Workspace.read_config): its size
was looked up on the path and the path then read again, so a file swapped in between (a sparse file of hundreds of
MB, a named pipe) was read whole or waited on for good, holding the board's start and every page load."""

from __future__ import annotations

import os
import pathlib

import pytest

from app.workspace import SavedConfigError, Workspace
from tests.engine.test_cache_files_bounded import bounded, plant


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
def test_a_config_swapped_after_its_size_was_checked_is_not_read(tmp_path, monkeypatch, kind):
    ws = Workspace(tmp_path / "ws").ensure()
    ws.save_config("mine", {"learning_rate": 0.001})
    path = ws.config_path("mine")
    first = os.stat(path)
    looks = {"path": 0}

    def swap():  # another process replaces the file under the same name
        aside = path.with_name("swapped")
        plant(aside, kind)
        os.replace(aside, path)

    real_stat, real_fstat = pathlib.Path.stat, os.fstat

    def path_stat(self, *args, **kwargs):  # the path's second look (is_file, then the size) comes before the read
        result = real_stat(self, *args, **kwargs)
        if self == path and result.st_ino == first.st_ino:
            looks["path"] += 1
            if looks["path"] == 2:
                swap()
        return result

    def fstat(fd):  # a descriptor's look: the file it holds stays the one read, whatever the path becomes
        result = real_fstat(fd)
        if result.st_ino == first.st_ino and result.st_dev == first.st_dev:
            swap()
        return result

    monkeypatch.setattr(pathlib.Path, "stat", path_stat)
    monkeypatch.setattr(os, "fstat", fstat)
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
