"""Faults the engine must survive with a clear message: NaN and oversized config input, torn checkpoints, a full disk,
and the process start time in every run.json."""

from __future__ import annotations

import errno
import json
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import save_file

from engine import diskfull
from engine.checkpoints import checkpoint_problem, latest_complete, remove_torn, trained_template
from engine.cli import main
from engine.config import ConfigError, build_config, load_config
from engine.diskfull import DiskFullError, is_disk_full
from engine.lifecycle import JobContext

REPO = Path(__file__).resolve().parents[2]


# -- numbers -----------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("learning_rate: .nan", "learning_rate"),
        ("num_train_epochs: .nan", "num_train_epochs"),
        ("max_grad_norm: .nan", "max_grad_norm"),
        ("learning_rate: .inf", "learning_rate"),
        ("max_grad_norm: -.inf", "max_grad_norm"),
        ("video_fps: .nan", "video_fps"),  # no bounds at all
        ("length_penalty: .inf", "length_penalty"),
        ("max_steps: .inf", "max_steps"),  # an int field
        ("save_steps: .nan", "save_steps"),
        ("adam_beta1: .nan", "adam_beta1"),  # a Hugging Face key passed through
        ("learning_rate: nan", "learning_rate"),  # as text
        ("lr_scheduler_kwargs: {min_lr: .nan}", "lr_scheduler_kwargs"),  # inside a passed-through mapping
    ],
)
def test_nan_and_infinities_are_refused(text, key):
    with pytest.raises(ConfigError) as err:
        build_config(yaml.safe_load(text))
    assert len(err.value.problems) == 1
    assert f"`{key}:" in err.value.problems[0] and "not a finite number" in err.value.problems[0]


def test_nan_override_on_the_command_line_exits_2(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    code = main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), "learning_rate=.nan",
                 f"output_dir={tmp_path / 'o'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert "`learning_rate: nan` is not a finite number" in err and "Traceback" not in err


@pytest.mark.parametrize(
    ("override", "shown"),
    [
        ("learning_rate=" + "1" * 5000, "`learning_rate: 11111111111111111111… (5,000 digits)`"),
        ("save_steps=" + "9" * 5000, "`save_steps: 99999999999999999999… (5,000 digits)`"),  # an int field
        ("learning_rate=1e999", "`learning_rate: 1e999`"),
        ("max_grad_norm=-1.5e400", "`max_grad_norm: -1.5e400`"),
    ],
)
def test_an_override_too_large_for_a_float_is_named_as_typed(tmp_path, capsys, monkeypatch, override, shown):
    """5,000 ones on the command line read as infinity, and the message said `learning_rate: inf`, which the user
    never typed; now it shows what was typed (abridged) and why it is refused."""
    monkeypatch.chdir(REPO)
    code = main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), override, f"output_dir={tmp_path / 'o'}"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"{shown} is too large a number (past about 1.8e308 it reads as infinity" in err, err
    assert ": inf`" not in err and len(err) < 2000 and "Traceback" not in err


def test_a_yaml_number_too_large_for_a_float_is_named_as_written_with_its_place(tmp_path):
    path = tmp_path / "big.yaml"
    path.write_text("stage: sft\nlearning_rate: " + "1" * 5000 + ".0\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert (f"`{path}` is not valid YAML at line 2, column 16: `11111111111111111111… (5,001 digits)` is too large "
            "a number (past about 1.8e308 it reads as infinity)") in str(err.value)
    path.write_text("stage: sft\nlearning_rate: .inf\n")  # infinity as written: the settings' own check names it
    with pytest.raises(ConfigError, match=r"`learning_rate: inf` is not a finite number"):
        load_config(path)


# -- sizes ---------------------------------------------------------------------------------------------------------
def test_a_megabyte_model_name_is_refused_briefly():
    with pytest.raises(ConfigError) as err:
        build_config({"model_name_or_path": "m" * 1_000_000})
    message = str(err.value)
    assert "1,000,000 characters" in message and "at most 4000" in message and len(message) < 400


def test_a_too_long_folder_name_is_refused_before_any_file_access():
    with pytest.raises(ConfigError, match="at most 255"):
        build_config({"model_name_or_path": "org/" + "n" * 300})


def test_many_unknown_keys_answer_fast_and_short():
    start = time.time()
    with pytest.raises(ConfigError) as err:
        build_config({f"key{i}": 1 for i in range(120_000)})
    assert time.time() - start < 5
    assert "120,000 keys" in str(err.value) and len(str(err.value)) < 400
    with pytest.raises(ConfigError) as err:
        build_config({f"unknown_key_{i}": 1 for i in range(500)})
    assert len(err.value.problems) == 500 and len(str(err.value)) < 8100
    assert "and 470 more problems" in str(err.value)


def test_a_lone_surrogate_is_named_not_crashed_on():
    with pytest.raises(ConfigError) as err:
        build_config({"dataset": "ok\ud800"})
    message = str(err.value)
    message.encode("utf-8")  # the message itself can be sent and printed
    assert "U+D800" in message and "position 3" in message
    with pytest.raises(ConfigError) as err:
        build_config({"k\udfff" * 300: 1})
    str(err.value).encode("utf-8")


# -- torn checkpoints ----------------------------------------------------------------------------------------------
def make_checkpoint(folder: Path, step: int, *, torn: str | None = None) -> Path:
    """A small checkpoint as the Trainer writes one; ``torn`` cuts it the way a killed save does."""
    ckpt = folder / f"checkpoint-{step}"
    ckpt.mkdir(parents=True)
    (ckpt / "README.md").write_text("# adapter\n")
    if torn == "readme_only":
        return ckpt
    (ckpt / "adapter_config.json").write_text("{}")
    save_file({"w": torch.zeros(64, 64)}, str(ckpt / "adapter_model.safetensors"))
    torch.save({"state": torch.zeros(256)}, ckpt / "optimizer.pt")
    if torn == "weights":
        data = (ckpt / "adapter_model.safetensors").read_bytes()
        (ckpt / "adapter_model.safetensors").write_bytes(data[: len(data) // 2])
    if torn == "optimizer":
        data = (ckpt / "optimizer.pt").read_bytes()
        (ckpt / "optimizer.pt").write_bytes(data[:64])
    if torn == "no_state":
        return ckpt
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return ckpt


def test_an_adapters_saved_template_is_read_only_as_a_name(tmp_path):
    """An adapter folder can come from anywhere (resume, chat, export): its lf_config.yaml is read for one name, and
    anything else in it (not UTF-8, a structure, an alias bomb) reads as no template instead of a crash."""
    (tmp_path / "lf_config.yaml").write_text("template: qwen\n")
    assert trained_template(str(tmp_path)) == "qwen"
    (tmp_path / "lf_config.yaml").write_bytes("template: 千问\n".encode("gbk"))
    assert trained_template(str(tmp_path)) is None
    bomb = "".join(f"x{i}: &b{i} [" + ", ".join([f"*b{i - 1}" if i else "y"] * 10) + "]\n" for i in range(10))
    (tmp_path / "lf_config.yaml").write_text(bomb + "template: *b9\n")
    assert trained_template(str(tmp_path)) is None
    import os
    import threading
    import tracemalloc

    with open(tmp_path / "lf_config.yaml", "wb") as fh:  # outsized (sparse): it was read whole, then parsed
        fh.write(b"template: qwen\n#")
        fh.truncate(256 << 20)
    tracemalloc.start()
    try:
        assert trained_template(str(tmp_path)) is None
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 << 20
    (tmp_path / "lf_config.yaml").unlink()
    os.mkfifo(tmp_path / "lf_config.yaml")  # a pipe held the reader (and the board's check) for good
    found = []
    reader = threading.Thread(target=lambda: found.append(trained_template(str(tmp_path))), daemon=True)
    reader.start()
    reader.join(10)
    if not found:
        os.close(os.open(tmp_path / "lf_config.yaml", os.O_WRONLY | os.O_NONBLOCK))  # let the reader go
    assert found == [None]
    assert trained_template(str(tmp_path / "missing")) is None


@pytest.mark.parametrize(
    ("torn", "says"),
    [
        ("readme_only", "it holds only README.md"),
        ("no_state", "no trainer_state.json"),
        ("weights", "adapter_model.safetensors is cut off"),
        ("optimizer", "optimizer.pt is cut off"),
    ],
)
def test_torn_checkpoints_are_told_apart(tmp_path, torn, says):
    good = make_checkpoint(tmp_path, 4)
    bad = make_checkpoint(tmp_path, 8, torn=torn)
    assert checkpoint_problem(good) is None
    assert says in checkpoint_problem(bad)
    latest, skipped = latest_complete(tmp_path)
    assert latest == good and [p.name for p, _ in skipped] == ["checkpoint-8"]


def _check(out: Path, *extra: str) -> int:
    return main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={out}",
                 f"dataset_dir={REPO / 'examples' / 'data'}", *extra])


def test_check_names_the_checkpoint_a_resume_uses_and_the_torn_one_it_skips(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    make_checkpoint(tmp_path, 6)
    make_checkpoint(tmp_path, 8, torn="readme_only")
    assert _check(tmp_path, "resume_from_checkpoint=true") == 0
    out = capsys.readouterr().out
    assert f"Resumes from {tmp_path / 'checkpoint-6'}, skipping the incomplete checkpoint-8" in out
    assert "it holds only README.md" in out
    # pointing at the torn one by name is refused, with the one to use instead
    assert _check(tmp_path, f"resume_from_checkpoint={tmp_path / 'checkpoint-8'}") == 2
    err = capsys.readouterr().err
    assert "checkpoint-8` is incomplete" in err and f"latest complete one is `{tmp_path / 'checkpoint-6'}`" in err


def test_check_fails_when_every_checkpoint_is_torn(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    make_checkpoint(tmp_path, 8, torn="readme_only")
    assert _check(tmp_path, "resume_from_checkpoint=true") == 2
    err = capsys.readouterr().err
    assert "no checkpoint in" in err and "checkpoint-8: no trainer_state.json" in err and "Traceback" not in err


def test_resume_skips_a_torn_checkpoint_and_trains_on(tmp_path, monkeypatch, caplog):
    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    fast = ["max_steps=4", "logging_steps=1", "save_strategy=steps", "save_steps=2", "max_samples=16",
            f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"]
    assert main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), *fast]) == 0
    # SIGKILL during the save of checkpoint-4 leaves only its README.md
    for item in (out / "checkpoint-4").iterdir():
        if item.name != "README.md":
            item.unlink() if item.is_file() else None
    assert checkpoint_problem(out / "checkpoint-4")
    fast[0] = "max_steps=6"
    assert main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), *fast, "resume_from_checkpoint=true",
                 "overwrite_output_dir=true"]) == 0
    assert "Skipping the incomplete checkpoint-4" in caplog.text and "resuming from checkpoint-2" in caplog.text
    steps = [json.loads(line)["step"] for line in (out / "events.jsonl").read_text().splitlines()
             if json.loads(line)["event"] == "log"]
    # the second run started after step 2, and the first run's lines for steps 3 and 4 are gone: each step once
    assert steps == [1, 2, 3, 4, 5, 6]


# -- a full disk ---------------------------------------------------------------------------------------------------
def test_disk_full_is_recognised_in_its_disguises(tmp_path, monkeypatch):
    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull })"))
    torch_error = RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 500)
    assert not is_disk_full(torch_error, tmp_path)  # space is left: some other write failure
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 3)
    assert is_disk_full(torch_error, tmp_path)
    wrapped = RuntimeError("basic_ios::clear: iostream error")
    wrapped.__cause__ = None
    assert is_disk_full(wrapped, tmp_path)
    assert not is_disk_full(ValueError("bad value"), tmp_path)


def test_job_context_records_a_full_disk_and_cleans_up(tmp_path):
    make_checkpoint(tmp_path, 2)
    make_checkpoint(tmp_path, 4, torn="weights")
    with pytest.raises(DiskFullError) as err:
        with JobContext(tmp_path, "train"):
            raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0") from OSError(
                errno.ENOSPC, "No space left on device")
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 2
    assert run["error"].startswith(f"No space left on device: {tmp_path}, free ") and " MB" in run["error"]
    assert "Removed the incomplete checkpoint-4" in run["error"] and str(err.value) == run["error"]
    assert sorted(p.name for p in tmp_path.glob("checkpoint-*")) == ["checkpoint-2"]
    end = json.loads((tmp_path / "events.jsonl").read_text().splitlines()[-1])
    assert end["status"] == "failed" and end["error"] == run["error"]
    assert not list(tmp_path.glob(".*.tmp"))
    # the message's parameters beside its code, for a reader that says it in another language (the board)
    params = run["error_params"]
    assert params == {"path": str(tmp_path), "free_mb": params["free_mb"], "then": "resume", "removed": ["checkpoint-4"]}
    assert f"free {params['free_mb']:,} MB" in run["error"] and end["error_params"] == params


def test_job_context_survives_when_it_cannot_write_the_outcome(tmp_path, monkeypatch):
    from engine.runs import RunFolder

    ctx = JobContext(tmp_path, "train")
    with pytest.raises(DiskFullError):
        with ctx:
            def no_space(self, **fields):
                raise OSError(errno.ENOSPC, "No space left on device")

            monkeypatch.setattr(RunFolder, "update", no_space)
            raise OSError(errno.ENOSPC, "No space left on device")
    assert ctx.status == "failed" and ctx.error.startswith("No space left on device")
    # no room even for a temp file: run.json is rewritten in its own blocks, so it does not stay "running"
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 2 and run["error"] == ctx.error
    assert "start the run again" in ctx.error and run["error_params"]["then"] == "start"  # no checkpoint to resume from


def test_a_disk_full_before_the_run_begins_is_one_line_and_leaves_nothing_half_written(tmp_path, monkeypatch):
    from engine import lifecycle

    (tmp_path / "config.yaml").write_text("old: run\n")

    def no_space(path, text):
        Path(path).with_name(".partial.tmp").write_text(text[:3])
        Path(path).with_name(".partial.tmp").unlink()
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(lifecycle, "write_text_atomic", no_space)
    with pytest.raises(DiskFullError) as err:
        with JobContext(tmp_path, "train", config_yaml="new: run\n"):
            raise AssertionError("the run must not begin")
    assert str(err.value).startswith(f"No space left on device: {tmp_path}") and "start the run again" in str(err.value)
    assert (tmp_path / "config.yaml").read_text() == "old: run\n"  # the earlier file, whole
    assert not (tmp_path / "run.json").exists()


def test_training_on_a_full_disk_fails_with_the_free_space(tmp_path, monkeypatch, capsys):
    """The optimizer save fails as torch fails on a full disk; the CLI says so in one line and exits 2."""
    from transformers import Trainer

    monkeypatch.chdir(REPO)
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 3)

    def full(self, output_dir):
        Path(output_dir, "optimizer.pt").write_bytes(b"PK\x03\x04 cut")
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")

    monkeypatch.setattr(Trainer, "_save_optimizer_and_scheduler", full)
    out = tmp_path / "run"
    code = main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "max_steps=2", "save_strategy=steps",
                 "save_steps=1", "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"])
    assert code == 2
    err = capsys.readouterr().err
    assert f"error: No space left on device: {out}, free 3 MB" in err and "Traceback" not in err
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["error"].startswith("No space left on device")
    assert not (out / "checkpoint-1").exists()  # the torn checkpoint was removed
    import psutil

    assert abs(run["pid_started"] - psutil.Process().create_time()) < 0.1  # the CLI records the process start time


def test_a_file_size_limit_is_told_apart_from_a_full_disk_in_its_disguises(tmp_path):
    from engine.diskfull import FileTooLargeError, is_file_too_large, storage_error

    efbig = OSError(errno.EFBIG, "File too large")
    rust = Exception("Error while serializing: I/O error: File too large (os error 27)")  # safetensors' own type
    for err in (efbig, rust):
        assert is_file_too_large(err) and not is_disk_full(err)
        found = storage_error(err, tmp_path, then="export again")
        assert isinstance(found, FileTooLargeError) and "then export again" in str(found)
    assert isinstance(storage_error(OSError(errno.ENOSPC, "No space left on device"), tmp_path), DiskFullError)
    assert storage_error(ValueError("bad value"), tmp_path) is None


def test_a_file_size_limit_fails_the_run_with_the_fix_instead_of_a_traceback(tmp_path):
    """EFBIG (FAT32's 4 GiB, `ulimit -f`): safetensors says "File too large (os error 27)" from the checkpoint save."""
    import resource
    import subprocess
    import sys

    out = tmp_path / "run"

    def limit():  # 300 KB per file: the config and logs fit, a checkpoint's weights do not
        resource.setrlimit(resource.RLIMIT_FSIZE, (300 * 1024, 300 * 1024))

    done = subprocess.run(
        [sys.executable, "-m", "engine", "train", str(REPO / "examples" / "sft_lora_demo.yaml"), "max_steps=2",
         "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"],
        cwd=REPO, capture_output=True, text=True, timeout=300, preexec_fn=limit,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)})
    assert done.returncode == 2, done.stderr[-2000:]
    assert "error: File too large: a file under" in done.stderr and "Traceback" not in done.stderr
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 2 and "`ulimit -f` sets a limit" in run["error"]
    assert not list(out.glob("checkpoint-*"))  # the torn checkpoint was removed


def test_a_disk_that_fills_during_the_final_save_leaves_the_earlier_model_whole(tmp_path, monkeypatch, capsys):
    """The tokenizer is cut off half-way through the final save: nothing half-written lands beside the weights, the
    earlier final model stays byte for byte, and resuming then finishes the save."""
    from transformers.tokenization_utils_base import PreTrainedTokenizerBase

    from engine.train.final_save import STAGING_DIR

    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=1",
            "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"]
    assert main([*args, "max_steps=2"]) == 0
    before = {name: (out / name).read_bytes() for name in ("adapter_model.safetensors", "tokenizer.json",
                                                           "adapter_config.json", "lf_config.yaml")}
    whole = PreTrainedTokenizerBase.save_pretrained

    def full(self, folder, *a, **k):
        if Path(folder).name != STAGING_DIR:  # the checkpoints' saves
            return whole(self, folder, *a, **k)
        Path(folder, "tokenizer.json").write_text('{"version": "1.0", "trunc')
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", full)
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 3)
    assert main([*args, "max_steps=4", "resume_from_checkpoint=true"]) == 2
    err = capsys.readouterr().err
    assert f"error: No space left on device: {out}, free 3 MB" in err and "resume the run" in err
    assert {name: (out / name).read_bytes() for name in before} == before  # the step-2 model, whole
    assert not (out / STAGING_DIR).exists()
    assert latest_complete(out)[0].name == "checkpoint-4"
    monkeypatch.setattr(PreTrainedTokenizerBase, "save_pretrained", whole)
    monkeypatch.setattr(diskfull, "free_mb", lambda path: 500)
    assert main([*args, "max_steps=4", "resume_from_checkpoint=true"]) == 0
    assert (out / "adapter_model.safetensors").read_bytes() == (out / "checkpoint-4" /
                                                               "adapter_model.safetensors").read_bytes()
    assert json.loads((out / "tokenizer.json").read_text())["model"]
    assert not (out / STAGING_DIR).exists()
    assert json.loads((out / "run.json").read_text())["status"] == "completed"


def test_a_staging_folder_a_killed_save_left_is_removed_when_the_next_run_starts(tmp_path, monkeypatch):
    """A final save killed half-way leaves output_dir/.final-save.partial; the next run of that folder frees it at
    its start, before anything else can fail (here the data)."""
    import engine.data
    from engine.train.final_save import STAGING_DIR

    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    staging = out / STAGING_DIR
    staging.mkdir(parents=True)
    (staging / "adapter_model.safetensors").write_bytes(b"\0" * 4096)

    def boom(*args, **kwargs):
        from engine.data.errors import DatasetError

        raise DatasetError("data failed")

    monkeypatch.setattr(engine.data, "get_dataset", boom)
    assert main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "max_steps=1",
                 f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"]) != 0
    assert not staging.exists()


def test_resuming_from_the_last_steps_checkpoint_trains_no_step_more(tmp_path, monkeypatch):
    """transformers resumes a checkpoint saved mid-epoch at max_steps by training one step past it (and saving
    checkpoint-3); the resume a failed final save asks for must only finish the save."""
    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    args = ["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=1",
            "max_steps=2", f"dataset_dir={REPO / 'examples' / 'data'}", f"output_dir={out}"]  # 16 steps an epoch
    assert main(args) == 0
    (out / "adapter_model.safetensors").unlink()  # as if the final save had failed
    assert main([*args, "resume_from_checkpoint=true"]) == 0
    assert sorted(p.name for p in out.glob("checkpoint-*")) == ["checkpoint-1", "checkpoint-2"]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    assert (out / "adapter_model.safetensors").read_bytes() == (out / "checkpoint-2" /
                                                               "adapter_model.safetensors").read_bytes()
    assert main([*args, "resume_from_checkpoint=true", "max_steps=3"]) == 0  # a longer run trains on
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 3


def test_without_room_for_two_copies_the_earlier_final_weights_go_first(tmp_path, monkeypatch, caplog):

    from engine.train import final_save

    out = tmp_path / "out"
    out.mkdir()
    (out / "model-00001-of-00002.safetensors").write_bytes(b"x" * 1000)
    (out / "model-00002-of-00002.safetensors").write_bytes(b"x" * 1000)
    (out / "config.json").write_text("{}")
    assert final_save.make_room(out) == []  # room enough: the earlier model stays until the new one is whole
    monkeypatch.setattr(final_save.shutil, "disk_usage", lambda path: type("U", (), {"free": 1500})())
    assert final_save.make_room(out, margin=0) == ["model-00001-of-00002.safetensors",
                                                   "model-00002-of-00002.safetensors"]
    assert sorted(p.name for p in out.iterdir()) == ["config.json"]
    assert "removed the earlier weights first" in caplog.text


def test_publishing_a_final_save_replaces_files_and_an_earlier_saves_extra_shards(tmp_path):
    from engine.train.final_save import publish

    out, staging = tmp_path / "out", tmp_path / "out" / ".final-save.partial"
    (out / "processor").mkdir(parents=True)
    for name in ("model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors",
                 "model.safetensors.index.json", "config.json", "checkpoint-5.txt", "adapter_model.safetensors"):
        (out / name).write_text("old")
    (out / "processor" / "old.json").write_text("old")
    (staging / "processor").mkdir(parents=True)
    for name in ("model.safetensors", "config.json"):
        (staging / name).write_text("new")
    (staging / "processor" / "new.json").write_text("new")
    publish(staging, out)
    assert sorted(p.name for p in out.iterdir()) == ["adapter_model.safetensors", "checkpoint-5.txt", "config.json",
                                                      "model.safetensors", "processor"]
    assert (out / "model.safetensors").read_text() == "new" and (out / "config.json").read_text() == "new"
    assert (out / "adapter_model.safetensors").read_text() == "old"  # another kind of weights: not this save's
    assert [p.name for p in (out / "processor").iterdir()] == ["new.json"]


def test_remove_torn_keeps_complete_checkpoints(tmp_path):
    make_checkpoint(tmp_path, 1)
    make_checkpoint(tmp_path, 2, torn="no_state")
    assert remove_torn(tmp_path) == ["checkpoint-2"]
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint-1"]


def test_a_torn_adapter_is_refused_by_check_and_hidden_from_the_picker(tmp_path, capsys, monkeypatch):
    from app.history import checkpoints
    from engine.runs import RunFolder

    monkeypatch.chdir(REPO)
    run = RunFolder(tmp_path / "runs" / "20260101-000000-train-aaaa")
    run.create("train", "output_dir: x\n")
    make_checkpoint(run.path, 2)
    torn = make_checkpoint(run.path, 4, torn="weights")
    assert [label for label, _ in checkpoints(tmp_path / "runs")] == [f"{run.id} / checkpoint-2"]
    assert _check(tmp_path / "o", f"adapter_name_or_path={torn}", "--for", "chat") == 2
    err = capsys.readouterr().err
    assert "adapter_model.safetensors is cut off" in err and "pick an earlier checkpoint" in err


def test_a_rank_whose_peer_died_says_so_without_a_traceback(tmp_path, monkeypatch):
    """gloo's "Connection reset by peer" had reached the user as a traceback and as run.json's error."""
    from engine.errors import RankFailure

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "0")
    gloo = RuntimeError("[../third_party/gloo/gloo/transport/tcp/pair.cc:537] Read error [127.0.0.1]:64128: "
                        "Connection reset by peer")
    with pytest.raises(RankFailure) as err:
        with JobContext(tmp_path, "train"):
            raise gloo
    assert err.value.exit_code == 1 and err.value.__cause__ is gloo
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 1
    assert run["error"].startswith("Another process of this 2-process run ended unexpectedly, so rank 0 stopped")
    assert "Connection reset by peer" in run["error"] and "resume_from_checkpoint: true" in run["error"]
    with pytest.raises(RuntimeError):  # any other error stays what it is
        with JobContext(tmp_path / "other", "train"):
            raise RuntimeError("shape mismatch")


def test_a_run_stopped_because_another_rank_failed_is_recorded_as_that_failure(tmp_path, monkeypatch):
    """torchrun ends rank 0 with SIGTERM when another rank fails (while preparing data, say): run.json said
    'aborted', 'stopped by request', and the real error was only in a log. The failing rank records its error; rank 0
    reports it (failed, exit 1), also when a lost peer is what it saw; a stop on request stays a stop."""
    from engine.errors import AbortRequested, RankFailure

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ValueError):
        with JobContext(tmp_path, "train"):
            raise ValueError("absolute aspect ratio must be smaller than 200")
    assert not (tmp_path / "run.json").exists()  # rank 1 writes no run.json, only its error for rank 0
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(RankFailure) as err:
        with JobContext(tmp_path, "train"):
            raise AbortRequested()  # torchrun's SIGTERM
    assert err.value.exit_code == 1
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 1
    assert run["error"] == ("Rank 1 of this 2-process run failed, so the run stopped: ValueError: absolute aspect "
                            "ratio must be smaller than 200")
    ends = [json.loads(x) for x in (tmp_path / "events.jsonl").read_text().splitlines() if '"end"' in x]
    assert ends[-1]["status"] == "failed" and ends[-1]["error"] == run["error"]

    # a new run in the folder: rank 1's old error is gone once it starts, and a stop on request is a stop
    monkeypatch.setenv("RANK", "1")
    with JobContext(tmp_path, "train"):
        pass
    monkeypatch.setenv("RANK", "0")
    with pytest.raises(AbortRequested):
        with JobContext(tmp_path, "train"):
            raise AbortRequested()
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "aborted" and run["error"] == "stopped by request"


def test_a_live_run_folder_is_refused_by_rank_0_only(tmp_path, monkeypatch):
    """Rank 0 checks output_dir for the launch; another rank's own pre-flight check would see the run.json rank 0
    has just written for this same run (a live process that is neither it nor its launcher)."""
    import subprocess
    import sys

    from engine.runs import process_start_time
    from engine.train.output_dir import live_run_problem

    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        (tmp_path / "run.json").write_text(json.dumps({"id": "r", "status": "running", "pid": other.pid,
                                                       "pid_started": process_start_time(other.pid)}))
        monkeypatch.setenv("RANK", "0")
        assert "still going" in live_run_problem(tmp_path)
        monkeypatch.setenv("RANK", "1")
        assert live_run_problem(tmp_path) is None
    finally:
        other.kill()
        other.wait()
    monkeypatch.setenv("RANK", "0")
    assert live_run_problem(tmp_path) is None  # that process has ended: the folder is free


def _fsdp_sharded_checkpoint(folder: Path, step: int, *, whole: bool = True) -> Path:
    """A checkpoint as an FSDP run with a sharded state dict saves it: the model state in a
    torch.distributed.checkpoint folder (its .metadata written last), no model or adapter weights."""
    ckpt = folder / f"checkpoint-{step}"
    for name in ("pytorch_model_fsdp_0", "optimizer_0"):
        (ckpt / name).mkdir(parents=True)
        (ckpt / name / "__0_0.distcp").write_bytes(b"\0" * 64)
        if whole:
            (ckpt / name / ".metadata").write_bytes(b"meta")
    torch.save({"last_epoch": step}, ckpt / "scheduler.pt")
    (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": step}))
    return ckpt


def test_an_fsdp_sharded_checkpoint_is_complete_and_survives_a_full_disk(tmp_path):
    """A sharded FSDP checkpoint holds no model or adapter weights, so it read as a cut-off save: a resume skipped it
    (starting over, or from an older one) and a run ended by a full disk deleted it as torn."""
    whole = _fsdp_sharded_checkpoint(tmp_path, 20)
    assert checkpoint_problem(whole) is None
    latest, skipped = latest_complete(tmp_path)
    assert latest == whole and skipped == []
    cut = _fsdp_sharded_checkpoint(tmp_path, 30, whole=False)
    assert "pytorch_model_fsdp_0 has no .metadata" in checkpoint_problem(cut)
    assert remove_torn(tmp_path) == ["checkpoint-30"]
    assert whole.is_dir() and latest_complete(tmp_path) == (whole, [])
    (whole / "pytorch_model_fsdp_rank1.bin").write_bytes(b"cut")  # LOCAL_STATE_DICT: one torch file per process
    assert "pytorch_model_fsdp_rank1.bin is cut off" in checkpoint_problem(whole)


def test_resuming_across_fsdp_and_unsharded_is_refused_before_loading(tmp_path, monkeypatch):
    """An FSDP checkpoint resumed by a single process (a ValueError) or an unsharded one under FSDP (a
    FileNotFoundError on every rank) had failed after the model loaded, while `lf-engine check` said OK."""
    from engine.config import build_config
    from engine.errors import UserError
    from engine.train.output_dir import resolve_resume

    sharded, plain = tmp_path / "sharded", tmp_path / "plain"
    make_checkpoint(sharded, 10)
    (sharded / "checkpoint-10" / "pytorch_model_fsdp_0").mkdir()
    make_checkpoint(plain, 10)
    monkeypatch.delenv("TORCHELASTIC_RUN_ID", raising=False)

    def resume(out, world, running, **keys):
        monkeypatch.setenv("WORLD_SIZE", str(world))
        cfg = build_config({"model_name_or_path": "demo", "output_dir": str(out), "resume_from_checkpoint": True,
                            **keys})
        return resolve_resume(cfg, running=running)

    fsdp = {"fsdp": "full_shard auto_wrap"}
    with pytest.raises(UserError, match="was saved by an FSDP run"):
        resume(sharded, 1, False)  # no FSDP in the config at all
    with pytest.raises(UserError, match="single process trains unsharded"):
        resume(sharded, 1, True, **fsdp)
    assert resume(sharded, 1, False, **fsdp).endswith("checkpoint-10")  # `lf-engine check` ahead of a torchrun
    assert resume(sharded, 2, True, **fsdp).endswith("checkpoint-10")
    with pytest.raises(UserError, match="saved by a run without FSDP"):
        resume(plain, 2, True, **fsdp)
    assert resume(plain, 2, True).endswith("checkpoint-10") and resume(plain, 1, True, **fsdp)


def test_every_checkpoint_gets_its_config_when_it_is_saved(tmp_path):
    """lf_config.yaml and lf_versions.json went into checkpoints only when a run ended cleanly, so the checkpoints
    of a killed run had none (house rule: beside every checkpoint)."""
    from types import SimpleNamespace

    from engine.train.callbacks import EventsCallback

    with JobContext(tmp_path, "train", config_yaml="stage: sft\n") as ctx:
        (tmp_path / "checkpoint-3").mkdir()
        EventsCallback(ctx).on_save(SimpleNamespace(output_dir=str(tmp_path)),
                                    SimpleNamespace(global_step=3, is_world_process_zero=True), None)
    assert (tmp_path / "checkpoint-3" / "lf_config.yaml").read_text() == "stage: sft\n"
    assert "torch" in json.loads((tmp_path / "checkpoint-3" / "lf_versions.json").read_text())


def test_a_surviving_rank_records_the_outcome_when_rank_0_died(tmp_path, monkeypatch):
    """Rank 0 writes run.json; killed, it had left `running` there for good (a CLI user had no board to notice)."""
    import subprocess
    import sys

    from engine.errors import RankFailure

    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    (tmp_path / "run.json").write_text(json.dumps({"id": "r", "status": "running", "pid": gone.pid}))
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(RankFailure):
        with JobContext(tmp_path, "train"):
            raise RuntimeError("[pair.cc:537] Read error [127.0.0.1]:386: Connection reset by peer")
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == 1 and "so rank 1 stopped too" in run["error"]


@pytest.mark.parametrize("fresh", [True, False], ids=["new run", "resumed run"])
def test_run_files_that_are_links_are_replaced_not_written_through(tmp_path, fresh):
    """An output_dir from elsewhere whose events.jsonl or completions.jsonl is a link: a new run truncated the file
    it points to, and every run appended its events to it (a file outside the run folder, ~/.bashrc say)."""
    victim, samples = tmp_path / "victim.txt", tmp_path / "samples.txt"
    victim.write_text("keep me\n")
    samples.write_text("keep me too\n")
    run = tmp_path / "run"
    run.mkdir()
    (run / "events.jsonl").symlink_to(victim)
    (run / "completions.jsonl").symlink_to(samples)
    with JobContext(run, "train", config_yaml="stage: sft\n", fresh=fresh) as ctx:
        ctx.events.write({"event": "log", "step": 1, "loss": 1.0})
    assert victim.read_text() == "keep me\n" and samples.read_text() == "keep me too\n"
    assert not (run / "events.jsonl").is_symlink() and '"loss": 1.0' in (run / "events.jsonl").read_text()
    assert not (run / "completions.jsonl").exists()
