"""Links planted in a run folder (a shared workspace) are never written through by the Trainer's and PEFT's saves,
and a planted staging folder never moves a folder of the user's into the run folder."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.cli import main
from engine.train.final_save import STAGING_DIR, save_final
from engine.train.save_targets import SaveTargetsCallback, clear_folder, clear_names

REPO = Path(__file__).resolve().parents[2]


def _victims(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    victim = tmp_path / "home"
    victim.mkdir()
    files = {"id_rsa": "private key", "bashrc": "alias ls=ls", "notes.json": "{\"mine\": 1}"}
    for name, text in files.items():
        (victim / name).write_text(text, encoding="utf-8")
    return victim, files


def _fake_trainer(save_model):
    accelerator = SimpleNamespace(wait_for_everyone=lambda: None)
    return SimpleNamespace(args=SimpleNamespace(should_save=True), accelerator=accelerator, is_fsdp_enabled=False,
                           save_model=save_model)


def _save_adapter(folder: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    with open(Path(folder) / "adapter_model.safetensors", "w", encoding="utf-8") as fh:  # as safetensors opens it
        fh.write("weights")


def test_a_link_planted_as_the_staging_folder_moves_nothing_of_the_users_into_the_run(tmp_path, caplog):
    """`.final-save.partial` -> ~/.ssh: the old code's rmtree refused the link without a word, the save wrote into
    ~/.ssh and every file there was then moved into output_dir (the user's key in a shared run folder)."""
    victim, files = _victims(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / STAGING_DIR).symlink_to(victim, target_is_directory=True)
    save_final(_fake_trainer(_save_adapter), out, lambda folder: (folder / "lf_config.yaml").write_text("x"))
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files
    assert sorted(p.name for p in out.iterdir()) == ["adapter_model.safetensors", "lf_config.yaml"]
    assert not (out / "adapter_model.safetensors").is_symlink()


def test_a_staging_folder_swapped_for_a_link_during_the_save_is_refused_and_nothing_moves(tmp_path):
    victim, files = _victims(tmp_path)
    out = tmp_path / "run"
    out.mkdir()

    def save_then_swap(folder: str) -> None:
        _save_adapter(folder)
        os.rename(folder, tmp_path / "moved-away")
        os.symlink(victim, folder)

    with pytest.raises(RuntimeError, match="was replaced during the final save"):
        save_final(_fake_trainer(save_then_swap), out, lambda folder: None)
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files
    assert list(out.iterdir()) == []  # the link is gone, nothing of the victim's came in


def test_the_stale_staging_cleanup_removes_a_planted_link_not_its_target(tmp_path):
    from engine.config import build_config
    from engine.train.output_dir import clear_stale_staging

    victim, files = _victims(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    (out / STAGING_DIR).symlink_to(victim, target_is_directory=True)
    assert clear_stale_staging(build_config({"output_dir": str(out)})) is True
    assert not os.path.lexists(out / STAGING_DIR)
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files


def test_clear_folder_removes_links_pipes_at_any_depth_and_keeps_files(tmp_path, caplog):
    victim, files = _victims(tmp_path)
    ckpt = tmp_path / "checkpoint-3"
    (ckpt / "global_step3").mkdir(parents=True)
    (ckpt / "adapter_model.safetensors").symlink_to(victim / "bashrc")
    (ckpt / "global_step3" / "optim_states.pt").symlink_to(victim / "id_rsa")
    (ckpt / "sub").symlink_to(victim, target_is_directory=True)
    os.mkfifo(ckpt / "trainer_state.json")
    (ckpt / "README.md").write_text("kept", encoding="utf-8")
    with caplog.at_level(logging.WARNING):
        removed = clear_folder(ckpt)
    assert sorted(removed) == ["checkpoint-3/adapter_model.safetensors", "checkpoint-3/global_step3/optim_states.pt",
                               "checkpoint-3/sub", "checkpoint-3/trainer_state.json"]
    assert sorted(p.name for p in ckpt.rglob("*")) == ["README.md", "global_step3"]
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files
    assert "a named pipe" in caplog.text and "a link (to " in caplog.text

    linked = tmp_path / "checkpoint-4"
    linked.symlink_to(victim, target_is_directory=True)
    assert clear_folder(linked) == ["checkpoint-4"] and not os.path.lexists(linked) and victim.is_dir()
    assert clear_folder(tmp_path / "checkpoint-5") == []


def test_clear_names_removes_only_what_is_planted(tmp_path):
    victim, files = _victims(tmp_path)
    (tmp_path / "trainer_state.json").symlink_to(victim / "notes.json")
    (tmp_path / "train_results.json").write_text("{}", encoding="utf-8")
    assert clear_names(tmp_path, ["trainer_state.json", "train_results.json", "all_results.json"]) == [
        "trainer_state.json"]
    assert (tmp_path / "train_results.json").is_file()


@pytest.mark.parametrize("should_save", [True, False])
def test_the_callback_clears_the_checkpoint_folder_only_before_a_save(tmp_path, should_save):
    victim, _ = _victims(tmp_path)
    (tmp_path / "checkpoint-7").symlink_to(victim, target_is_directory=True)
    args = SimpleNamespace(should_save=True, output_dir=str(tmp_path), save_strategy="steps")
    SaveTargetsCallback().on_step_end(args, SimpleNamespace(global_step=7), SimpleNamespace(should_save=should_save))
    assert os.path.lexists(tmp_path / "checkpoint-7") is not should_save


def test_a_training_run_writes_no_checkpoint_state_or_final_save_through_planted_links(tmp_path, monkeypatch):
    """Links planted in output_dir once the run has started (a second user of a shared workspace): the checkpoint
    folders, a checkpoint's weights, trainer_state.json, all_results.json and the staging folder. Each is replaced
    by a file of the run's own; every file the links pointed to is left as it was."""
    from engine.checkpoints import checkpoint_problem
    from engine.train import callbacks

    victim, files = _victims(tmp_path)
    out = tmp_path / "run"
    begin = callbacks.AbortCallback.on_train_begin

    def plant(self, args, state, control, **kwargs):
        folder = Path(args.output_dir)
        (folder / "checkpoint-1").symlink_to(victim, target_is_directory=True)
        (folder / "checkpoint-2").mkdir()
        (folder / "checkpoint-2" / "adapter_model.safetensors").symlink_to(victim / "bashrc")
        (folder / "checkpoint-2" / "trainer_state.json").symlink_to(victim / "notes.json")
        (folder / "trainer_state.json").symlink_to(victim / "notes.json")
        (folder / "all_results.json").symlink_to(victim / "notes.json")
        (folder / STAGING_DIR).symlink_to(victim, target_is_directory=True)
        return begin(self, args, state, control, **kwargs)

    monkeypatch.setattr(callbacks.AbortCallback, "on_train_begin", plant)
    monkeypatch.chdir(REPO)
    assert main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), "save_strategy=steps", "save_steps=1",
                 "max_steps=2", "max_samples=8", f"dataset_dir={REPO / 'examples' / 'data'}",
                 f"output_dir={out}"]) == 0
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files
    for ckpt in ("checkpoint-1", "checkpoint-2"):
        assert not (out / ckpt).is_symlink() and checkpoint_problem(out / ckpt) is None
    links = [str(p) for p in out.rglob("*") if p.is_symlink()]
    assert links == []
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    assert "id_rsa" not in {p.name for p in out.iterdir()}


def test_replacing_a_run_removes_a_checkpoint_link_not_what_it_points_to(tmp_path):
    """overwrite_output_dir: rmtree(ignore_errors) refused a link planted as checkpoint-N without a word, so it
    stayed among the new run's checkpoints (counted by save_total_limit, offered to a later resume)."""
    from engine.config import build_config
    from engine.train.output_dir import clear_replaced_run

    victim, files = _victims(tmp_path)
    out = tmp_path / "run"
    (out / "checkpoint-1").mkdir(parents=True)
    (out / "checkpoint-2").symlink_to(victim, target_is_directory=True)
    cfg = build_config({"output_dir": str(out), "overwrite_output_dir": True, "do_train": True})
    assert clear_replaced_run(cfg) == ["checkpoint-1", "checkpoint-2"]
    assert list(out.iterdir()) == []
    assert {p.name: p.read_text(encoding="utf-8") for p in victim.iterdir()} == files
