"""A save that cannot write (a full disk, a folder not writable, a read-only mount) ends in one clear error naming the
problem, the path and the fix, never a traceback, and loses nothing saved before: the final save's processor files
(a vision-language model's), the final save and checkpoints of a run (engine.lifecycle), an export. A full disk was
named by the run's JobContext already; a refused write (EACCES, EPERM, EROFS) went through as a PermissionError."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine import diskfull
from engine.cli import main
from engine.diskfull import DiskFullError
from engine.errors import UserError
from engine.lifecycle import JobContext
from engine.train.final_save import STAGING_DIR
from engine.write_denied import WriteDeniedError, is_denied, write_error

REPO = Path(__file__).resolve().parents[2]


def _processor_save(tmp_path: Path, monkeypatch, failure: OSError):
    from engine.multimodal import processor
    from engine.train.workflow import _save_processor_files

    source, run = tmp_path / "model", tmp_path / "run"
    staging = run / STAGING_DIR
    source.mkdir()
    staging.mkdir(parents=True)
    (source / "config.json").write_text("{}")
    (source / "preprocessor_config.json").write_text('{"image_processor_type": "X"}')

    def copy(folder, name, target):
        if failure.filename == "":
            failure.filename = str(Path(target) / f".{name}.x1y2")
        raise failure

    monkeypatch.setattr(processor, "_copy_from_model", copy)
    cfg = SimpleNamespace(model=SimpleNamespace(model_name_or_path=str(source), cache_dir=None, model_revision="main"))
    return lambda: _save_processor_files(cfg, staging), run


def test_processor_files_on_a_full_disk_name_the_run_folder_and_the_fix(tmp_path, monkeypatch):
    save, run = _processor_save(tmp_path, monkeypatch, OSError(errno.ENOSPC, "No space left on device"))
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 3)
    with pytest.raises(DiskFullError, match=f"No space left on device: {run}, free 3 MB. Free some space") as raised:
        save()
    assert str(raised.value).endswith("then start the run again.")  # no checkpoint to resume from


def test_processor_files_in_a_folder_not_writable_name_the_file_and_the_fix(tmp_path, monkeypatch):
    save, run = _processor_save(tmp_path, monkeypatch, PermissionError(errno.EACCES, "Permission denied", ""))
    with pytest.raises(WriteDeniedError) as raised:
        save()
    text = str(raised.value)
    assert text.startswith(f"Cannot write {run / STAGING_DIR / '.preprocessor_config.json.x1y2'} (Permission denied)")
    assert f"Make {run} writable for this user" in text and "then start the run again." in text
    assert isinstance(raised.value, UserError)  # the CLI prints it in one line


def test_any_other_failure_of_the_processor_files_is_not_disguised(tmp_path, monkeypatch):
    save, _ = _processor_save(tmp_path, monkeypatch, OSError(errno.EIO, "Input/output error"))
    with pytest.raises(OSError) as raised:
        save()
    assert raised.value.errno == errno.EIO and not isinstance(raised.value, UserError)


def test_refused_writes_in_their_disguises(tmp_path):
    inside = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "run" / "run.json"))
    rofs = OSError(errno.EROFS, "Read-only file system")  # on an open file: no name
    rust = Exception("Error while serializing: I/O error: Permission denied (os error 13)")  # safetensors' type
    for err in (inside, rofs, rust):
        assert is_denied(err, tmp_path / "run")
        assert isinstance(write_error(err, tmp_path / "run", then="export again"), WriteDeniedError)
    assert "a file in" in str(write_error(rust, tmp_path / "run")) and "(Permission denied)" in str(
        write_error(rust, tmp_path / "run"))
    assert "(Read-only file system)" in str(write_error(rofs, tmp_path / "run"))
    elsewhere = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "data" / "train.json"))
    assert not is_denied(elsewhere, tmp_path / "run")  # a dataset it cannot read is no write of the run's
    assert write_error(elsewhere, tmp_path / "run") is None
    assert write_error(ValueError("bad value"), tmp_path) is None


def test_a_refused_write_in_the_run_folder_is_recorded_and_raised_as_a_user_error(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(WriteDeniedError) as raised:
        with JobContext(run, "train", "a: 1\n"):
            raise PermissionError(errno.EACCES, "Permission denied", str(run / "checkpoint-2" / "optimizer.pt"))
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and info["error_code"] == "write_denied" and info["exit_code"] == 2
    assert info["error"] == str(raised.value)
    assert f"Cannot write {run / 'checkpoint-2' / 'optimizer.pt'} (Permission denied)" in info["error"]
    assert "then start the run again." in info["error"]
    end = json.loads((run / "events.jsonl").read_text().splitlines()[-1])
    assert end["event"] == "end" and end["error_code"] == "write_denied"


def test_a_refused_read_elsewhere_is_not_called_a_write(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(PermissionError):
        with JobContext(run, "train", "a: 1\n"):
            raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / "data.json"))
    assert json.loads((run / "run.json").read_text())["error_code"] == "crash"


def test_a_final_save_refused_by_permissions_keeps_the_earlier_model_and_says_so(tmp_path, monkeypatch, capsys):
    """The final save's tokenizer write is refused: exit 2 with one line, the earlier final model byte for byte,
    the checkpoints to resume from; no staging folder left."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    from engine.checkpoints import latest_complete

    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=1",
            "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"]
    assert main([*args, "max_steps=2"]) == 0
    before = {name: (out / name).read_bytes() for name in ("adapter_model.safetensors", "tokenizer.json",
                                                           "adapter_config.json", "lf_config.yaml")}
    whole = PreTrainedTokenizerBase.save_pretrained

    def refused(self, folder, *a, **k):
        if Path(folder).name != STAGING_DIR:  # the checkpoints' saves
            return whole(self, folder, *a, **k)
        raise PermissionError(errno.EACCES, "Permission denied", str(Path(folder) / "tokenizer.json"))

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", refused)
    capsys.readouterr()
    assert main([*args, "max_steps=4", "resume_from_checkpoint=true"]) == 2
    err = capsys.readouterr().err
    assert f"error: Cannot write {out / STAGING_DIR / 'tokenizer.json'} (Permission denied)" in err
    assert f"Make {out} writable" in err and "then resume the run." in err and "Traceback" not in err
    assert {name: (out / name).read_bytes() for name in before} == before
    assert not (out / STAGING_DIR).exists()
    assert latest_complete(out)[0].name == "checkpoint-4"
    info = json.loads((out / "run.json").read_text())
    assert info["status"] == "failed" and info["error_code"] == "write_denied"


def test_an_export_whose_folder_refuses_a_write_says_so_in_one_line(tmp_path, monkeypatch, capsys):
    from tinymodels import build_tiny_model

    from engine import export

    model = build_tiny_model(tmp_path / "model")
    export_dir = tmp_path / "merged"
    config = tmp_path / "export.yaml"
    config.write_text(f"model_name_or_path: {model}\ntemplate: chatml\nexport_dir: {export_dir}\n")

    def refused(cfg, folder, progress, started):
        raise Exception("Error while serializing: I/O error: Read-only file system (os error 30)")

    monkeypatch.setattr(export, "_merge_save_verify", refused)
    monkeypatch.setattr(export, "check_export", lambda cfg: [])
    assert main(["export", str(config)]) == 2
    err = capsys.readouterr().err
    assert f"error: Cannot write a file in {export_dir} (Read-only file system)" in err
    assert "then export again." in err and "Traceback" not in err


def _torch_refusal(path):
    """torch's own refusal of a file it cannot open, which names no file: a folder stands where it would write."""
    import torch

    os.makedirs(path, exist_ok=True)
    torch.save({}, path)  # RuntimeError: [enforce fail at inline_container.cc:N] . open file failed with strerror: ...


def test_torchs_refusal_names_the_folder_of_the_save_it_came_from(tmp_path):
    """torch says only `open file failed with strerror: <reason>`; a save whose target is known names that folder."""
    from engine.write_denied import saving_into

    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="open file failed with strerror") as bare:
        _torch_refusal(run / "x.pt")
    assert f"Cannot write a file in {run} (Is a directory)" in str(write_error(bare.value, run))  # all it can say
    with pytest.raises(RuntimeError) as named:
        with saving_into(run / "outer"), saving_into(run / "checkpoint-3"):  # the innermost save names it
            _torch_refusal(run / "checkpoint-3" / "optimizer.pt")
    message = str(write_error(named.value, run))
    assert f"Cannot write a file in {run / 'checkpoint-3'} (Is a directory)" in message, message
    with pytest.raises(PermissionError) as own:  # an error that names its file keeps it
        with saving_into(run / "checkpoint-3"):
            raise PermissionError(errno.EACCES, "Permission denied", str(run / "checkpoint-3" / "a.json"))
    assert f"Cannot write {run / 'checkpoint-3' / 'a.json'} (Permission denied)" in str(write_error(own.value, run))


def test_a_final_save_refused_by_torch_names_the_staging_folder(tmp_path):
    from engine.train.final_save import save_final

    out = tmp_path / "run"

    class Trainer:
        args = SimpleNamespace(should_save=True)
        accelerator = SimpleNamespace(wait_for_everyone=lambda: None, state=SimpleNamespace())
        is_fsdp_enabled = False

        def save_model(self, folder):
            _torch_refusal(Path(folder) / "pytorch_model.bin")

    with pytest.raises(RuntimeError) as raised:
        save_final(Trainer(), out, lambda folder: None)
    message = str(write_error(raised.value, out, then="resume the run"))
    assert f"Cannot write a file in {out / STAGING_DIR} (Is a directory)" in message, message
    assert not (out / STAGING_DIR).exists()


def test_a_checkpoint_refused_by_torch_names_its_checkpoint_folder(tmp_path, monkeypatch, capsys):
    """A real run whose first checkpoint's optimizer.pt torch cannot write: one line naming checkpoint-1."""
    import torch

    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    real_save = torch.save

    def save(obj, f, *args, **kwargs):
        if str(f).endswith("optimizer.pt"):
            os.makedirs(f, exist_ok=True)  # what torch then refuses, in its own words
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", save)
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=1",
            "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}", "max_steps=1"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"error: Cannot write a file in {out / 'checkpoint-1'} (Is a directory)" in err, err
    assert "Traceback" not in err
    info = json.loads((out / "run.json").read_text())
    assert info["error_code"] == "write_denied" and f"a file in {out / 'checkpoint-1'} " in info["error"]
