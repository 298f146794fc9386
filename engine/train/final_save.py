"""The trained model's final save: whole, or not at all.

The weights, the tokenizer, a vision-language model's processor files and the provenance are written into a staging
folder inside ``output_dir`` first (``.final-save.partial``), then moved into ``output_dir`` one file at a time by a
rename, which needs no space. A save that fails half-way (a full disk, a killed process) therefore leaves no cut
``tokenizer.json`` or weights file where chat, evaluation or export would read them: the staging folder is removed
(freeing its space for the disk-full message) and the earlier final model, if the folder had one, stays as it was.
The run's checkpoints are untouched either way; the disk-full message says to resume from them. Where the disk
has no room for the new weights beside the earlier ones, the earlier weights are removed first (:func:`make_room`).

In a multi-process run every process takes part in ``trainer.save_model`` (sharded weights are gathered), and the
processes that save (``args.should_save``: rank 0, or each node's first with ``save_on_each_node``) write the rest
and move the files.
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.atomic_write import sync_folder, sync_tree
from engine.write_denied import saving_into

logger = logging.getLogger(__name__)

STAGING_DIR = ".final-save.partial"
"""The staging folder inside output_dir (hidden; removed when the save ends, whole or not)."""

_WEIGHT_FILE = re.compile(r"^(?P<stem>adapter_model|model|pytorch_model)(-\d+-of-\d+)?"
                          r"\.(safetensors|bin)(\.index\.json)?$")
"""Weight files and shard indexes a save writes; an earlier save's extra shards of the same kind are removed."""


def save_final(trainer: Any, out: Path, write_rest: Callable[[Path], None]) -> None:
    """Save the trained model into ``out`` through a staging folder.

    Args:
        trainer: The Trainer (``save_model`` writes the weights, collectively in a multi-process run).
        out: The output folder.
        write_rest: Writes everything else that belongs beside the weights into the folder it is given (the
            tokenizer, processor files, provenance); called only by the processes that save.
    """
    staging = out / STAGING_DIR
    saver = bool(trainer.args.should_save)
    made = None
    if saver:
        made = new_staging(out)
    try:
        if saver:
            make_room(out)
        trainer.accelerator.wait_for_everyone()  # before any process writes into it
        with saving_into(staging):  # a refusal that names no file (torch's) names the staging folder
            if sharded_fsdp_state(trainer):  # save_model writes nothing then: the whole weights, by every process
                state_dict = trainer.accelerator.get_state_dict(trainer.model)
                if saver:
                    trainer._save(str(staging), state_dict=state_dict)
            else:
                trainer.save_model(str(staging))
            if saver:
                write_rest(staging)
    except BaseException:
        if saver:
            discard_staging(staging)
        raise
    trainer.accelerator.wait_for_everyone()  # every process has written its part before the files move
    if saver:
        try:
            check_staging(staging, made)
            publish(staging, out)
        except BaseException:  # nothing moved when the files could not be synced; the rest never lands half-way
            discard_staging(staging)
            raise
    trainer.accelerator.wait_for_everyone()


def remove_entry(path: Path) -> None:
    """Remove ``path`` whatever it is: a link (never what it points to; ``shutil.rmtree`` refuses one, and with
    ``ignore_errors`` said nothing), a file, or a folder with what it holds."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if stat.S_ISDIR(mode):
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def discard_staging(staging: Path) -> None:
    """Remove the staging folder of a save that failed, as far as it can be: with what it holds, else (a folder that
    cannot be opened to list it, its permissions changed) the folder alone once it is empty. One that stays (a
    read-only mount on it: EBUSY) is named in a warning, so that an empty ``.final-save.partial`` is not left behind
    unexplained; the next save replaces it."""
    remove_entry(staging)
    if not os.path.lexists(staging):
        return
    try:
        os.rmdir(staging)
        return
    except OSError as err:
        reason = err.strerror or str(err)
    logger.warning("The unfinished final save's folder %s could not be removed (%s); remove it once it can be (a "
                   "read-only mount on it unmounted). The next save of this run replaces it.", staging, reason)


def new_staging(out: Path) -> os.stat_result:
    """Create the staging folder afresh (removing what was left under its name: an unfinished save's folder, or a
    link planted there) and return its identity, which :func:`check_staging` compares before anything is moved.

    A link planted as the staging folder (a run folder in a shared workspace) had the save written into the folder
    it pointed to, and then every file of that folder moved into ``output_dir``: the files of any folder of the
    user's (``~/.ssh``) ended up in the run folder.
    """
    staging = out / STAGING_DIR
    out.mkdir(parents=True, exist_ok=True)
    remove_entry(staging)
    try:
        os.mkdir(staging, 0o700)
    except FileExistsError:
        raise RuntimeError(f"{staging} came back while it was being replaced (something else writes into "
                           f"{out}); the final model was not saved. Make sure no other process uses this "
                           "output_dir and resume from the last checkpoint.") from None
    return staging.lstat()


def check_staging(staging: Path, made: os.stat_result | None) -> None:
    """Refuse to move anything from ``staging`` unless it is still the folder :func:`new_staging` created (not a
    link or another folder put in its place meanwhile)."""
    try:
        now = staging.lstat()
    except OSError:
        now = None
    if made is None or now is None or not stat.S_ISDIR(now.st_mode) or (now.st_dev, now.st_ino) != (
            made.st_dev, made.st_ino):
        raise RuntimeError(f"{staging} was replaced during the final save (by a link or another folder); nothing "
                           "was moved from it into the run folder. Make sure no other process writes into the "
                           "output_dir and resume from the last checkpoint.")


def sharded_fsdp_state(trainer: Any) -> bool:
    """Whether the run is FSDP with a sharded (or local) state dict: the checkpoints then hold each process's shards
    (``pytorch_model_fsdp_0``), and transformers' ``save_model`` writes no weights at all (it saves only a full state
    dict), which left ``output_dir`` with no model after a run that said it was done. The final model is whole
    weights either way, as chat, evaluation and export read them; the checkpoints stay sharded for resuming."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None) if trainer.is_fsdp_enabled else None
    return plugin is not None and "FULL_STATE_DICT" not in str(plugin.state_dict_type)


def make_room(out: Path, margin: int = 64 * 1024 * 1024) -> list[str]:
    """Remove the earlier final model's weight files when the disk lacks room for a second copy beside them.

    The staging folder is written while the earlier weights are still in ``out``. Where the free space is below their
    size (plus ``margin``), they are removed first, as an in-place save would have overwritten them: the new save
    still lands whole or not at all, and the run's checkpoints remain. Returns the names removed.
    """
    if not out.is_dir():
        return []
    earlier = [path for path in out.iterdir() if _WEIGHT_FILE.match(path.name) and path.is_file()]
    size = sum(path.stat().st_size for path in earlier)
    if not earlier or shutil.disk_usage(out).free >= size + margin:
        return []
    for path in earlier:
        path.unlink()
    names = sorted(path.name for path in earlier)
    logger.warning("Not enough free space for the new final model beside the earlier one in %s: removed the earlier "
                   "weights first (%s, %.1f MB); the run's checkpoints are kept.", out, ", ".join(names), size / 2**20)
    return names


def publish(staging: Path, out: Path) -> None:
    """Move every file and folder of ``staging`` into ``out`` (replacing what has the same name), then remove
    ``staging`` and the earlier save's weight files the new save does not have (fewer shards, another format).

    Durable as :func:`engine.atomic_write.write_atomic` is: every file of ``staging`` is flushed to the disk before
    the first rename (a failed flush raises with nothing moved), and ``out`` after the last (best effort). Without
    it a power loss soon after the save could leave an empty ``adapter_model.safetensors`` under its final name (the
    renames reached the journal before the data reached the disk), or bring the earlier files back."""
    sync_tree(staging)
    names = sorted(path.name for path in staging.iterdir())
    new_stems = {m["stem"] for m in map(_WEIGHT_FILE.match, names) if m}
    # configs first and weights last: a reader that comes between two renames finds the earlier, whole weights
    for name in sorted(names, key=lambda n: _WEIGHT_FILE.match(n) is not None):
        source, target = staging / name, out / name
        if source.is_dir() and not source.is_symlink():
            _replace_folder(source, target)
        else:
            os.replace(source, target)
    sync_folder(out)
    shutil.rmtree(staging, ignore_errors=True)
    for path in out.iterdir():
        match = _WEIGHT_FILE.match(path.name)
        if match and match["stem"] in new_stems and path.name not in names and path.is_file():
            path.unlink()
            logger.info("Removed %s, a weight file of an earlier save of this folder.", path.name)


def _replace_folder(source: Path, target: Path) -> None:
    if target.is_dir() and not target.is_symlink():
        old = target.with_name(f".{target.name}.old")
        shutil.rmtree(old, ignore_errors=True)
        os.replace(target, old)
        os.replace(source, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        if target.exists() or target.is_symlink():
            target.unlink()
        os.replace(source, target)
