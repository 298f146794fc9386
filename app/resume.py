"""Resume a workspace run: a new run that continues from the old one's latest complete checkpoint.

The board gives every run a fresh folder, so ``resume_from_checkpoint: true`` (which looks in ``output_dir``) can
never work through it. Resuming instead starts a new run with the old run's config and
``resume_from_checkpoint: <old run>/checkpoint-N``: the Trainer restores the weights, optimizer, scheduler and step
from there and trains on to the old run's end; the old run's folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from app.jobs import JobError, JobManager
from engine.checkpoints import describe_torn, latest_complete

RESUMABLE = ("failed", "aborted")
TRUE_WORDS = ("true", "yes", "last")


def latest_checkpoint(jobs: JobManager, run_id: str) -> Path:
    """The latest complete checkpoint of a workspace run (JobError naming the problem otherwise)."""
    folder = jobs.folder(run_id)
    latest, skipped = latest_complete(folder.path)
    if latest is None:
        torn = f" (incomplete: {describe_torn(skipped)})" if skipped else ""
        raise JobError(
            f"Run `{run_id}` saved no complete checkpoint{torn}, so there is nothing to resume; start it again "
            "instead (a checkpoint is saved every `save_steps` steps)."
        )
    return latest


def resume_mapping(jobs: JobManager, run_id: str) -> tuple[dict[str, Any], Path]:
    """The config of a run that resumes ``run_id``, and the checkpoint it starts from."""
    folder = jobs.folder(run_id)
    info = folder.info()
    if info.get("kind") != "train":
        raise JobError(f"Run `{run_id}` is a {info.get('kind')} run; only training runs can be resumed.")
    if info.get("status") not in RESUMABLE:
        raise JobError(
            f"Run `{run_id}` is {info.get('status')}; only a failed or aborted run can be resumed "
            "(abort a running one first)."
        )
    try:
        mapping = yaml.safe_load(folder.config_path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError) as err:
        raise JobError(f"The config of run `{run_id}` cannot be read ({err}); it cannot be resumed.") from None
    if not isinstance(mapping, dict):
        raise JobError(f"The config of run `{run_id}` is not a `key: value` mapping; it cannot be resumed.")
    checkpoint = latest_checkpoint(jobs, run_id)
    mapping = dict(mapping)
    mapping.pop("output_dir", None)
    mapping.pop("overwrite_output_dir", None)
    mapping["resume_from_checkpoint"] = str(checkpoint)
    return mapping, checkpoint


def resolve_resume_value(jobs: JobManager, value: Any) -> str | None:
    """``resume_from_checkpoint`` of a config submitted to the board: a run id becomes that run's latest complete
    checkpoint; ``true`` is refused (a new run's folder has no checkpoint). Returns the new value, or None to keep."""
    if value is None or value is False:
        return None
    text = str(value).strip()
    if value is True or text.lower() in TRUE_WORDS:
        raise JobError(
            "The board starts every run in a new folder, so `resume_from_checkpoint: true` has nothing to resume. "
            "Set `resume_from_checkpoint: <run id>` to continue a run of this workspace (or use /resume_run, or the "
            "Resume button in History), or give a checkpoint folder."
        )
    if text and "/" not in text and "\\" not in text and len(text) <= 128 and (jobs.runs_dir / text).is_dir():
        return str(latest_checkpoint(jobs, text))
    return None
