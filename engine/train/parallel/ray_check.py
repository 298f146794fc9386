"""Whether a config that runs through Ray (``use_ray: true`` or ``USE_RAY=1``) can: Ray Train installed. Light (no
torch, no ray import), so that ``lf-engine check`` and the board's pre-flight check name it before a run starts."""

from __future__ import annotations

import importlib.util
import os
from typing import Any

WORKER_FLAG = "LF_RAY_WORKER"
"""Set in each Ray worker's environment: the worker runs the job itself, not through Ray again."""
RAY_MISSING = ("`use_ray: true` needs Ray Train: `pip install 'ray[train]'`, or remove `use_ray` and launch with "
               "torchrun.")


def use_ray(cfg: Any) -> bool:
    """``use_ray: true`` or LLaMA-Factory's ``USE_RAY=1``; never inside a Ray worker itself."""
    if os.environ.get(WORKER_FLAG) == "1":
        return False
    env = os.environ.get("USE_RAY", "").strip().lower() in ("1", "true", "y", "yes")
    return bool(cfg.parallel.use_ray or env)


def ray_problems(cfg: Any) -> list[str]:
    """The install a Ray run needs, found by name (importing Ray takes seconds)."""
    if not use_ray(cfg) or importlib.util.find_spec("ray") is not None:
        return []
    return [RAY_MISSING]
