"""Where a run writes: refusing to mix a new run into an old one's outputs, and which checkpoint a resume starts from.

Kept apart from :mod:`engine.train.workflow` (which imports the trainers, and with them torch, transformers and
PEFT) so that the pre-flight checks can run in a process that must stay light: the board checks every config before
a job starts without loading the ML stack.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from engine.checkpoints import (
    FSDP_STATE,
    checkpoint_problem,
    describe_torn,
    latest_complete,
    list_checkpoints,
    step_of,
)
from engine.config import RunConfig
from engine.errors import UserError
from engine.train.resume_fit import check_fits
from engine.wording import with_article

logger = logging.getLogger(__name__)

OUTPUT_MARKERS = ("adapter_config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def live_run_problem(folder: str | Path) -> str | None:
    """Why nothing may start writing into ``folder``: a run recorded there (run.json) is still alive, whatever
    ``overwrite_output_dir`` or ``resume_from_checkpoint`` say. This process, and the launcher that started it
    (torchrun, the Ray driver), are the run itself, not another one."""
    from engine.runs import RunFolder, same_process

    if os.environ.get("RANK", "0") != "0":  # rank 0 checks for the launch; the others would see rank 0's own run
        return None
    folder = Path(folder)
    try:
        info = RunFolder(folder).info() if (folder / "run.json").is_file() else {}
    except Exception:  # an unreadable run.json: the run folder's own reader reports it where it matters
        return None
    if info.get("status") not in ("queued", "running") or not same_process(info):
        return None
    ours = {os.getpid(), os.getppid(), int(os.environ.get("LF_LAUNCHER_PID", "0") or 0)}
    if int(info["pid"]) in ours:
        return None
    return (f"`{folder}` is the output folder of a run that is still going (`{info.get('id', folder.name)}`, process "
            f"{info['pid']}); a second run there would mix its files into that run's. Wait for it to end or stop it "
            "(the board's Abort, or SIGTERM to that process), or choose another output_dir.")


def _family(kind: str) -> str:
    return "eval" if kind in ("eval", "predict") else kind


def recorded_kind(folder: str | Path) -> tuple[str, str] | None:
    """(kind, status) of the job recorded in ``folder/run.json`` once it has started (a queued record, which the
    board writes before it starts the job that fills it, and an unreadable one give None)."""
    from engine.runs import RunFolder

    folder = Path(folder)
    try:
        info = RunFolder(folder).info() if (folder / "run.json").is_file() else {}
    except Exception:  # an unreadable run.json: the run folder's own reader reports it where it matters
        return None
    kind, status = info.get("kind"), info.get("status")
    if not isinstance(kind, str) or not kind or status in (None, "queued"):
        return None
    return kind, str(status)


def other_job_problem(folder: str | Path, kind: str) -> str | None:
    """Why a ``kind`` job may not record itself in ``folder``: it holds another kind of job (an evaluation pointed
    at the training run it evaluates), whose run.json and config.yaml it would replace and whose events it would
    join, so that the board shows it as that job and `lf-engine train config.yaml` no longer reproduces the run."""
    recorded = recorded_kind(folder)
    if recorded is None or _family(recorded[0]) == _family(kind):
        return None
    other, status = recorded
    return (f"`output_dir: {folder}` holds {with_article(other)} run ({status}): this {kind} job would replace its run.json and "
            f"config.yaml and join its events.jsonl. Set `output_dir` to a folder of its own, e.g. "
            f"`{Path(folder) / kind}`.")


def trained_outputs(folder: str | Path) -> list[str]:
    """The names of a trained run's outputs in ``folder`` (checkpoint-N folders, final weights), sorted."""
    out = Path(folder)
    if not out.is_dir():
        return []
    return sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-") or p.name in OUTPUT_MARKERS)


def check_output_dir(cfg: RunConfig) -> None:
    """Refuse to silently mix a new run into an old one's outputs."""
    out = Path(cfg.train.output_dir)
    live = live_run_problem(out)
    if live:
        raise UserError(live)
    if not out.is_dir() or cfg.train.overwrite_output_dir or cfg.train.resume_from_checkpoint:
        return
    old = trained_outputs(out)
    if old and cfg.train.do_train:
        raise UserError(
            f"output_dir `{out}` already holds a trained run ({', '.join(old[:3])}). Choose a new output_dir, "
            "set `resume_from_checkpoint: true` to continue it, or `overwrite_output_dir: true` to replace it."
        )


def resumes(cfg: RunConfig) -> bool:
    value = cfg.train.resume_from_checkpoint
    return value is not None and str(value).lower() not in ("false", "no", "")


def clear_replaced_run(cfg: RunConfig) -> list[str]:
    """With ``overwrite_output_dir: true`` a new (not resumed) run replaces the one in output_dir: its checkpoint-N
    folders go, so that a later ``resume_from_checkpoint: true`` continues this run, not the replaced one, and
    ``save_total_limit`` counts only this run's. Returns the names removed (rank 0 only removes)."""
    out = Path(cfg.train.output_dir)
    if not (cfg.train.do_train and cfg.train.overwrite_output_dir and out.is_dir()) or resumes(cfg):
        return []
    if os.environ.get("RANK", "0") != "0":
        return []
    from engine.train.final_save import remove_entry

    removed = []
    for folder in list_checkpoints(out):
        remove_entry(folder)  # a link planted as checkpoint-N goes too (rmtree refused it without a word), not its target
        removed.append(folder.name)
    if removed:
        logger.info("overwrite_output_dir: replacing the earlier run in %s (removed %s).", out, ", ".join(removed))
    return removed


def clear_stale_staging(cfg: RunConfig) -> bool:
    """Remove a final save's staging folder that an earlier run of this output_dir left (killed during its final
    save, see :mod:`engine.train.final_save`): no live run writes there (:func:`check_output_dir` came first), so it
    only holds disk space. Whether one was removed (rank 0 only removes)."""
    from engine.train.final_save import STAGING_DIR, remove_entry

    staging = Path(cfg.train.output_dir) / STAGING_DIR
    if os.environ.get("RANK", "0") != "0" or not os.path.lexists(staging):
        return False
    remove_entry(staging)  # a link planted under its name is removed, never followed
    logger.info("Removed %s, left by a final save that did not finish.", staging)
    return not os.path.lexists(staging)


_NOTED: set[str] = set()


def resolve_resume(cfg: RunConfig, running: bool = False) -> str | bool | None:
    """The checkpoint to resume from: the latest *complete* one for ``true`` (torn ones are named and skipped)."""
    if not resumes(cfg):
        return None
    value = cfg.train.resume_from_checkpoint
    out = Path(cfg.train.output_dir)
    if str(value).lower() in ("true", "yes", "last"):
        latest, skipped = latest_complete(out)
        if latest is None and skipped:
            raise UserError(f"`resume_from_checkpoint: true` but no checkpoint in `{out}` is complete "
                            f"({describe_torn(skipped)}); remove `resume_from_checkpoint` to start over, or delete "
                            "the incomplete folders.")
        if latest is None:
            raise UserError(f"`resume_from_checkpoint: true` but `{out}` holds no checkpoint-* folder yet; remove "
                            "`resume_from_checkpoint` to start a new run, or set `output_dir` to the run to continue.")
        note = f"Skipping the incomplete {describe_torn(skipped)}; resuming from {latest.name}."
        if skipped and note not in _NOTED:
            _NOTED.add(note)  # the pre-flight check and the run itself both resolve it: say it once
            logger.warning(note)
        _check_sharding_matches(cfg, latest, running)
        check_fits(cfg, latest)
        return str(latest)
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(f"`resume_from_checkpoint: {value}` does not exist; give a checkpoint folder or `true`.")
    if not (folder / "trainer_state.json").is_file() and step_of(folder) is None:
        inside, _ = latest_complete(folder)
        hint = f" Did you mean `{inside}`?" if inside else ""
        raise UserError(f"`resume_from_checkpoint: {value}` is not a checkpoint (it has no trainer_state.json); give "
                        f"a checkpoint-N folder saved by a run, or `true` for the latest one in output_dir.{hint}")
    problem = checkpoint_problem(folder)
    if problem:
        latest, _ = latest_complete(folder.parent)
        hint = f" The latest complete one is `{latest}`." if latest else ""
        raise UserError(f"`resume_from_checkpoint: {value}` is incomplete ({problem}); it cannot be resumed from.{hint}")
    _check_sharding_matches(cfg, folder, running)
    check_fits(cfg, folder)
    return str(folder)




def _check_sharding_matches(cfg: RunConfig, checkpoint: Path, running: bool) -> None:
    """An FSDP checkpoint resumes only under FSDP, and a checkpoint of an unsharded run only without it: transformers
    fails either way after the model has loaded (a ValueError, or a FileNotFoundError on every rank). ``running``:
    this process is the run (its process count is the launch's), not `lf-engine check` ahead of a torchrun."""
    saved_sharded = any(p.name.startswith(FSDP_STATE) for p in checkpoint.iterdir())
    tr = cfg.train
    wants = bool(tr.fsdp or tr.fsdp_config)
    processes = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if saved_sharded and not wants:
        raise UserError(f"`{checkpoint}` was saved by an FSDP run (its {FSDP_STATE} state); resume it the same way: "
                        "with the run's `fsdp`/`fsdp_config` under torchrun with as many processes.")
    if saved_sharded and processes == 1 and (running or "TORCHELASTIC_RUN_ID" in os.environ):
        raise UserError(f"`{checkpoint}` was saved by an FSDP run; a single process trains unsharded and cannot "
                        "read it. Launch with torchrun and as many processes as the run had.")
    if not saved_sharded and wants and processes > 1:
        raise UserError(f"`{checkpoint}` was saved by a run without FSDP; this launch shards the model (FSDP) and "
                        "cannot read it. Resume it as it was trained (without `fsdp`/`fsdp_config`), or start anew.")


def describe_resume(cfg: RunConfig) -> str | None:
    """One line for `lf-engine check`: which checkpoint a resume starts from and which torn ones it skips."""
    try:
        resume = resolve_resume(cfg) if cfg.train.do_train else None
    except UserError:
        return None  # reported as a problem by the pre-flight check
    if not resume:
        return None
    line = f"Resumes from {resume}"
    if str(cfg.train.resume_from_checkpoint).lower() in ("true", "yes", "last"):
        _, skipped = latest_complete(cfg.train.output_dir)
        if skipped:
            line += f", skipping the incomplete {describe_torn(skipped)}"
    return line + "."


def no_step_past_the_end(trainer: Any) -> None:
    """Resuming from a checkpoint saved at the run's last step trains nothing more.

    transformers 5.25 resumes such a checkpoint (saved mid-epoch) by running one more optimizer step, past
    ``max_steps``, and saving another checkpoint; a run whose final save failed (a full disk) and is resumed to
    finish it would then train again. With this guard the epoch loop is skipped once ``state.global_step`` has reached
    ``state.max_steps`` (the resumed run's own, so a larger ``max_steps`` or more epochs still train on).
    """
    run_epoch = trainer._run_epoch

    def guarded(*args: Any, **kwargs: Any) -> Any:
        state = trainer.state
        if state.max_steps > 0 and state.global_step >= state.max_steps:
            trainer.control.should_training_stop = True
            logger.info("The checkpoint holds all %d steps of this run; nothing more to train.", state.max_steps)
            return None
        return run_epoch(*args, **kwargs)

    trainer._run_epoch = guarded
