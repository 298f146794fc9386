"""What every tab's handlers share: the workspace and the one job manager of this board process."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app.jobs import JobManager
from app.workspace import Workspace


@dataclass
class Board:
    """The board's process-wide objects.

    Attributes:
        workspace: the folder with runs, configs, datasets and exports.
        jobs: the job manager (queue, subprocesses, monitors).
        default_lang: the language pages open in (``auto`` follows the browser).
        max_upload_mb: the largest upload accepted (MB).
        extra_roots: folders besides the workspace that API configs may write to (``--allowed-root``).
        scorers: the "try it" scoring processes running now, by browser session (so that Stop can end them).
    """

    workspace: Workspace
    jobs: JobManager
    default_lang: str = "auto"
    max_upload_mb: int = 512
    extra_roots: list[str] = field(default_factory=list)
    scorers: dict[str, Any] = field(default_factory=dict)

    @property
    def allowed_roots(self) -> list[Path]:
        """The workspace plus the owner's ``--allowed-root`` folders (or ``$LF_BOARD_ALLOWED_ROOTS``)."""
        from app.security import allowed_roots

        return allowed_roots(self.workspace.root, self.extra_roots)
