"""Where transformers and PEFT write into the run folder, nothing planted there is written through.

The Trainer writes its checkpoints (``checkpoint-N/adapter_model.safetensors``, ``adapter_config.json``,
``optimizer.pt``, ``trainer_state.json``, ...) and its own files in ``output_dir`` (``trainer_state.json``,
``*_results.json``) by opening each path for writing, which follows a link. A run folder in a shared workspace (or
one copied in from elsewhere, then resumed) can hold a link under one of those names, planted by someone else: the
run then wrote its weights or state into a file anywhere the user can write (``~/.bashrc``), and a named pipe there
held the save until a reader came. The run folder is the run's own: before each such save, a link, pipe, socket or
device where the save writes is removed with a warning (what a link pointed to is left as it was), so that the save
creates a file of its own. The files' names and contents are the Trainer's and PEFT's, unchanged.

The final model is saved through a staging folder of its own (:mod:`engine.train.final_save`), renamed into place.
"""

from __future__ import annotations

import logging
import os
import shutil
import stat
from pathlib import Path
from typing import Any

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

TRAINER_FILES = ("trainer_state.json", "train_results.json", "eval_results.json", "all_results.json")
"""The files ``Trainer.save_state`` and ``Trainer.save_metrics`` write directly in ``output_dir``."""

MAX_ENTRIES = 100_000
"""A checkpoint folder holds a few dozen files (a sharded one a few hundred); a walk stops past this many."""


def _planted(mode: int) -> bool:
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def _remove(path: Path, what: str) -> None:
    target = ""
    try:
        target = f" (to {os.readlink(path)})"
    except OSError:
        pass
    logger.warning("%s in the run folder was %s%s, not a file of the run's own; it is removed so that the save writes "
                   "a file of its own there (what a link pointed to is left as it was).", path, what, target)
    path.unlink()


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a link"
    if stat.S_ISFIFO(mode):
        return "a named pipe"
    return "a socket or device"


def clear_names(folder: Path, names: tuple[str, ...] | list[str]) -> list[str]:
    """Remove whatever is planted (a link, pipe, socket or device) under ``names`` directly in ``folder``; returns
    the names removed. A regular file or a folder is left for the save to replace as it does."""
    removed = []
    for name in names:
        path = folder / name
        try:
            mode = path.lstat().st_mode
        except OSError:
            continue
        if _planted(mode):
            _remove(path, _kind(mode))
            removed.append(name)
    return removed


def clear_trainer_files(trainer: Any, out: Path) -> None:
    """Before ``Trainer.save_state`` / ``save_metrics`` (by the processes that save): :func:`clear_names` of
    :data:`TRAINER_FILES` in ``out``."""
    if trainer.args.should_save:
        clear_names(out, TRAINER_FILES)


def clear_folder(folder: Path) -> list[str]:
    """Make ``folder`` (a checkpoint's, about to be written) safe to save into: a link or other non-folder under its
    name is removed (the save creates the folder); inside a real folder, every link, pipe, socket or device at any
    depth is removed (links to folders are removed, never followed). Returns the paths removed, relative to
    ``folder``'s parent."""
    try:
        mode = folder.lstat().st_mode
    except OSError:
        return []
    if not stat.S_ISDIR(mode):
        if stat.S_ISREG(mode):  # a file where the checkpoint folder goes: the save could not create it
            logger.warning("%s in the run folder is a file where the checkpoint folder goes; it is removed.", folder)
            folder.unlink()
        else:
            _remove(folder, _kind(mode))
        return [folder.name]
    removed: list[str] = []
    pending, seen = [folder], 0
    while pending:
        current = pending.pop()
        with os.scandir(current) as entries:
            for entry in entries:
                seen += 1
                if seen > MAX_ENTRIES:  # no checkpoint of ours: replaced whole
                    logger.warning("%s holds more than %d entries, no checkpoint of this run's; it is removed.",
                                   folder, MAX_ENTRIES)
                    shutil.rmtree(folder)
                    return [folder.name]
                entry_mode = entry.stat(follow_symlinks=False).st_mode
                if stat.S_ISDIR(entry_mode):
                    pending.append(Path(entry.path))
                elif _planted(entry_mode):
                    _remove(Path(entry.path), _kind(entry_mode))
                    removed.append(str(Path(entry.path).relative_to(folder.parent)))
    return removed


class SaveTargetsCallback(TrainerCallback):
    """Before the Trainer saves a checkpoint (its schedule, or the stop an abort asks for), the checkpoint's folder
    is cleared of what was planted there (:func:`clear_folder`), by the processes that save. Added after every
    callback that may ask for a save, so that their decision is seen."""

    def _before_save(self, args: Any, state: Any, control: Any) -> None:
        if control.should_save and args.should_save:
            clear_folder(Path(args.output_dir) / f"checkpoint-{state.global_step}")

    def on_step_end(self, args, state, control, **kwargs):
        self._before_save(args, state, control)

    def on_epoch_end(self, args, state, control, **kwargs):
        self._before_save(args, state, control)

    def on_evaluate(self, args, state, control, **kwargs):
        # `save_strategy: best` decides to save after the evaluation, past every callback: cleared in case it does
        if str(getattr(args.save_strategy, "value", args.save_strategy)) == "best" and args.should_save:
            clear_folder(Path(args.output_dir) / f"checkpoint-{state.global_step}")


def name_checkpoint_saves(trainer: Any) -> None:
    """A checkpoint save refused with no file named (torch's ``open file failed`` for optimizer.pt) names its
    ``checkpoint-N`` folder in the message (engine.write_denied.saving_into), not only the run folder."""
    from engine.write_denied import saving_into

    save = trainer._save_checkpoint

    def saving(model: Any, trial: Any, *args: Any, **kwargs: Any) -> Any:
        run_dir = trainer._get_output_dir(trial=trial) if hasattr(trainer, "_get_output_dir") else trainer.args.output_dir
        with saving_into(Path(run_dir) / f"checkpoint-{trainer.state.global_step}"):  # transformers' name for it
            return save(model, trial, *args, **kwargs)

    trainer._save_checkpoint = saving
