"""The folder TensorBoard's event files go to (``report_to: tensorboard``), made the run's own before the writer starts.

transformers' ``TensorBoardCallback`` has its ``SummaryWriter`` create ``<output_dir>/runs/<Mon DD_HH-MM-SS>_<host>``
(``makedirs``, which follows a link) and open ``events.out.tfevents.<time>.<host>.<pid>.<n>`` there for writing,
following a link of that name. A link planted in a shared run folder as ``runs``, as the dated folder, or as the
event file had the run's metrics written into a folder or file elsewhere (a file of the user's truncated). Here the
same folder is prepared first: ``runs`` and the dated folder are real folders of the run (a link under either name
is removed, with a warning, and the folder made), links inside the dated folder are removed with a warning, and the
callback is told the folder. The event files' names and content are transformers' and TensorBoard's own, as before;
an evaluation-only job (whose writer started with no folder and wrote under the working directory) writes there too,
as LLaMA-Factory's did under ``output_dir``.

A folder set with ``TENSORBOARD_LOGGING_DIR`` is the user's own choice, used as it is.
"""

from __future__ import annotations

import logging
import os
import stat
from pathlib import Path
from typing import Any

from engine.errors import UserError

logger = logging.getLogger(__name__)


def own_tensorboard_folder(trainer: Any) -> Path | None:
    """Prepare the folder the trainer's TensorBoard callback writes to and point the callback at it; returns it
    (None without such a callback, in a process other than the first, or with ``TENSORBOARD_LOGGING_DIR`` set)."""
    callback = _tensorboard_callback(trainer)
    if callback is None or callback.logging_dir is not None or not trainer.is_world_process_zero():
        return None
    from transformers.integrations import integration_utils

    out = Path(trainer.args.output_dir)
    folder = out / integration_utils.default_logdir()  # runs/<date>_<host>, as transformers names it
    out.mkdir(parents=True, exist_ok=True)
    for path in (folder.parent, folder):
        _own_folder(path)
    _remove_links_in(folder)
    callback.logging_dir = str(folder)
    return folder


def _tensorboard_callback(trainer: Any) -> Any:
    try:
        from transformers.integrations import TensorBoardCallback
    except ImportError:  # pragma: no cover - transformers always has it; tensorboard itself may be missing
        return None
    return next((cb for cb in trainer.callback_handler.callbacks if isinstance(cb, TensorBoardCallback)), None)


def _own_folder(path: Path) -> None:
    """``path`` as a real folder: a link there is removed (never what it points to) and the folder made."""
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        mode = None
    if mode is not None and stat.S_ISLNK(mode):
        logger.warning("%s in the run folder was a link (to %s); the link is removed and TensorBoard writes into a "
                       "folder of the run's own there (what it pointed to is left as it was).", path,
                       os.readlink(path))
        path.unlink()
        mode = None
    if mode is not None and not stat.S_ISDIR(mode):
        raise UserError(f"{path} is a file, where TensorBoard's event files go (`report_to: tensorboard`); move it "
                        "away, or set `report_to` without tensorboard.")
    if mode is None:
        try:
            os.mkdir(path)
        except FileExistsError:  # made meanwhile (a link again is refused by the check below)
            pass
        if not stat.S_ISDIR(path.lstat().st_mode):
            raise UserError(f"{path} was replaced while the run prepared it for TensorBoard; make sure no other "
                            "process writes into the output_dir, then start the run again.")


def _remove_links_in(folder: Path) -> None:
    """Links directly inside ``folder`` (where the writer creates its event file by name) removed, with a warning."""
    for entry in os.scandir(folder):
        if entry.is_symlink():
            logger.warning("%s in TensorBoard's folder was a link (to %s); it is removed so that the event file is "
                           "written in the run folder (what it pointed to is left as it was).", entry.path,
                           os.readlink(entry.path))
            os.unlink(entry.path)
