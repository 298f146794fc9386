"""A media file or a dataset_info.json that exists but is no regular file (a pipe, /dev/zero, a folder) is named as such,
not as missing with advice to fix a path that is right."""

from __future__ import annotations

import os

from engine.multimodal.media import probe


def test_a_pipe_or_device_is_not_called_missing(tmp_path):
    pipe = tmp_path / "pipe.png"
    os.mkfifo(pipe)
    for path in (str(pipe), "/dev/zero"):
        assert probe("images", path) == "is not a regular file (a pipe, device or socket)"
    assert probe("images", str(tmp_path / "gone.png")) == "is missing"
    (tmp_path / "loop.png").symlink_to(tmp_path / "loop.png")  # a link to itself: "missing" sent users to the path
    (tmp_path / "dead.mp4").symlink_to(tmp_path / "gone.mp4")
    for path in ("loop.png", "dead.mp4"):
        assert probe("images", str(tmp_path / path)) == "is a link that leads to no file (its target is gone, or the " \
            "links loop)"
    assert probe("videos", str(tmp_path)) == "is a folder, not a file"


def test_a_dataset_info_json_that_is_a_pipe_or_folder_is_named_as_one(tmp_path):
    """It was reported as absent ("there is no dataset_info.json in ..."), beside the name the user can see there."""
    import pytest

    from engine.data.errors import DatasetError
    from engine.data.registry import resolve_dataset

    os.mkfifo(tmp_path / "dataset_info.json")
    with pytest.raises(DatasetError, match=r"dataset_info.json is not a regular file \(a folder, pipe or device\)"):
        resolve_dataset("rows", str(tmp_path))
    (tmp_path / "dataset_info.json").unlink()
    (tmp_path / "dataset_info.json").mkdir()
    with pytest.raises(DatasetError, match="is not a regular file"):
        resolve_dataset("rows", str(tmp_path))
    (tmp_path / "dataset_info.json").rmdir()
    with pytest.raises(DatasetError, match="there is no dataset_info.json"):
        resolve_dataset("rows", str(tmp_path))
