"""Resuming from a checkpoint that another setup saved (other model, method, LoRA rank, stage) is a user error that
names the setting, never a traceback from deep inside transformers' checkpoint load."""

import json
import logging
import shutil
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from engine.checkpoints import checkpoint_problem
from engine.cli import EXIT_USER_ERROR, main
from engine.config import build_config
from engine.errors import UserError
from engine.train.resume_fit import guard_loads

REPO = Path(__file__).resolve().parents[2]
SFT = ["max_steps=1", "save_steps=1", "logging_steps=1", "max_samples=8", "per_device_train_batch_size=4",
       "lora_rank=8", "plot_loss=false", f"dataset_dir={REPO / 'examples' / 'data'}", "dataset=demo_identity"]


def _train(out: Path, *extra: str) -> int:
    return main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={out}", *SFT, *extra])


@pytest.fixture(scope="module")
def lora_checkpoint(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lora") / "run"
    assert _train(out) == 0
    return out / "checkpoint-1"


def _refused(capsys, code: int, *words: str) -> str:
    err = capsys.readouterr().err
    assert code == EXIT_USER_ERROR, err
    assert "Traceback" not in err
    for word in words:
        assert word in err, err
    return err


def test_another_lora_rank_is_refused_before_the_model_loads(lora_checkpoint, tmp_path, capsys):
    code = _train(tmp_path / "r4", "lora_rank=4", f"resume_from_checkpoint={lora_checkpoint}")
    _refused(capsys, code, "LoRA adapter of rank 8", "`lora_rank: 4`", "Set `lora_rank: 8`")
    assert not (tmp_path / "r4" / "adapter_model.safetensors").exists()


def test_a_lora_checkpoint_resumed_by_a_full_run_is_refused(lora_checkpoint, tmp_path, capsys):
    code = main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={tmp_path / 'full'}", *SFT,
                 "finetuning_type=full", f"resume_from_checkpoint={lora_checkpoint}"])
    _refused(capsys, code, "holds an adapter", "`finetuning_type: lora` run", "`finetuning_type: full`")


def test_a_full_checkpoint_resumed_by_a_lora_run_is_refused(lora_checkpoint, tmp_path, capsys):
    full = tmp_path / "checkpoint-3"
    shutil.copytree(lora_checkpoint, full)
    for name in ("adapter_model.safetensors", "adapter_config.json"):
        (full / name).unlink()
    save_file({"w": torch.zeros(4, 4)}, str(full / "model.safetensors"))
    state = json.loads((full / "trainer_state.json").read_text())
    (full / "trainer_state.json").write_text(json.dumps({**state, "global_step": 3}))  # the step its name says
    saved = (full / "lf_config.yaml").read_text().replace("finetuning_type: lora", "finetuning_type: full")
    (full / "lf_config.yaml").write_text(saved)
    code = main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={tmp_path / 'lora'}", *SFT,
                 f"resume_from_checkpoint={full}"])
    _refused(capsys, code, "holds full model weights", "`finetuning_type: full` run", "`lora` adapter")


def test_a_checkpoint_of_another_model_names_the_model(lora_checkpoint, tmp_path, capsys):
    """demo-vlm's LoRA has other module names: PEFT loads none of the weights and the optimizer state no longer
    fits; the error says which model the checkpoint was trained on."""
    out = tmp_path / "vlm"
    code = _train(out, "model_name_or_path=demo-vlm", "template=qwen2_vl", "max_steps=2",
                  f"resume_from_checkpoint={lora_checkpoint}")
    _refused(capsys, code, "does not fit this run", "`model_name_or_path: demo` (this run: `demo-vlm`)",
             "Resume it with the model and method it was trained with")
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == EXIT_USER_ERROR and "does not fit" in run["error"]


def test_another_stage_is_named_once(lora_checkpoint, tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="engine")
    cfg = build_config({"model_name_or_path": "demo", "stage": "dpo", "output_dir": str(tmp_path / "dpo"),
                        "resume_from_checkpoint": str(lora_checkpoint), "lora_rank": 8})
    from engine.train.output_dir import resolve_resume

    assert resolve_resume(cfg) == str(lora_checkpoint) and resolve_resume(cfg) == str(lora_checkpoint)
    notes = [r.getMessage() for r in caplog.records if "`stage: sft` run and this run is `stage: dpo`" in r.getMessage()]
    assert len(notes) == 1


def test_a_failing_load_without_saved_settings_is_a_user_error(tmp_path):
    class Trainer:
        def _load_from_checkpoint(self, path, model=None):
            raise RuntimeError("Error(s) in loading state_dict:\n\tsize mismatch for x")

        def _load_optimizer_and_scheduler(self, path):
            raise torch.OutOfMemoryError("out of memory")

    trainer = Trainer()
    cfg = build_config({"model_name_or_path": "demo", "output_dir": str(tmp_path / "out")})
    guard_loads(trainer, cfg, str(tmp_path))
    with pytest.raises(UserError, match="does not fit this run: Error\\(s\\) in loading state_dict.*no lf_config.yaml"):
        trainer._load_from_checkpoint(str(tmp_path))
    with pytest.raises(torch.OutOfMemoryError):  # not the checkpoint's fault
        trainer._load_optimizer_and_scheduler(str(tmp_path))


def test_a_trainer_state_that_is_not_an_object_is_named(lora_checkpoint, tmp_path):
    ckpt = tmp_path / "checkpoint-1"
    shutil.copytree(lora_checkpoint, ckpt)
    (ckpt / "trainer_state.json").write_text("[]")
    assert checkpoint_problem(ckpt) == "trainer_state.json is not a JSON object"


def test_a_checkpoint_without_optimizer_or_scheduler_state_is_named(lora_checkpoint, tmp_path, caplog):
    """transformers resumes such a checkpoint without a word, with fresh Adam moments and the learning-rate
    schedule from its first step (warmup again, an lr of 0 at a linear warmup's start) while the step goes on."""
    ckpt = tmp_path / "checkpoint-1"
    shutil.copytree(lora_checkpoint, ckpt)
    (ckpt / "scheduler.pt").unlink()
    caplog.set_level(logging.WARNING, logger="engine")
    cfg = build_config({"model_name_or_path": "demo", "output_dir": str(tmp_path / "out"), "lora_rank": 8,
                        "resume_from_checkpoint": str(ckpt)})
    from engine.train.output_dir import resolve_resume

    assert resolve_resume(cfg) == str(ckpt) and resolve_resume(cfg) == str(ckpt)
    notes = [r.getMessage() for r in caplog.records if "has no scheduler.pt" in r.getMessage()]
    assert len(notes) == 1 and "optimizer.pt" not in notes[0] and "start anew" in notes[0], notes
    caplog.clear()
    assert resolve_resume(build_config({"model_name_or_path": "demo", "output_dir": str(tmp_path / "o2"),
                                        "lora_rank": 8, "resume_from_checkpoint": str(lora_checkpoint)}))
    assert not [r for r in caplog.records if "start anew" in r.getMessage()]


class _RunsCode:
    """A pickle that would create a file if it were loaded without torch's weights_only guard."""

    def __init__(self, flag: Path):
        self.flag = flag

    def __reduce__(self):
        return (Path.touch, (self.flag,))


@pytest.mark.parametrize("name", ["optimizer.pt", "rng_state.pth"])
def test_a_state_file_that_carries_code_is_refused_not_loaded(lora_checkpoint, tmp_path, capsys, name):
    """transformers loads checkpoint state with weights_only=True, which refuses such a pickle with an
    UnpicklingError whose text says to load it again with weights_only=False (running its code): a traceback with
    that advice ended the run. The run now ends as a user error that names the danger; the code never runs."""
    ckpt = tmp_path / "checkpoint-1"
    shutil.copytree(lora_checkpoint, ckpt)
    flag = tmp_path / "ran"
    torch.save({"state": _RunsCode(flag), "param_groups": []}, ckpt / name)
    code = _train(tmp_path / "out", "max_steps=2", f"resume_from_checkpoint={ckpt}")
    err = _refused(capsys, code, "that is more than tensors: loading it would run code it carries",
                   "Resume from a checkpoint your own run saved")
    assert "weights_only=False" not in err and not flag.exists()


def test_an_adapter_bin_that_carries_code_is_refused_not_loaded(lora_checkpoint, tmp_path, capsys):
    """The same guard where an adapter loads (export here; chat, eval and training from an adapter take the same
    path): PEFT's weights_only load stopped with that UnpicklingError and its advice."""
    adapter = tmp_path / "adapter"
    shutil.copytree(lora_checkpoint, adapter)
    (adapter / "adapter_model.safetensors").unlink()
    flag = tmp_path / "ran"
    torch.save({"w": _RunsCode(flag)}, adapter / "adapter_model.bin")
    code = main(["export", str(REPO / "examples" / "sft_lora_demo.yaml"), "lora_rank=8",
                 f"adapter_name_or_path={adapter}", f"export_dir={tmp_path / 'merged'}"])
    err = _refused(capsys, code, f"Adapter `{adapter}` holds an adapter_model.bin that is more than tensors",
                   "Use an adapter your own run saved")
    assert "weights_only=False" not in err and not flag.exists()
