"""The DeepSpeed and FSDP JSON files a config names (`deepspeed:`, `fsdp_config:`) are read only as regular files of
at most 16 MB: the check reads them in the board's process too, and a sparse file of gigabytes was read whole, a
named pipe held the reader until a writer came (or, where the check looked first, was called missing), and bytes
that are not UTF-8 ended the check with a UnicodeDecodeError traceback. Each is now a user error naming the file,
what it is and the fix."""

from __future__ import annotations

import os
import threading
import tracemalloc
from types import SimpleNamespace

import pytest

from engine.errors import UserError


def _deepspeed(path):
    from engine.train.parallel.deepspeed import load

    return load(str(path))


def _fsdp(path):
    from engine.train.parallel.fsdp import resolve_fsdp

    return resolve_fsdp("full_shard auto_wrap", str(path), None)


def _deepspeed_preflight(path):
    from engine.train.parallel.deepspeed import DeepSpeedConfigError, preflight_problems

    found = preflight_problems(SimpleNamespace(train=SimpleNamespace(deepspeed=str(path))), 1, "cuda")
    raise DeepSpeedConfigError("\n".join(found) or "no problem found")


READERS = [_deepspeed, _fsdp, _deepspeed_preflight]


def _raised(fn, path, pipe=False) -> tuple[str, int]:
    """The message of the UserError ``fn(path)`` raises and the memory it held at its peak; fails when it waits
    on the pipe ``path`` for more than 10 s."""
    out, done = [], threading.Event()

    def run():
        tracemalloc.start()
        try:
            fn(path)
            out.append(None)
        except BaseException as err:  # noqa: BLE001 - checked in the test's thread
            out.append(err)
        out.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    if not done.wait(10):
        if pipe:
            os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))  # lets the reader go
        done.wait(10)
        pytest.fail(f"{fn.__name__} waited on a named pipe")
    err, peak = out
    assert isinstance(err, UserError), f"{fn.__name__} raised {err!r}"
    return str(err), peak


@pytest.mark.parametrize("reader", READERS)
def test_an_outsized_file_is_named_without_being_read_whole(tmp_path, reader):
    big = tmp_path / "ds.json"
    with open(big, "wb") as fh:
        fh.truncate(256 << 20)  # sparse: no disk taken
    message, peak = _raised(reader, big)
    assert f"is {256 << 20:,} bytes, more than any " in message and "JSON file such as examples/" in message
    assert peak < 40 << 20, f"{peak:,} bytes held"


@pytest.mark.parametrize("reader", READERS)
def test_a_pipe_is_named_not_waited_on(tmp_path, reader):
    pipe = tmp_path / "ds.json"
    os.mkfifo(pipe)
    message, _ = _raised(reader, pipe, pipe=True)
    assert "is a pipe, device or socket, not a regular file" in message


@pytest.mark.parametrize("reader", READERS)
def test_a_folder_is_named(tmp_path, reader):
    message, _ = _raised(reader, tmp_path)
    assert "is a folder, not a regular file" in message


@pytest.mark.parametrize("reader", READERS)
def test_bytes_that_are_not_utf8_are_named(tmp_path, reader):
    bad = tmp_path / "ds.json"
    bad.write_bytes(b'{"train_batch_size": "\xff"}')
    message, _ = _raised(reader, bad)
    assert "cannot be read (not UTF-8 text)" in message


@pytest.mark.parametrize("reader", [_deepspeed, _fsdp])
def test_a_missing_file_and_a_good_one_read_as_before(tmp_path, reader):
    message, _ = _raised(reader, tmp_path / "none.json")
    assert "does not exist; give a " in message and " JSON file such as examples/" in message
    good = tmp_path / "ok.json"
    good.write_text('{"zero_optimization": {"stage": 2}, "fsdp_version": 2}', encoding="utf-8")
    assert reader(good)


@pytest.mark.parametrize("reader", [_deepspeed, _fsdp])
def test_an_outsized_file_gone_once_refused_is_named_by_the_size_it_had(tmp_path, reader, monkeypatch):
    """The refusal looked the size up again by the path: a file removed (or replaced) once it was refused ended the
    check with a FileNotFoundError traceback instead of the error naming it."""
    import engine.small_json as small_json

    big = tmp_path / "ds.json"
    with open(big, "wb") as fh:
        fh.truncate(64 << 20)
    real = small_json.read_small_json

    def then_removed(path, *args):
        try:
            return real(path, *args)
        finally:
            os.unlink(path)

    monkeypatch.setattr(small_json, "read_small_json", then_removed)
    message, _ = _raised(reader, big)
    assert f"is {64 << 20:,} bytes, more than any " in message
