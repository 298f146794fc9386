"""A model folder's processor files (and the font ERNIE-4.5-VL's names) are copied into the trained model's or the
export's folder only when they are regular files of a bounded size inside the model folder: a sparse file of
gigabytes was copied at full size, a link to any file of the user's was copied into a folder that may be uploaded,
a named pipe was silently left behind, and a link already in the target (an export over an earlier one) was
written through."""

from __future__ import annotations

import json
import os
from types import SimpleNamespace

import pytest

from engine.multimodal import processor
from engine.multimodal.errors import MediaError

CONFIG = {"processor_class": "Ernie4_5_VLMoeProcessor",
          "video_processor": {"video_processor_type": "Ernie4_5_VLMoeVideoProcessor", "font": "font.ttf"}}


@pytest.fixture()
def folders(tmp_path):
    source, target = tmp_path / "model", tmp_path / "out"
    source.mkdir()
    target.mkdir()
    (source / "config.json").write_text("{}")
    return source, target


def test_an_outsized_file_is_refused_without_being_copied(folders, monkeypatch):
    source, target = folders
    monkeypatch.setattr(processor, "MAX_PROCESSOR_FILE_BYTES", 1 << 20, raising=False)  # the test's bound
    (source / "processor_config.json").write_text(json.dumps(CONFIG))
    with open(source / "font.ttf", "wb") as fh:
        fh.truncate(8 << 20)  # sparse: no disk taken, but copied at full size
    with pytest.raises(MediaError, match=r"font.ttf is 8,388,608 bytes, more than any model's processor file"):
        processor.copy_processor_files(source, target)
    assert sorted(p.name for p in target.iterdir()) == ["processor_config.json"]  # no font, no temporary file


def test_the_bound_is_far_above_any_real_file():
    assert getattr(processor, "MAX_PROCESSOR_FILE_BYTES", 0) >= 512 << 20


@pytest.mark.parametrize("name", ["processor_config.json", "font.ttf"])
def test_a_link_out_of_the_model_folder_is_refused(folders, tmp_path, name):
    source, target = folders
    secret = tmp_path / "secret.json"
    secret.write_text(json.dumps({**CONFIG, "token": "hf_private"}))
    if name == "font.ttf":
        (source / "processor_config.json").write_text(json.dumps(CONFIG))
    (source / name).symlink_to(secret)
    with pytest.raises(MediaError, match=f"{name} is a link to .*secret.json, outside the model folder"):
        processor.copy_processor_files(source, target)
    assert not (target / name).exists()


def test_a_pipe_is_named_not_left_behind(folders):
    source, target = folders
    os.mkfifo(source / "preprocessor_config.json")
    with pytest.raises(MediaError, match="preprocessor_config.json cannot be copied .*not a regular file"):
        processor.copy_processor_files(source, target)


def test_links_within_the_folder_and_a_hub_snapshots_are_copied(tmp_path):
    repo = tmp_path / "models--org--vlm"
    snapshot, blobs, target = repo / "snapshots" / "abc123", repo / "blobs", tmp_path / "out"
    for folder in (snapshot / "sub", blobs, target):
        folder.mkdir(parents=True)
    (blobs / "f00d").write_text(json.dumps({"image_processor_type": "X"}))
    (snapshot / "preprocessor_config.json").symlink_to("../../blobs/f00d")  # as huggingface_hub lays it out
    (snapshot / "sub" / "video.json").write_text(json.dumps({"size": 1}))
    (snapshot / "video_preprocessor_config.json").symlink_to("sub/video.json")
    assert processor.copy_processor_files(snapshot, target) == ["preprocessor_config.json",
                                                                "video_preprocessor_config.json"]
    assert json.loads((target / "preprocessor_config.json").read_text()) == {"image_processor_type": "X"}
    assert not (target / "preprocessor_config.json").is_symlink()


def test_a_link_in_the_target_is_replaced_not_written_through(folders, tmp_path):
    source, target = folders
    (source / "preprocessor_config.json").write_text(json.dumps({"image_processor_type": "X"}))
    mine = tmp_path / "mine.json"
    mine.write_text("the user's own file")
    (target / "preprocessor_config.json").symlink_to(mine)  # left in an export_dir written over
    processor.copy_processor_files(source, target)
    assert mine.read_text() == "the user's own file"
    assert json.loads((target / "preprocessor_config.json").read_text()) == {"image_processor_type": "X"}
    assert oct((target / "preprocessor_config.json").stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_a_refused_file_after_training_is_a_warning(folders, tmp_path, caplog):
    from engine.train.workflow import _save_processor_files

    source, target = folders
    (source / "preprocessor_config.json").symlink_to(tmp_path)  # outside: refused
    cfg = SimpleNamespace(model=SimpleNamespace(model_name_or_path=str(source), cache_dir=None, model_revision="main"))
    _save_processor_files(cfg, target)  # the trained weights stay saved
    assert "Processor files not copied" in caplog.text and "outside the model folder" in caplog.text
