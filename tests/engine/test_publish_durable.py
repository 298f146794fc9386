"""A run's result published by rename is durable, as engine.atomic_write's files are: the final save's and the
export's staged files (engine.train.final_save.publish), a processor file's copy and the demo model's cached copy are
flushed to the disk (fsync) before the rename that names them, and their folder after it. Before, they were renamed
unsynced: a power loss soon after could leave an empty weights file under its final name. A file whose flush fails
(EIO) fails the save with nothing moved; a folder that cannot be synced leaves the published files as they are."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.train import final_save
from engine.train.final_save import STAGING_DIR, publish, save_final


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@pytest.fixture
def calls(monkeypatch) -> list[tuple[str, str]]:
    """Every fsync (of the path it flushed) and every rename (of its source), in order."""
    seen: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        seen.append(("fsync", _target(fd)))
        real_fsync(fd)

    def replace(src, dst, *args, **kwargs) -> None:
        seen.append(("replace", str(src)))
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    return seen


def _staged(out: Path) -> Path:
    staging = out / STAGING_DIR
    (staging / "sub").mkdir(parents=True)
    (staging / "adapter_model.safetensors").write_bytes(b"weights")
    (staging / "tokenizer.json").write_text("{}")
    (staging / "sub" / "preprocessor_config.json").write_text("{}")
    return staging


def test_published_files_are_synced_before_the_first_rename_and_the_folder_after_the_last(tmp_path, calls):
    out = tmp_path / "run"
    staging = _staged(out)
    (out / "tokenizer.json").write_text("earlier")
    publish(staging, out)
    assert (out / "tokenizer.json").read_text() == "{}" and (out / "sub" / "preprocessor_config.json").is_file()
    first_rename = next(i for i, (kind, _) in enumerate(calls) if kind == "replace")
    last_rename = max(i for i, (kind, _) in enumerate(calls) if kind == "replace")
    synced_before = {path for kind, path in calls[:first_rename] if kind == "fsync"}
    for name in ("adapter_model.safetensors", "tokenizer.json", "sub/preprocessor_config.json", "sub"):
        assert str(staging / name) in synced_before, name
    assert ("fsync", str(out)) in calls[last_rename:]


def test_a_file_whose_flush_fails_fails_the_final_save_with_nothing_moved(tmp_path, monkeypatch):
    out = tmp_path / "run"
    out.mkdir()
    (out / "adapter_model.safetensors").write_bytes(b"earlier weights")
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if _target(fd).endswith("adapter_model.safetensors"):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    def save_model(folder: str) -> None:
        (Path(folder) / "adapter_model.safetensors").write_bytes(b"new weights")

    trainer = SimpleNamespace(args=SimpleNamespace(should_save=True), is_fsdp_enabled=False, save_model=save_model,
                              accelerator=SimpleNamespace(wait_for_everyone=lambda: None))
    monkeypatch.setattr(os, "fsync", fsync)
    with pytest.raises(OSError) as raised:
        save_final(trainer, out, lambda folder: (folder / "tokenizer.json").write_text("{}"))
    assert raised.value.errno == errno.EIO
    assert (out / "adapter_model.safetensors").read_bytes() == b"earlier weights"
    assert sorted(p.name for p in out.iterdir()) == ["adapter_model.safetensors"]  # no staging, nothing half-moved


def test_a_folder_that_cannot_be_synced_leaves_the_published_files(tmp_path, monkeypatch, caplog):
    out = tmp_path / "run"
    staging = _staged(out)
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir(_target(fd)):
            raise OSError(errno.EINVAL, "Invalid argument")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with caplog.at_level("DEBUG", logger="engine.atomic_write"):
        publish(staging, out)
    assert (out / "adapter_model.safetensors").read_bytes() == b"weights" and not staging.exists()
    assert f"Cannot sync {out}" in caplog.text


def test_a_link_in_the_staging_folder_is_not_opened_through(tmp_path, calls):
    out = tmp_path / "run"
    staging = _staged(out)
    elsewhere = tmp_path / "elsewhere.txt"
    elsewhere.write_text("not the save's")
    (staging / "link.json").symlink_to(elsewhere)
    final_save.sync_tree(staging)
    assert ("fsync", str(elsewhere)) not in calls


def test_a_processor_file_copy_is_synced_before_its_rename(tmp_path, calls):
    from engine.multimodal.processor import _copy_from_model

    model, target = tmp_path / "model", tmp_path / "staging"
    model.mkdir()
    target.mkdir()
    (model / "preprocessor_config.json").write_text('{"image_processor_type": "X"}')
    _copy_from_model(model, "preprocessor_config.json", target)
    assert (target / "preprocessor_config.json").read_text() == '{"image_processor_type": "X"}'
    kinds = [kind for kind, _ in calls]
    assert kinds == ["fsync", "replace", "fsync"]
    assert calls[0][1] == calls[1][1]  # the temp file flushed is the one renamed
    assert calls[2] == ("fsync", str(target))


def test_the_demo_models_cached_copy_is_synced_before_its_rename(tmp_path, calls):
    from engine.demo import build_once

    def build(staging: Path) -> None:
        staging.mkdir()
        (staging / "model.safetensors").write_bytes(b"weights")

    target = tmp_path / "demo-model"
    build_once(target, lambda: False, build)
    assert (target / "model.safetensors").read_bytes() == b"weights"
    rename = next(i for i, (kind, _) in enumerate(calls) if kind == "replace")
    staging = calls[rename][1]
    assert ("fsync", f"{staging}/model.safetensors") in calls[:rename]
    assert ("fsync", str(tmp_path)) in calls[rename:]


def _failing_trainer(error: OSError):
    def save_model(folder: str) -> None:
        raise error

    return SimpleNamespace(args=SimpleNamespace(should_save=True), is_fsdp_enabled=False, save_model=save_model,
                           accelerator=SimpleNamespace(wait_for_everyone=lambda: None))


def test_a_failed_final_save_removes_an_empty_staging_folder_rmtree_could_not(tmp_path, monkeypatch):
    """shutil.rmtree (ignore_errors) gives up on a folder it cannot open to list (its permissions changed), though
    the folder, empty, can be removed: the failed save left an empty .final-save.partial behind."""
    out = tmp_path / "run"
    monkeypatch.setattr(final_save.shutil, "rmtree", lambda path, ignore_errors=False: None)
    with pytest.raises(OSError):
        save_final(_failing_trainer(OSError(errno.EROFS, "Read-only file system")), out, lambda folder: None)
    assert not (out / STAGING_DIR).exists()


def test_a_staging_folder_that_cannot_be_removed_is_named(tmp_path, monkeypatch, caplog):
    """A read-only mount on the staging folder itself: the save fails (EROFS) and the folder, a mount point, cannot
    be removed (EBUSY); a warning names it rather than leaving it behind unexplained."""
    out = tmp_path / "run"
    staging = out / STAGING_DIR
    real_rmdir = os.rmdir

    def rmdir(path, *args, **kwargs):
        if Path(path) == staging:
            raise OSError(errno.EBUSY, "Device or resource busy", str(path))
        return real_rmdir(path, *args, **kwargs)

    monkeypatch.setattr(os, "rmdir", rmdir)
    with pytest.raises(OSError), caplog.at_level("WARNING", logger="engine.train.final_save"):
        save_final(_failing_trainer(OSError(errno.EROFS, "Read-only file system")), out, lambda folder: None)
    assert staging.is_dir()
    assert f"The unfinished final save's folder {staging} could not be removed (Device or resource busy)" in caplog.text


def test_a_failure_making_room_removes_the_staging_folder(tmp_path, monkeypatch):
    out = tmp_path / "run"

    def make_room(folder):
        raise PermissionError(errno.EACCES, "Permission denied", str(folder / "adapter_model.safetensors"))

    monkeypatch.setattr(final_save, "make_room", make_room)
    with pytest.raises(PermissionError):
        save_final(_failing_trainer(OSError(errno.EIO, "not reached")), out, lambda folder: None)
    assert not (out / STAGING_DIR).exists()


def _cache_bundle():
    from datasets import Dataset

    from engine.data import DatasetBundle

    rows = Dataset.from_dict({"input_ids": [[1, 2, 3]] * 4, "labels": [[1, 2, 3]] * 4})
    return DatasetBundle(train=rows, eval=None, stats={"rows": 4})


def test_a_tokenized_cache_entry_is_synced_before_its_rename_and_its_folder_after(tmp_path, monkeypatch, calls):
    from engine.data import cache as data_cache

    monkeypatch.setenv("LF_ENGINE_CACHE", str(tmp_path / "cache"))
    folder = data_cache.save_entry("k" * 16, _cache_bundle())
    assert folder is not None and data_cache.load_entry("k" * 16) is not None
    rename = next(i for i, (kind, path) in enumerate(calls) if kind == "replace" and Path(path).parent == folder.parent
                  and Path(path).name.startswith(f".{'k' * 16}-"))
    staged = Path(calls[rename][1])
    synced_before = {path for kind, path in calls[:rename] if kind == "fsync"}
    files = {str(staged / path.relative_to(folder)) for path in folder.rglob("*") if path.is_file()}
    assert files and files <= synced_before, files - synced_before
    assert ("fsync", str(folder.parent)) in calls[rename:]


def test_a_tokenized_cache_entry_whose_flush_fails_is_not_published(tmp_path, monkeypatch, caplog):
    from engine.data import cache as data_cache

    monkeypatch.setenv("LF_ENGINE_CACHE", str(tmp_path / "cache"))
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if _target(fd).endswith(".arrow"):
            raise OSError(errno.EIO, "Input/output error")
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    with caplog.at_level("WARNING"):
        assert data_cache.save_entry("k" * 16, _cache_bundle()) is None
    assert "Tokenized data not cached" in caplog.text and "Input/output error" in caplog.text
    assert [path.name for path in (tmp_path / "cache" / "tokenized").iterdir() if not path.name.startswith(".lock")] \
        == [], list((tmp_path / "cache" / "tokenized").iterdir())
