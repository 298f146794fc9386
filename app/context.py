"""What every tab's handlers share: the workspace and the one job manager of this board process."""

from __future__ import annotations

from dataclasses import dataclass

from app.jobs import JobManager
from app.workspace import Workspace


@dataclass
class Board:
    """The board's process-wide objects.

    Attributes:
        workspace: the folder with runs, configs, datasets and exports.
        jobs: the job manager (queue, subprocesses, monitors).
        default_lang: the language pages open in (``auto`` follows the browser).
    """

    workspace: Workspace
    jobs: JobManager
    default_lang: str = "auto"
