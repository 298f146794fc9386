"""A browser test's wait that runs out keeps the page's screenshot, the board's log and what the page did in a folder
that the failure's message names (pytest's own temporary folders are rotated away by later runs)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.e2e import conftest
from tests.e2e.conftest import kept_on_failure, wait_for


class FakePage:
    def screenshot(self, path: str, full_page: bool = False) -> None:
        Path(path).write_bytes(b"\x89PNG fake")


def test_a_wait_that_runs_out_keeps_the_screenshot_the_log_and_the_page_events(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "FAILURES", tmp_path / "failures")
    board = tmp_path / "board"
    board.mkdir()
    (board / "board.log").write_text("POST /gradio_api/upload 200\n")
    with pytest.raises(AssertionError) as caught:
        with kept_on_failure(FakePage(), board, "upload", ["0.10s request POST /gradio_api/upload"]):
            wait_for(lambda: False, 0.2, "the uploaded file")
    message = str(caught.value)
    assert message.startswith("timed out waiting for the uploaded file (kept page.png, board.log, page-events.txt in ")
    folder = Path(re.search(r" in (\S+)\)$", message).group(1))
    assert folder.parent == tmp_path / "failures" and folder.name.startswith("upload-")
    assert (folder / "board.log").read_text() == "POST /gradio_api/upload 200\n"
    assert (folder / "page.png").read_bytes().startswith(b"\x89PNG")
    assert "request POST /gradio_api/upload" in (folder / "page-events.txt").read_text()


def test_a_page_that_cannot_be_shot_still_leaves_the_log(tmp_path, monkeypatch):
    class GonePage:
        def screenshot(self, path: str, full_page: bool = False) -> None:
            raise RuntimeError("Target page, context or browser has been closed")

    monkeypatch.setattr(conftest, "FAILURES", tmp_path / "failures")
    (tmp_path / "board.log").write_text("log\n")
    with pytest.raises(AssertionError, match=r"kept board\.log in "):
        with kept_on_failure(GonePage(), tmp_path, "gone"):
            raise AssertionError("timed out waiting for the page")
    (folder,) = (tmp_path / "failures").iterdir()
    assert "has been closed" in (folder / "screenshot-failed.txt").read_text()


def test_a_block_that_passes_keeps_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(conftest, "FAILURES", tmp_path / "failures")
    with kept_on_failure(FakePage(), tmp_path, "fine"):
        pass
    assert not (tmp_path / "failures").exists()
