"""Small files read whole were bounded: a board worker's log (for the last lines of a failure), the ``.netrc`` and
wandb settings the pre-flight looks in for a W&B key, and the demo models' stamps. A sparse file of hundreds of MB
was read whole, and a named pipe in its place held the reader (the board's handler, the check, the demo's start)
until a writer came. Now a log is read from its last 64 KB, a login file that cannot be read so counts as found
(wandb decides), and a stamp that cannot be read makes the demo model out of date (built again)."""

from __future__ import annotations

import os

import pytest

from tests.engine.test_cache_files_bounded import SIZE, bounded, plant


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
def test_a_worker_log_is_read_from_its_end(tmp_path, kind):
    from app.worker_process import log_tail

    log = tmp_path / "worker.log"
    plant(log, kind)
    if kind == "sparse":
        with open(log, "r+b") as fh:
            fh.seek(SIZE)
            fh.write(b"\nTraceback (most recent call last):\nValueError: the worker's own reason\n")
        assert bounded(lambda: log_tail(log, 6)) == "Traceback (most recent call last):\nValueError: the worker's own reason"
    else:
        assert bounded(lambda: log_tail(log, 6), pipe=log) == ""
    small = tmp_path / "small.log"
    small.write_text("one\ntwo\nthree\n", encoding="utf-8")
    assert log_tail(small, 2) == "two\nthree"


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
@pytest.mark.parametrize("where", [".netrc", ".config/wandb/settings"])
def test_a_login_file_that_cannot_be_read_whole_counts_as_found(tmp_path, monkeypatch, kind, where):
    from engine.tracker_credentials import wandb_login_problem

    monkeypatch.chdir(tmp_path)  # no project wandb/settings here
    env = {"HOME": str(tmp_path)}
    assert wandb_login_problem(environ=env, interactive=False) is not None  # nothing there yet
    plant(tmp_path / where, kind)
    found = bounded(lambda: wandb_login_problem(environ=env, interactive=False),
                    pipe=tmp_path / where if kind == "pipe" else None)
    assert found is None


def test_login_files_are_still_read(tmp_path, monkeypatch):
    """The bounded reads parse as before: a host's entry, another host's, a settings file's key."""
    from engine.tracker_credentials import wandb_login_problem

    monkeypatch.chdir(tmp_path)
    env = {"HOME": str(tmp_path)}
    netrc = tmp_path / ".netrc"
    netrc.write_text("# mine\nmachine github.com login me password x\n", encoding="utf-8")
    netrc.chmod(0o600)
    assert wandb_login_problem(environ=env, interactive=False) is not None
    netrc.write_text("machine api.wandb.ai\n  login user\n  password \"k k\"\n", encoding="utf-8")
    assert wandb_login_problem(environ=env, interactive=False) is None
    netrc.unlink()
    settings = tmp_path / ".config" / "wandb" / "settings"
    settings.parent.mkdir(parents=True)
    settings.write_text("[default]\nbase_url = https://api.wandb.ai\n", encoding="utf-8")
    assert wandb_login_problem(environ=env, interactive=False) is not None
    settings.write_text("[default]\napi_key = " + "k" * 40 + "\n", encoding="utf-8")
    assert wandb_login_problem(environ=env, interactive=False) is None


@pytest.mark.parametrize("kind", ["sparse", "pipe"])
def test_a_demo_stamp_that_cannot_be_read_makes_the_model_out_of_date(tmp_path, monkeypatch, kind):
    from engine import demo, demo_vlm

    folder = tmp_path / "demo"
    plant(folder / demo.STAMP_FILE, kind)
    assert bounded(lambda: demo._stamp_matches(folder, {"version": 1}),
                   pipe=folder / demo.STAMP_FILE if kind == "pipe" else None) is False
    target = tmp_path / "demo-vlm"
    plant(target / demo_vlm.STAMP_FILE, kind)
    (target / "model.safetensors").write_bytes(b"")
    monkeypatch.setattr(demo_vlm, "build_once", lambda where, current, build: current())  # whether it is current
    assert bounded(lambda: demo_vlm.ensure_demo_vlm(target),
                   pipe=target / demo_vlm.STAMP_FILE if kind == "pipe" else None) is False
    assert os.path.lexists(target / demo_vlm.STAMP_FILE)  # left for the build to replace


def test_a_folder_in_place_of_a_small_file_is_called_a_folder(tmp_path, caplog):
    """A folder under the name of a file the engine reads (lf_stats.json, a cache entry's meta) was reported as "not
    a regular file (a pipe, device or socket)", which sends the user looking for the wrong thing."""
    import logging

    from engine.data import _saved_stats
    from engine.small_json import read_small_json, reason

    folder = tmp_path / "lf_stats.json"
    folder.mkdir()
    with pytest.raises(OSError) as err:
        read_small_json(folder)
    assert reason(err.value) == "not a regular file (a folder)"
    with caplog.at_level(logging.WARNING):
        assert _saved_stats(folder) == {}
    assert "cannot be read (not a regular file (a folder))" in caplog.text
