"""A media path that exists but is no file (a pipe, /dev/zero) is named as such by the pre-flight media check, not
as missing with advice to fix a path that is right."""

from __future__ import annotations

import os

from engine.multimodal.media import probe


def test_a_pipe_or_device_is_not_called_missing(tmp_path):
    pipe = tmp_path / "pipe.png"
    os.mkfifo(pipe)
    for path in (str(pipe), "/dev/zero"):
        assert probe("images", path) == "is not a regular file (a pipe, device or socket)"
    assert probe("images", str(tmp_path / "gone.png")) == "is missing"
    assert probe("videos", str(tmp_path)) == "is a folder, not a file"
