"""TensorBoard's event files (``report_to: tensorboard``) are written into a folder of the run's own: a link planted as
``runs``, as the dated folder or as the event file itself had the writer (which makes its folders and opens its file
by name, following links) write into a folder or file elsewhere. The files' names and content stay the writer's."""

from __future__ import annotations

import importlib.util
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

pytestmark = pytest.mark.skipif(importlib.util.find_spec("tensorboard") is None, reason="tensorboard is not installed")

STAMP = "runs/Dec07_10-00-00_testhost"
WHEN = 1_765_000_000


@pytest.fixture()
def writer_names(monkeypatch):
    """The dated folder's and the event file's names made predictable (as a planter could guess them)."""
    from tensorboard.summary.writer import event_file_writer
    from transformers.integrations import integration_utils

    monkeypatch.setattr(integration_utils, "default_logdir", lambda: STAMP)
    monkeypatch.setattr(event_file_writer.time, "time", lambda: float(WHEN))
    monkeypatch.setattr(event_file_writer, "_global_uid", SimpleNamespace(get=lambda: 0))
    import socket

    return f"events.out.tfevents.{WHEN:010d}.{socket.gethostname()}.{os.getpid()}.0"


def _trainer(out: Path):
    from transformers.integrations import TensorBoardCallback

    callback = TensorBoardCallback()
    trainer = SimpleNamespace(args=SimpleNamespace(output_dir=str(out), to_json_string=lambda: "{}"),
                              callback_handler=SimpleNamespace(callbacks=[object(), callback]),
                              is_world_process_zero=lambda: True)
    return trainer, callback


def _start_and_log(trainer, callback) -> None:
    """What the Trainer does: the callback's train begin (the writer starts) and one log line."""
    from engine.train.tensorboard_folder import own_tensorboard_folder

    own_tensorboard_folder(trainer)
    state = SimpleNamespace(is_world_process_zero=True, is_hyper_param_search=False, global_step=1)
    callback.on_train_begin(trainer.args, state, None)
    callback.on_log(trainer.args, state, None, logs={"loss": 1.5})
    callback.on_train_end(trainer.args, state, None)


def _event_files(out: Path) -> list[Path]:
    return sorted(out.rglob("events.out.tfevents.*"))


def test_a_link_planted_as_the_event_file_is_removed_not_written_through(tmp_path, writer_names, caplog):
    out = tmp_path / "run"
    precious = tmp_path / "precious.txt"
    precious.write_text("the user's own file")
    (out / STAMP).mkdir(parents=True)
    (out / STAMP / writer_names).symlink_to(precious)
    trainer, callback = _trainer(out)
    with caplog.at_level(logging.WARNING):
        _start_and_log(trainer, callback)
    assert precious.read_text() == "the user's own file"
    [event_file] = _event_files(out)
    assert event_file == out / STAMP / writer_names and not event_file.is_symlink()
    assert b"loss" in event_file.read_bytes()
    assert "was a link" in caplog.text and str(precious) in caplog.text


@pytest.mark.parametrize("planted", ["runs", STAMP])
def test_a_link_planted_as_a_folder_is_replaced_by_the_runs_own(tmp_path, writer_names, planted, caplog):
    out = tmp_path / "run"
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (out / planted).parent.mkdir(parents=True, exist_ok=True)
    (out / planted).symlink_to(elsewhere, target_is_directory=True)
    trainer, callback = _trainer(out)
    with caplog.at_level(logging.WARNING):
        _start_and_log(trainer, callback)
    assert list(elsewhere.iterdir()) == []
    assert not (out / "runs").is_symlink() and not (out / STAMP).is_symlink()
    assert [p.name for p in _event_files(out)] == [writer_names]
    assert _event_files(out)[0].parent == out / STAMP
    assert "was a link" in caplog.text


def test_the_folder_and_file_names_are_the_writers_own(tmp_path, writer_names):
    out = tmp_path / "run"
    trainer, callback = _trainer(out)
    _start_and_log(trainer, callback)
    assert callback.logging_dir == str(out / STAMP)  # transformers' default: <output_dir>/runs/<date>_<host>
    assert [p.relative_to(out).as_posix() for p in _event_files(out)] == [f"{STAMP}/{writer_names}"]


def test_a_folder_the_user_set_is_left_as_it_is(tmp_path, monkeypatch):
    from engine.train.tensorboard_folder import own_tensorboard_folder

    mine = tmp_path / "my-tb"
    monkeypatch.setenv("TENSORBOARD_LOGGING_DIR", str(mine))
    trainer, callback = _trainer(tmp_path / "run")
    assert own_tensorboard_folder(trainer) is None
    assert callback.logging_dir == str(mine) and not (tmp_path / "run").exists()


def test_a_file_in_the_folders_place_is_named(tmp_path, writer_names):
    from engine.errors import UserError
    from engine.train.tensorboard_folder import own_tensorboard_folder

    out = tmp_path / "run"
    out.mkdir()
    (out / "runs").write_text("notes")
    trainer, _ = _trainer(out)
    with pytest.raises(UserError, match=r"runs is a file, where TensorBoard's event files go .* move it away"):
        own_tensorboard_folder(trainer)
    assert (out / "runs").read_text() == "notes"
