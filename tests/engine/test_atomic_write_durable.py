"""An atomic write is durable: the temp file's content is flushed to the disk (fsync) before it is renamed over the
file, and the folder after the rename. Without the first, a power loss soon after the rename left the file empty on
ext4 (data=writeback) or XFS; a folder that cannot be synced (EINVAL/EBADF on some file systems) must not fail a write
whose file is in place already, while a file whose flush fails (EIO, a full disk a network file system reports only
then) fails the write and leaves the old content."""

from __future__ import annotations

import errno
import os

import pytest

from engine.atomic_write import write_text_atomic


def _target(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


def test_the_content_is_synced_before_the_rename_and_the_folder_after_it(tmp_path, monkeypatch):
    calls: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        calls.append(("fsync", _target(fd)))
        real_fsync(fd)

    def replace(src, dst, *args, **kwargs) -> None:
        calls.append(("replace", str(dst)))
        real_replace(src, dst, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    target = tmp_path / "run.json"
    write_text_atomic(target, '{"status": "running"}')
    assert target.read_text() == '{"status": "running"}'
    assert [kind for kind, _ in calls] == ["fsync", "replace", "fsync"]
    synced_file, replaced, synced_folder = (what for _, what in calls)
    assert synced_file.startswith(str(tmp_path / ".run.json.")) and synced_file.endswith(".tmp")  # the temp file
    assert replaced == str(target)
    assert synced_folder == str(tmp_path)


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EBADF, errno.EIO])
def test_a_folder_that_cannot_be_synced_does_not_fail_the_write(tmp_path, monkeypatch, code):
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        if os.path.isdir(_target(fd)):
            raise OSError(code, os.strerror(code))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "config.yaml"
    target.write_text("old")
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


def test_a_folder_that_cannot_be_opened_does_not_fail_the_write(tmp_path, monkeypatch):
    real_open = os.open

    def open_(path, flags, *args, **kwargs):
        if flags & getattr(os, "O_DIRECTORY", 0):
            raise OSError(errno.EACCES, "Permission denied", str(path))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", open_)
    write_text_atomic(tmp_path / "run.json", "{}")
    assert (tmp_path / "run.json").read_text() == "{}"


@pytest.mark.parametrize("code", [errno.EIO, errno.ENOSPC, errno.EDQUOT])
def test_a_file_whose_flush_fails_fails_the_write_and_keeps_the_old_content(tmp_path, monkeypatch, code):
    def fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "run.json"
    target.write_text("old")
    with pytest.raises(OSError) as raised:
        write_text_atomic(target, "new")
    assert raised.value.errno == code
    assert target.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]  # no temp file left


@pytest.mark.parametrize("code", [errno.EINVAL, errno.EBADF, errno.ENOTSUP, errno.ENOSYS])
def test_a_file_system_that_cannot_sync_a_file_still_gets_the_write(tmp_path, monkeypatch, code):
    def fsync(fd: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(os, "fsync", fsync)
    target = tmp_path / "run.json"
    write_text_atomic(target, "new")
    assert target.read_text() == "new"
