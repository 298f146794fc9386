"""The workspace's own files survive a failing write: a saved config is replaced whole or not at all, and the
browser secret is the owner's alone from its first byte."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pytest

from app.workspace import Workspace


def test_a_full_disk_keeps_the_config_saved_before_under_that_name(tmp_path, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    ws.save_config("mine", {"model_name_or_path": "demo", "learning_rate": 0.001})
    before = ws.config_path("mine").read_text()
    real = Path.write_text

    def full_disk(self, text, *args, **kwargs):
        real(self, text[: len(text) // 2], *args, **kwargs)
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(Path, "write_text", full_disk)
    with pytest.raises(OSError, match="No space left"):
        ws.save_config("mine", {"model_name_or_path": "demo", "learning_rate": 0.5, "dataset": "x" * 1000})
    monkeypatch.undo()
    assert ws.config_path("mine").read_text() == before
    assert ws.read_config("mine")["learning_rate"] == 0.001
    assert sorted(p.name for p in ws.configs_dir.iterdir()) == ["mine.yaml"]  # no temp file left behind


def test_the_browser_secret_is_the_owners_alone_and_kept(tmp_path):
    ws = Workspace(tmp_path / "ws")
    secret = ws.secret()
    path = tmp_path / "ws" / ".browser-secret"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert len(secret) >= 16 and ws.secret() == secret
    assert [p.name for p in (tmp_path / "ws").iterdir()] == [".browser-secret"]
