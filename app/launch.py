"""How the board launches a job: one process, ``torchrun`` for DDP / FSDP2 / DeepSpeed, or Ray.

The job manager calls :func:`build_command` in one place; the strategy and the number of processes travel in
run.json's ``launch`` field (``{"strategy": "fsdp2", "nproc": 2}``), so a re-queued or re-attached run is
launched and stopped the same way.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

from engine.ranks import live_ranks, signal_ranks
from engine.train.parallel.plan import MULTI_PROCESS, STRATEGIES

TORCHRUN_STRATEGIES = ("ddp", "fsdp2", "deepspeed_zero2", "deepspeed_zero3")


def normalize(launch: dict[str, Any] | None) -> dict[str, Any]:
    """``{"strategy", "nproc"}`` with defaults; unknown strategies fall back to a single process."""
    launch = dict(launch or {})
    strategy = launch.get("strategy") or "single"
    if strategy not in STRATEGIES:
        strategy = "single"
    try:
        nproc = max(1, int(launch.get("nproc") or 1))
    except (TypeError, ValueError):
        nproc = 1
    if strategy == "single":
        nproc = 1
    return {"strategy": strategy, "nproc": nproc}


def build_command(engine_command: list[str], subcommand: str, config_path: Path | str, args: list[str] | None,
                  launch: dict[str, Any] | None = None) -> list[str]:
    """The command line of a job.

    ``engine_command`` is ``[python, "-m", "engine"]`` (or a test's fake engine script). For torchrun strategies
    the same program runs under ``python -m torch.distributed.run --standalone --nproc-per-node N`` (one machine,
    a free rendezvous port). Ray runs the engine as one driver process that starts its workers itself.
    """
    tail = [subcommand, str(config_path), *(args or [])]
    launch = normalize(launch)
    if subcommand != "train" or launch["strategy"] not in TORCHRUN_STRATEGIES:
        return [*engine_command, *tail]
    python, program = engine_command[0], engine_command[1:]
    return [python, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(launch["nproc"]),
            *program, *tail]


def stop_ranks(run_dir: Path | str, sig: int = signal.SIGKILL) -> int:
    """Signal every rank of a multi-process run on this machine (their own sessions); how many were signalled."""
    return signal_ranks(run_dir, sig)


def ranks_alive(run_dir: Path | str) -> list[int]:
    return live_ranks(run_dir)


def is_multi_process(launch: dict[str, Any] | None) -> bool:
    launch = normalize(launch)
    return launch["strategy"] in MULTI_PROCESS and launch["nproc"] > 1
