"""A config file is checked and read through one opened descriptor (engine.config.loader.read_yaml, through
engine.small_json.read_small): its size was looked up on the path and the path then read again, so a file swapped
in between (a sparse file of hundreds of MB, a named pipe) was read whole or waited on for good. A config that is
a pipe was called missing."""

from __future__ import annotations

import os
import pathlib
from pathlib import Path

import pytest

from engine.config import ConfigError
from engine.config.loader import load_config
from tests.engine.test_cache_files_bounded import bounded, plant


def swap_after_check(monkeypatch, path: Path, kind: str) -> None:
    """Replace ``path`` (as another process would, under the same name) by a ``kind`` file right after it is looked
    at for the last time before a read: the path's second stat (is_file, then the size), or any fstat of a
    descriptor holding it (the file that descriptor reads stays the one checked)."""
    first, looks = os.stat(path), [0]
    real_stat, real_fstat = pathlib.Path.stat, os.fstat

    def swap():
        aside = path.with_name(f"{path.name}.swapped")
        plant(aside, kind)
        os.replace(aside, path)

    def path_stat(self, *args, **kwargs):
        result = real_stat(self, *args, **kwargs)
        if self == path and result.st_ino == first.st_ino:
            looks[0] += 1
            if looks[0] == 2:
                swap()
        return result

    def fstat(fd):
        result = real_fstat(fd)
        if result.st_ino == first.st_ino and result.st_dev == first.st_dev:
            swap()
        return result

    monkeypatch.setattr(pathlib.Path, "stat", path_stat)
    monkeypatch.setattr(os, "fstat", fstat)


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
def test_a_config_swapped_after_its_size_was_checked_is_not_read(tmp_path, monkeypatch, kind):
    path = tmp_path / "run.yaml"
    path.write_text("stage: sft\nlearning_rate: 0.001\n", encoding="utf-8")
    swap_after_check(monkeypatch, path, kind)
    cfg = bounded(lambda: load_config(path), pipe=path if kind == "pipe" else None)
    assert cfg.train.learning_rate == 0.001


def test_a_config_that_is_a_pipe_is_named(tmp_path):
    path = tmp_path / "run.yaml"
    os.mkfifo(path)
    with pytest.raises(ConfigError, match="is a pipe, device or socket, not a file"):
        bounded(lambda: load_config(path), pipe=path)
    with pytest.raises(ConfigError, match="is a folder; give the YAML file inside it"):
        load_config(tmp_path)
    with pytest.raises(ConfigError, match="does not exist; check the path"):
        load_config(tmp_path / "missing.yaml")


def test_an_outsized_config_is_refused_by_its_size_unread(tmp_path):
    """Refused from the descriptor's size before a byte is read (it read the bound's worth first: 1 MB held)."""
    import tracemalloc

    path = tmp_path / "run.yaml"
    plant(path, "sparse")
    tracemalloc.start()
    try:
        with pytest.raises(ConfigError, match="is larger than 1,000,000 bytes"):
            load_config(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 256 << 10, f"{peak:,} bytes held"
