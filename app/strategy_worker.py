"""The scale-out check in a short-lived subprocess, so that the board process never imports torch or transformers.

Usage: ``python -m app.strategy_worker IN.json OUT.json``. ``IN.json`` holds ``{"mapping", "strategy", "nproc"}``
(the Train form's config, the strategy and the number of processes). The worker adds the strategy's config keys for
this machine's devices, validates the config, runs ``engine.train.parallel.plan.check`` (it counts the model's
parameters on the meta device and reads the devices' memory: both need torch) and writes to ``OUT.json`` either
``{"problems": [...]}`` (the config itself is wrong) or ``{"keys": {...}, "plan": {...}}``; ``{"error": message}``
when the check itself could not run.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from app.jobs import REPO_ROOT


def plan_of(mapping: dict[str, Any], strategy: str, nproc: int) -> dict[str, Any]:
    """The check's result as JSON-ready data (see the module docstring)."""
    from app import forms
    from engine import devices
    from engine.train.parallel.plan import check, launch_keys

    keys = launch_keys(strategy, nproc, repo_root=str(REPO_ROOT), device=devices.get_accelerator().type)
    checked = forms.validate({**mapping, **keys}, "train")
    if checked.config is None:
        return {"problems": list(checked.problems)}
    return {"keys": keys, "plan": asdict(check(checked.config, strategy, nproc))}


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    request = json.loads(Path(argv[0]).read_text(encoding="utf-8"))
    try:
        result, code = plan_of(request["mapping"], request["strategy"], int(request["nproc"])), 0
    except Exception as err:  # reported to the page; the traceback stays in the worker's log
        import traceback

        traceback.print_exc()
        result, code = {"error": f"{type(err).__name__}: {err}"}, 2
    Path(argv[1]).write_text(json.dumps(result), encoding="utf-8")
    return code


if __name__ == "__main__":
    raise SystemExit(main())
