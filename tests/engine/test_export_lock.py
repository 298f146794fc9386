"""Two exports into one export_dir at once: the second is refused naming the first, the lock lies beside the folder
(never one of the exported model's files) and is let go however the export ends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from tinymodels import build_tiny_model

from engine.errors import UserError
from engine.run_lock import claim_export, export_lock_path, release

REPO = Path(__file__).resolve().parents[2]

# `lf-engine export` whose model load waits for the test's go-ahead (a file), so the test can start a second export
# while this one holds its folder.
SLOW_EXPORT = """
import sys, time
from pathlib import Path
from engine import export
from engine.cli import main

real = export._load_merged
def slow(*args, **kwargs):
    print("LOADING", flush=True)
    while not Path(sys.argv[2]).exists():
        time.sleep(0.05)
    return real(*args, **kwargs)
export._load_merged = slow
sys.exit(main(["export", sys.argv[1]]))
"""


@pytest.fixture(scope="module")
def adapter(tmp_path_factory):
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    base_dir = build_tiny_model(tmp_path_factory.mktemp("lock-base"))
    adapter_dir = tmp_path_factory.mktemp("lock-adapter")
    get_peft_model(AutoModelForCausalLM.from_pretrained(base_dir),
                   LoraConfig(r=2, target_modules=["q_proj"])).save_pretrained(adapter_dir)
    return base_dir, adapter_dir


def _config(adapter, folder: Path, export_dir: Path) -> Path:
    config = folder / "export.yaml"
    config.write_text(f"model_name_or_path: {adapter[0]}\nadapter_name_or_path: {adapter[1]}\ntemplate: chatml\n"
                      f"export_dir: {export_dir}\n", encoding="utf-8")
    return config


def test_a_second_export_into_the_same_folder_is_refused_naming_the_first(adapter, tmp_path, capsys):
    """Both had cleared the folder and written their shards into it; the second now stops before touching it. The
    first is a process of its own; the second runs `lf-engine export` in this one (the lock is the other process's
    all the same; a third interpreter only added seconds of imports)."""
    from engine.cli import main

    export_dir, go = tmp_path / "merged", tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    first = subprocess.Popen([sys.executable, "-c", SLOW_EXPORT, str(_config(adapter, tmp_path, export_dir)), str(go)],
                             cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stdout.readline().strip() == "LOADING"  # it holds the folder now
        second_dir = tmp_path / "second"
        second_dir.mkdir()
        capsys.readouterr()
        assert main(["export", str(_config(adapter, second_dir, export_dir))]) != 0
        said = capsys.readouterr().err
        assert f"`{export_dir}` is being written by another export that is still going (`lf-engine export`, process " \
               f"{first.pid})" in said, said
        assert "choose another export_dir" in said and "Traceback" not in said
        assert not export_dir.exists() or not any(export_dir.iterdir())  # the second wrote nothing there
    finally:
        go.touch()
        out, err = first.communicate(timeout=300)
    assert first.returncode == 0, err
    assert "Reload check: passed" in out
    names = {p.name for p in export_dir.iterdir()}
    assert "model.safetensors" in names and not any("lock" in name for name in names)
    assert export_lock_path(export_dir) == tmp_path / ".merged.export.lock" and export_lock_path(export_dir).is_file()
    release(claim_export(export_dir, "after"))  # let go once the first ended


def test_an_export_that_fails_lets_go_of_its_folder(adapter, tmp_path, monkeypatch):
    from engine import export
    from engine.config import build_config

    def broken(*args, **kwargs):
        raise RuntimeError("the merge failed")

    monkeypatch.setattr(export, "_merge_save_verify", broken)
    cfg = build_config({"model_name_or_path": str(adapter[0]), "adapter_name_or_path": str(adapter[1]),
                        "template": "chatml", "export_dir": str(tmp_path / "merged")})
    with pytest.raises(RuntimeError, match="the merge failed"):
        export.run_export(cfg)
    release(claim_export(tmp_path / "merged", "after"))


def test_a_lock_held_elsewhere_refuses_and_a_planted_link_is_named(tmp_path):
    held = claim_export(tmp_path / "merged", "run 20260101-000000-export-aaaa")
    try:
        with pytest.raises(UserError, match=rf"`run 20260101-000000-export-aaaa`, process {os.getpid()}"):
            # flock locks belong to the open file: a second open in this process is refused as another process is
            claim_export(tmp_path / "merged", "second")
    finally:
        release(held)
    target = tmp_path / "users-file"
    target.write_text("keep")
    (tmp_path / ".other.export.lock").symlink_to(target)
    with pytest.raises(UserError, match="it must be a plain file"):
        claim_export(tmp_path / "other", "x")
    assert target.read_text() == "keep"


def test_an_export_recording_itself_in_its_export_folder_is_not_stopped_by_its_own_lock(adapter, tmp_path):
    """A job's run folder may be its export folder (the config's folder holds its run.json). The job's lock there
    (.run.lock, taken first) made the folder 'not empty' and the export was refused; once let through, it would
    have been listed among the exported files and removed by the next export as an earlier export's file while
    that export's job held it."""
    from engine.config import load_config
    from engine.export import run_export
    from engine.lifecycle import JobContext
    from engine.run_lock import LOCK_NAME

    export_dir = tmp_path / "merged"
    config = _config(adapter, tmp_path, export_dir)
    held = []
    for _ in range(2):
        with JobContext(export_dir, "export"):
            result = run_export(load_config(str(config)), run_dir=str(export_dir))
            held.append(os.stat(export_dir / LOCK_NAME).st_ino)  # still the file this job locked
        info = json.loads((export_dir / "export_info.json").read_text(encoding="utf-8"))
        assert LOCK_NAME not in result["files"] and LOCK_NAME not in info["files"]
        assert result["verified"] and "model.safetensors" in result["files"]
    assert held[0] == held[1]
