"""Checks of the command line's own arguments that ``engine.cli`` makes before anything slow loads (a model, a
build), so a wrong argument is said at once rather than after the wait."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from engine.errors import UserError

LEAD_KEY = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)(?:`|:)")


def lead_key(problem: str) -> str | None:
    """The key a problem begins by naming (```key` ...`` or ```key: value` ...``), else None."""
    found = LEAD_KEY.match(problem)
    return found.group(1) if found else None


MAX_TRIAL_SAMPLES = 64


def check_rewards_args(args: argparse.Namespace) -> None:
    if args.samples is not None and args.samples < 1:
        raise UserError(f"--samples {args.samples}: give at least 1 completion per prompt.")
    if args.samples is not None and args.samples > MAX_TRIAL_SAMPLES:
        raise UserError(f"--samples {args.samples}: give at most {MAX_TRIAL_SAMPLES} completions per prompt (they are "
                        "sampled as one batch, which must fit in memory).")
    if args.prompts < 1:  # (was taken as 1 without a word)
        raise UserError(f"--prompts {args.prompts}: give at least 1 dataset prompt to sample from.")
    if args.out:
        out = Path(args.out).expanduser()
        if out.is_dir():
            raise UserError(f"--out {args.out} is a folder; give a file name, e.g. {out / 'rewards.json'}.")
        if not out.parent.is_dir():
            raise UserError(f"--out {args.out}: the folder {out.parent} does not exist; create it or give another "
                            "path.")


def demo_target(given: str) -> Path:
    """The folder ``lf-engine demo --target`` builds into, made now: a new or empty folder, or an earlier build's."""
    from engine.demo import STAMP_FILE
    from engine.write_denied import make_new_folder

    target = Path(given).expanduser()
    fix = "give a new or empty folder (or one an earlier `lf-engine demo --target` built)."
    if target.exists() and not target.is_dir():
        raise UserError(f"`--target {given}` is a file, not a folder; {fix}")
    if target.is_dir() and not (target / STAMP_FILE).is_file() and any(target.iterdir()):
        raise UserError(f"`--target {given}` is a folder with other files in it, which the demo model's files would "
                        f"overwrite; {fix}")
    make_new_folder(target, f"`--target {given}`", fix, then="build it again")
    return target
