"""torch's and safetensors' own refusals to write a file carry no errno, only text ("Parent directory <dir> does not
exist.", "open file failed with strerror: <reason>", "File <name> cannot be opened.", safetensors' "(os error 20) at
path ..."): a checkpoint, final save or export they refused ended the run in a traceback with error code crash. They
now end it `failed` with write_denied (the file, the reason, the fix), exit 2, like a refused write with an errno;
any other RuntimeError keeps its traceback. The errors below are the libraries' own, made by a real save."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.errors import UserError
from engine.lifecycle import JobContext
from engine.write_denied import WriteDeniedError, is_denied, refusal, write_error

REPO = Path(__file__).resolve().parents[2]


def _raised(save, path: Path) -> BaseException:
    try:
        save(path)
    except Exception as err:  # noqa: BLE001 - the library's own error, whatever its type
        return err
    raise AssertionError(f"{path} was written")


def _torch(path: Path) -> BaseException:
    return _raised(lambda p: torch.save({"step": 1}, str(p)), path)


def _safetensors(path: Path) -> BaseException:
    return _raised(lambda p: save_file({"w": torch.zeros(2)}, str(p)), path)


def test_torchs_refusals_are_write_refusals_naming_the_path_and_reason(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "checkpoint-2").write_text("a file where the checkpoint folder was")
    (run / "optimizer.pt").mkdir()
    in_a_file = _torch(run / "checkpoint-2" / "optimizer.pt")  # "Parent directory <dir> does not exist."
    gone = _torch(run / "checkpoint-4" / "optimizer.pt")
    a_folder = _torch(run / "optimizer.pt")  # "open file failed with strerror: Is a directory"
    assert isinstance(in_a_file, RuntimeError) and not isinstance(in_a_file, OSError)
    for err, path, reason in ((in_a_file, run / "checkpoint-2", "not a folder"),
                              (gone, run / "checkpoint-4", "no such folder"),
                              (a_folder, None, "Is a directory")):
        found = refusal(err)
        assert found is not None and found.blocked, err
        assert (found.path, found.reason) == (str(path) if path else None, reason)
        assert is_denied(err, run)
        named = write_error(err, run, then="resume the run")
        assert isinstance(named, WriteDeniedError) and isinstance(named, UserError)
        text = str(named)
        assert text.startswith(f"Cannot write {path or f'a file in {run}'} ({reason}): something changed {run}")
        assert "Remove what is in the way" in text and text.endswith("then resume the run.")
    assert not is_denied(in_a_file, tmp_path / "elsewhere")  # a folder outside the run's is no write of the run's


def test_older_torchs_cannot_be_opened_and_its_strerror_forms(tmp_path):
    old = RuntimeError(f"File {tmp_path}/run/checkpoint-2/optimizer.pt cannot be opened.")
    text = str(write_error(old, tmp_path / "run"))
    assert text.startswith(f"Cannot write {tmp_path}/run/checkpoint-2/optimizer.pt (cannot be opened). Make "
                           f"{tmp_path / 'run'} writable for this user")
    read_only = RuntimeError("[enforce fail at inline_container.cc:747] . open file failed with strerror: "
                             "Read-only file system")
    assert "(Read-only file system). Make" in str(write_error(read_only, tmp_path))
    with_stack = RuntimeError(f"Parent directory {tmp_path}/gone does not exist.\nException raised from setup at "
                              "caffe2/serialize/inline_container.cc:1 (most recent call first):\nframe #0: ...")
    assert refusal(with_stack).path == f"{tmp_path}/gone"  # TORCH_SHOW_CPP_STACKTRACES appends the C++ frames


def test_safetensors_refusals_name_the_folder_not_its_temp_file(tmp_path):
    (tmp_path / "staging").write_text("a file where the staging folder was")
    err = _safetensors(tmp_path / "staging" / "adapter_model.safetensors")
    found = refusal(err)
    assert found is not None and found.blocked and found.path == str(tmp_path / "staging")
    text = str(write_error(err, tmp_path, then="export again"))
    assert text.startswith(f"Cannot write a file in {tmp_path / 'staging'} (Not a directory): something changed")
    assert ".tmp" not in text and text.endswith("then export again.")


@pytest.mark.parametrize("err", [
    RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    RuntimeError("[enforce fail at inline_container.cc:747] . open file failed with strerror: Too many open files"),
    RuntimeError("PytorchStreamReader failed reading zip archive: failed finding central directory"),
    RuntimeError("Error(s) in loading state_dict: File model.safetensors cannot be opened as it is"),
    Exception("Error while serializing: I/O error: Input/output error (os error 5)"),
    FileNotFoundError(2, "No such file or directory", "/elsewhere/train.json"),
    NotADirectoryError(20, "Not a directory"),  # no path: nothing says it was the run's folder
])
def test_other_failures_are_not_taken_for_a_refused_write(err, tmp_path):
    assert refusal(err) is None and not is_denied(err, tmp_path) and write_error(err, tmp_path) is None


def test_a_checkpoint_torch_refuses_ends_the_run_write_denied_not_a_traceback(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(WriteDeniedError) as raised:
        with JobContext(run, "train", "a: 1\n"):
            (run / "checkpoint-2").write_text("replaced by a file")
            torch.save({"step": 2}, str(run / "checkpoint-2" / "optimizer.pt"))
    info = json.loads((run / "run.json").read_text())
    assert info["status"] == "failed" and info["error_code"] == "write_denied" and info["exit_code"] == 2
    assert info["error"] == str(raised.value) and "traceback_tail" not in (run / "events.jsonl").read_text()
    assert info["error"].startswith(f"Cannot write {run / 'checkpoint-2'} (not a folder)")
    assert info["error"].endswith("then start the run again.")


def test_another_runtime_error_in_a_run_keeps_its_traceback(tmp_path):
    run = tmp_path / "run"
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        with JobContext(run, "train", "a: 1\n"):
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    assert json.loads((run / "run.json").read_text())["error_code"] == "crash"


def test_a_run_whose_checkpoint_folder_is_replaced_mid_save_exits_2_and_keeps_the_earlier_one(tmp_path, monkeypatch,
                                                                                              capsys):
    """Between the adapter's files and optimizer.pt, checkpoint-4 becomes a file: torch refuses the optimizer's save.
    The run ends write_denied, exit 2, one line; checkpoint-2 stays whole and the run resumes from it."""
    from transformers import Trainer

    from engine.checkpoints import latest_complete
    from engine.cli import main

    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=2",
            "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}", "max_steps=4"]
    whole = Trainer._save_optimizer_and_scheduler
    kept = {}

    def replaced(self, output_dir):
        if Path(output_dir).name == "checkpoint-4":
            kept.update({p.name: p.read_bytes() for p in (out / "checkpoint-2").iterdir()})
            shutil.rmtree(output_dir)
            Path(output_dir).write_text("something else's file")
        return whole(self, output_dir)

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", replaced)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert f"error: Cannot write {out / 'checkpoint-4'} (not a folder): something changed {out}" in err
    assert "then resume the run." in err and "Traceback" not in err
    info = json.loads((out / "run.json").read_text())
    assert (info["status"], info["error_code"], info["exit_code"]) == ("failed", "write_denied", 2)
    assert {p.name: p.read_bytes() for p in (out / "checkpoint-2").iterdir()} == kept
    assert latest_complete(out)[0].name == "checkpoint-2"


def test_a_file_where_a_save_makes_its_folder_is_in_the_way(tmp_path):
    """transformers' and peft's save_pretrained begin with os.makedirs(folder, exist_ok=True): a file there (the
    final save's staging folder replaced by one) raised FileExistsError, a crash with a traceback."""
    import os

    (tmp_path / "staging").write_text("a file")
    err = _raised(lambda p: os.makedirs(p, exist_ok=True), tmp_path / "staging")
    (tmp_path / "staging").unlink()  # the failed final save removes its staging folder, whatever it has become
    text = str(write_error(err, tmp_path, then="resume the run"))
    assert text.startswith(f"Cannot write {tmp_path / 'staging'} (a file where a folder should be): something")
    (tmp_path / "folder").mkdir()
    for collided in (_raised(lambda p: os.makedirs(p), tmp_path / "folder"),  # exist_ok=False: no save's refusal
                     _raised(lambda p: os.open(p, os.O_CREAT | os.O_EXCL), tmp_path / "folder"),
                     FileExistsError(17, "File exists", str(tmp_path / "folder"))):
        assert isinstance(collided, FileExistsError) and write_error(collided, tmp_path) is None
