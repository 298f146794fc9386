"""Resume a workspace run: a new run that continues from the old one's latest complete checkpoint.

The board gives every run a fresh folder, so ``resume_from_checkpoint: true`` (which looks in ``output_dir``) can
never work through it. Resuming instead starts a new run with the old run's config and
``resume_from_checkpoint: <old run>/checkpoint-N``: the Trainer restores the weights, optimizer, scheduler and step
from there and trains on to the old run's end; the old run's folder is left as it was.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from app.history import RunConfigError, RunConfigNotMapping, load_run_config
from app.jobs import JobError, JobManager
from engine.checkpoints import describe_torn, latest_complete

RESUMABLE = ("failed", "aborted")
TRUE_WORDS = ("true", "yes", "last")


def latest_checkpoint(jobs: JobManager, run_id: str) -> Path:
    """The latest complete checkpoint of a workspace run (JobError naming the problem otherwise)."""
    folder = jobs.folder(run_id)
    latest, skipped = latest_complete(folder.path)
    if latest is None:
        if skipped:
            raise JobError("job_resume_torn", run=run_id, torn=describe_torn(skipped))
        raise JobError("job_resume_no_checkpoint", run=run_id)
    return latest


def resume_mapping(jobs: JobManager, run_id: str) -> tuple[dict[str, Any], Path]:
    """The config of a run that resumes ``run_id``, and the checkpoint it starts from."""
    folder = jobs.folder(run_id)
    info = folder.info()
    if info.get("kind") != "train":
        raise JobError("job_resume_not_train", run=run_id, kind=info.get("kind"))
    if info.get("status") not in RESUMABLE:
        raise JobError("job_resume_not_resumable", run=run_id, status=info.get("status"))
    try:
        mapping = load_run_config(folder.config_path)
    except RunConfigNotMapping:
        raise JobError("job_resume_config_not_mapping", run=run_id) from None
    except RunConfigError as err:  # not UTF-8, not YAML, an alias bomb, ...
        raise JobError("job_resume_config_unreadable", run=run_id, reason=err) from None
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
        raise JobError("job_resume_true")
    if text and "/" not in text and "\\" not in text and len(text) <= 128 and (jobs.runs_dir / text).is_dir():
        return str(latest_checkpoint(jobs, text))
    return None


def form_resume(jobs: JobManager, mapping: dict[str, Any], lang: str | None) -> tuple[dict[str, Any], dict[str, Any],
                                                                                       str | None]:
    """The Train form's ``resume_from_checkpoint`` read as the API reads it (:func:`resolve_resume_value`): a run id
    becomes that run's latest complete checkpoint (the mapping, and the run's meta saying so), ``true`` is refused.
    Returns (mapping, meta, refusal in ``lang`` or None)."""
    value = mapping.get("resume_from_checkpoint")
    try:
        resumed = resolve_resume_value(jobs, value)
    except JobError as err:
        return mapping, {}, err.text(lang)
    if not resumed:
        return mapping, {}, None
    meta = {"resumed_from": str(value).strip(), "resumed_checkpoint": resumed}
    return {**mapping, "resume_from_checkpoint": resumed}, meta, None
