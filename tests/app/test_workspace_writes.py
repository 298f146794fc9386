"""The workspace's own files survive a failing write: a saved config is replaced whole or not at all, and the
browser secret is the owner's alone from its first byte."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest

from app.workspace import Workspace
from tests.full_disk import fill_disk


def test_a_full_disk_keeps_the_config_saved_before_under_that_name(tmp_path, monkeypatch):
    ws = Workspace(tmp_path / "ws")
    ws.save_config("mine", {"model_name_or_path": "demo", "learning_rate": 0.001})
    before = ws.config_path("mine").read_text()
    fill_disk(monkeypatch, str(ws.configs_dir))
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


BOMB = "".join(f"x{i}: &b{i} [" + ", ".join([f"*b{i - 1}" if i else "y"] * 10) + "]\n" for i in range(9)).encode()


@pytest.mark.parametrize("content", [
    b"a: [1, 2\n", b"\xff\xfe not utf-8", b"key: *unknown_alias\n",
    b"cutoff_len: 1" + b"0" * 5000 + b"\n",  # past int()'s 4,300 digits: ValueError
    b"a: " + b"[" * 5000 + b"]" * 5000 + b"\n",  # RecursionError
    BOMB + b"model_name_or_path: demo\nlearning_rate: *b8\n",  # taken whole into the form
    b"model_name_or_path: demo\ndefault_system: " + b"a" * 1_000_001 + b"\n",  # past 1 MB: read (11 MB took minutes)
])
def test_a_broken_last_used_config_does_not_keep_the_board_from_starting(tmp_path, content):
    """A last-used.yaml edited by hand into broken YAML (or another tool's bytes) opened the board on a traceback:
    the page is built from it. The form opens on the demo settings instead, and loading it by name says why."""
    from app.context import Board
    from app.i18n import t
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import DEMO_SETTINGS, LAST_CONFIG, SavedConfigError

    ws = Workspace(tmp_path / "ws").ensure()
    ws.configs_dir.mkdir(parents=True, exist_ok=True)
    (ws.configs_dir / f"{LAST_CONFIG}.yaml").write_bytes(content)
    assert ws.startup_settings()["model_name_or_path"] == DEMO_SETTINGS["model_name_or_path"]
    with pytest.raises(SavedConfigError, match=LAST_CONFIG):
        ws.read_config(LAST_CONFIG)
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    on_load_saved = next(f.fn for f in demo.fns.values() if "on_load_saved" in getattr(f.fn, "__qualname__", ""))
    for lang in ("en", "zh"):
        message, *rest = on_load_saved(LAST_CONFIG, lang)
        assert message.startswith(t(lang, "config_unreadable", name=LAST_CONFIG)) and "last-used.yaml" in message


def test_a_whole_number_past_64_bits_neither_starts_a_run_nor_breaks_the_page(tmp_path):
    """`max_samples` had no upper bound: 10**21 typed in the form started a run and was saved as last-used.yaml, and
    from then on the page could not be rendered (orjson: "Integer exceeds 64-bit range"), so the board did not start.
    The value is refused before a run starts, and an old config holding one still opens the page."""
    from gradio.routes import ORJSONResponse

    from app import forms
    from app.context import Board
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import LAST_CONFIG

    checked = forms.validate({"model_name_or_path": "demo", "template": "chatml", "dataset": "demo_identity",
                              "max_samples": 10**21, "seed": 10**30}, "train")
    assert not checked.ok
    text = "\n".join(checked.problems)
    assert "`max_samples: 1000000000000000000000` is beyond the largest whole number" in text and "`seed: " in text
    ws = Workspace(tmp_path / "ws").ensure()
    ws.save_config(LAST_CONFIG, {"model_name_or_path": "demo", "max_samples": 10**21})
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    ORJSONResponse._render(demo.get_config_file())  # the page's config, as gradio sends it
    page_load = next(f for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "on_page_load"
                     and f.fn.__module__ == "app.tabs.train")
    values = page_load.fn(*(getattr(block, "value", None) for block in page_load.inputs))
    ORJSONResponse._render(values)  # the form's values (and its command) when the page opens


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EACCES])
def test_a_failed_config_write_is_said_and_a_started_run_is_still_followed(tmp_path, monkeypatch, code):
    """Saving a config, and keeping the form as last-used after Start, raised a bare OSError: Save showed gradio's
    untranslated "Error", and a Start whose run had already begun lost its run id (the page never followed it)."""
    import sys

    from app.context import Board
    from app.jobs import JobManager
    from app.tabs import train
    from app.ui import build_ui
    from tests.app.conftest import DEMO_DATA, FAKE_ENGINE

    ws = Workspace(tmp_path / "ws").ensure()
    jobs = JobManager(ws.runs_dir, [sys.executable, str(FAKE_ENGINE)], poll_interval=0.05).start()
    board = Board(ws, jobs)

    def fail(name, mapping):
        raise OSError(code, os.strerror(code), str(ws.configs_dir / f"{name}.yaml"))

    monkeypatch.setattr(ws, "save_config", fail)
    try:
        mapping = {"model_name_or_path": "demo", "template": "chatml", "dataset": "demo_identity",
                   "dataset_dir": str(DEMO_DATA)}
        message, run_id = train.start_run(board, mapping, "", "zh")
        assert run_id and jobs.wait(run_id, 30) == "completed"
        assert run_id in message and "last-used" in message and "运行不受影响" in message
        demo = build_ui(board)
        on_save = next(f.fn for f in demo.fns.values() if f.fn is not None and f.fn.__name__ == "on_save")
        inputs = next(f for f in demo.fns.values() if f.fn is on_save).inputs
        values = [getattr(block, "value", None) for block in inputs[1:-1]]
        for lang, words in (("en", "could not be saved"), ("zh", "无法保存")):
            saved, _ = on_save("mine", *values, lang)
            assert words in saved and "mine" in saved
            assert ("No space left" in saved or "设备上没有剩余空间" in saved) == (code == errno.ENOSPC)
    finally:
        jobs.shutdown()


def _secret_in_time(ws: Workspace, seconds: float = 10.0) -> str:
    """``ws.secret()`` from another thread, failing (not hanging the suite) when it takes longer than ``seconds``."""
    import threading

    out: list[str] = []
    worker = threading.Thread(target=lambda: out.append(ws.secret()), daemon=True)
    worker.start()
    worker.join(seconds)
    assert out, f"secret() did not return in {seconds} s"
    return out[0]


@pytest.mark.parametrize("kind", ["fifo", "sparse", "link_to_device", "not_utf8", "short"])
def test_a_browser_secret_that_is_not_a_small_regular_file_is_replaced(tmp_path, kind, caplog):
    """A named pipe held the board's start for good, a sparse file was read whole, and bytes that are not UTF-8
    raised out of the page's build: each is replaced by a fresh key, with a warning."""
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    path = ws.root / ".browser-secret"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "sparse":
        with open(path, "wb") as fh:
            fh.truncate(256 << 20)
    elif kind == "link_to_device":
        path.symlink_to("/dev/zero")
    else:
        path.write_bytes(b"\xff" * 40 if kind == "not_utf8" else b"abc\n")
    with caplog.at_level("WARNING"):
        secret = _secret_in_time(ws)
    assert len(secret) >= 16 and ws.secret() == secret  # written as a regular file, and kept
    assert path.is_file() and not path.is_symlink() and path.stat().st_size < 100
    assert "not a key this board wrote" in caplog.text


def test_a_folder_named_as_the_browser_secret_stops_the_board_with_the_fix(tmp_path, capsys):
    from app.main import main

    (tmp_path / ".browser-secret").mkdir()
    assert main(["--workspace", str(tmp_path), "--port", "7959"]) == 2
    err = capsys.readouterr().err
    assert f"the browser key {tmp_path / '.browser-secret'} cannot be read or replaced" in err
    assert "remove it" in err and "Traceback" not in err


def test_the_workspace_lock_never_writes_through_a_link_nor_waits_on_a_pipe(tmp_path, capsys):
    """A workspace copied from elsewhere can hold anything under .board.lock: a link to a file of the user's was
    truncated and overwritten with the board's pid, and a named pipe held a chat worker's watcher for good."""
    from app.main import main
    from engine.infer.board_watch import board_holds

    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    ws = Workspace(tmp_path / "ws")
    ws.root.mkdir()
    ws.lock_path.symlink_to(mine)
    with pytest.raises(OSError, match="its lock file is a link; remove it"):
        ws.lock()
    assert mine.read_text() == "keep me\n"
    assert main(["--workspace", str(ws.root), "--port", "7959"]) == 2
    err = capsys.readouterr().err
    assert "its lock file is a link; remove it" in err and str(ws.lock_path) in err and "Traceback" not in err
    assert mine.read_text() == "keep me\n"
    ws.lock_path.unlink()
    os.mkfifo(ws.lock_path)
    with pytest.raises(OSError, match="not a plain file; remove it"):
        ws.lock()
    import threading

    found = []
    watcher = threading.Thread(target=lambda: found.append(board_holds(ws.lock_path)), daemon=True)
    watcher.start()
    watcher.join(10)
    if not found:
        os.close(os.open(ws.lock_path, os.O_WRONLY | os.O_NONBLOCK))  # let it go
    assert found and found[0] in (False, None)


def test_a_link_planted_under_a_writes_temp_name_is_never_written_through(tmp_path):
    """A workspace copied from elsewhere can hold links under the names the board writes through: a reward's code went
    to ``rewards/<name>.tmp`` (a link there had the user's file overwritten with the code), and every atomic write's
    temp file was opened following a link."""
    import threading

    from app.reward_view import save_reward_code
    from engine.runs import write_text_atomic

    mine = tmp_path / "notes.txt"
    mine.write_text("keep me\n")
    rewards = tmp_path / "rewards"
    rewards.mkdir()
    (rewards / "my_reward.tmp").symlink_to(mine)
    spec, problems = save_reward_code(rewards, "def my_reward(prompts, completions, **kwargs):\n    return [0.0]\n")
    assert spec and mine.read_text() == "keep me\n"
    target = tmp_path / "state.json"
    temp = target.with_name(f".{target.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    temp.symlink_to(mine)
    write_text_atomic(target, "{}", mode=0o600)
    write_text_atomic(target, "{}")
    assert target.read_text() == "{}" and not target.is_symlink() and mine.read_text() == "keep me\n"
    assert stat.S_IMODE(target.stat().st_mode) != 0 and not temp.exists()


def test_scratch_files_go_to_a_private_folder_never_through_a_planted_link(tmp_path, monkeypatch, caplog):
    """In a workspace another user can write, `.scratch` (where the dataset preview and the rewards "try it" put
    their worker's config, result and log) could be a link to that user's folder: the board wrote the config there,
    read back a result they could write, and its worker wrote through any link they placed at the result's path.
    Each call now gets a new 0700 folder inside a `.scratch` of the user's own (or the system temp folder)."""

    from app import dataset_preview

    ws = Workspace(tmp_path / "ws").ensure()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (ws.root / ".scratch").symlink_to(theirs, target_is_directory=True)
    seen = {}

    def worker(module, args, log, timeout):
        seen["config"], seen["out"] = Path(args[0]), Path(args[1])
        Path(args[1]).write_text(json.dumps({"rows": []}))
        return 0

    monkeypatch.setattr(dataset_preview, "run_worker", worker)
    folder = ws.scratch_call("preview-")
    assert dataset_preview.run_preview({"dataset": "x"}, folder) == {"rows": []}
    scratch = ws.root / ".scratch"
    assert not scratch.is_symlink() and scratch.is_dir() and list(theirs.iterdir()) == []
    assert seen["config"].parent == folder and folder.parent == scratch
    assert not folder.exists()  # removed with what the call wrote
    assert stat.S_IMODE(ws.scratch_call("x-").stat().st_mode) == 0o700

    os.chmod(scratch, 0o777)  # a folder others can write (they could rename the call's folder): not used
    with caplog.at_level("WARNING"):
        elsewhere = ws.scratch_call("preview-")
    assert elsewhere.parent != scratch and "not a folder that only this user can write" in caplog.text
    elsewhere.rmdir()
