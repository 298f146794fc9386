"""Training through Ray Train: a ``TorchTrainer`` runs the same training job on every Ray worker.

``lf-engine train cfg.yaml`` with ``use_ray: true`` (or ``USE_RAY=1``) becomes the Ray *driver*: it joins the cluster
(``RAY_ADDRESS`` or ``ray_init_kwargs``, else a local Ray), and starts ``ray_num_workers`` workers with
``resources_per_worker`` and ``placement_strategy``; Ray Train's torch backend forms the process group, and each
worker runs :func:`train_worker`, the ordinary job (rank 0 writes the run folder). The
``RAY_EXPERIMENTAL_NOSET_*_VISIBLE_DEVICES`` variables set on the driver (CUDA, Ascend, SUPA, ROCm) are passed to
the workers, which then pick their device from the accelerator ids Ray assigned. A SIGTERM to the driver is
forwarded to the workers on this machine, which save a checkpoint and stop.
"""

from __future__ import annotations

import logging
import os
import signal
from pathlib import Path
from typing import Any

from engine import devices
from engine.errors import UserError
from engine.train.parallel.ray_check import RAY_MISSING, WORKER_FLAG, use_ray  # noqa: F401 (use_ray: the launcher's)
from engine.wording import counted

logger = logging.getLogger(__name__)

# NOSET variable -> the name of that accelerator among Ray's resources / accelerator ids
NOSET_RESOURCES = {
    "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "GPU",
    "RAY_EXPERIMENTAL_NOSET_ROCR_VISIBLE_DEVICES": "GPU",
    "RAY_EXPERIMENTAL_NOSET_HIP_VISIBLE_DEVICES": "GPU",
    "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "NPU",
    "RAY_EXPERIMENTAL_NOSET_SUPA_VISIBLE_DEVICES": "SUPA",
    "RAY_EXPERIMENTAL_NOSET_ONEAPI_DEVICE_SELECTOR": "GPU",
}


def _import_ray() -> Any:
    try:
        import ray
        import ray.train  # noqa: F401
        import ray.train.torch  # noqa: F401
    except ImportError:
        raise UserError(RAY_MISSING) from None
    return ray


def resources(cfg: Any) -> dict[str, float]:
    """Each worker's resources: the config's, else one device of this machine's kind (one CPU without one)."""
    given = cfg.parallel.resources_per_worker
    if given:
        return dict(given)
    return {"GPU": 1} if devices.get_accelerator().is_accelerator else {"CPU": 1}


def worker_env() -> dict[str, str]:
    """Variables every worker gets: the NOSET choices, the driver's pid (run.json keeps it) and the launcher."""
    env = dict(devices.ray_visible_devices_env_vars())
    env.update({"LF_LAUNCHER": "ray", "LF_LAUNCHER_PID": str(os.getpid()), "LF_LAUNCHER_PGID": str(os.getpgid(0))})
    return env


def init_kwargs(cfg: Any) -> dict[str, Any]:
    """Arguments of ``ray.init``: ``ray_init_kwargs``, ``RAY_ADDRESS`` to join a cluster, the workers' env vars."""
    kwargs = dict(cfg.parallel.ray_init_kwargs or {})
    if os.environ.get("RAY_ADDRESS") and "address" not in kwargs:
        kwargs["address"] = os.environ["RAY_ADDRESS"]
    runtime_env = dict(kwargs.pop("runtime_env", None) or {})
    env_vars = {**worker_env(), **dict(runtime_env.get("env_vars") or {})}
    runtime_env["env_vars"] = env_vars
    kwargs["runtime_env"] = runtime_env
    return kwargs


def build_trainer(cfg: Any) -> Any:
    """The Ray ``TorchTrainer`` for ``cfg`` (joins or starts Ray first)."""
    ray = _import_ray()
    from ray.train import RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    par = cfg.parallel
    if not ray.is_initialized():
        ray.init(**init_kwargs(cfg))
    res = resources(cfg)
    storage = par.ray_storage_path
    filesystem = None
    if par.ray_storage_filesystem:
        import pyarrow.fs as pafs

        filesystem = pafs.S3FileSystem() if par.ray_storage_filesystem == "s3" else pafs.GcsFileSystem()
    else:
        storage = Path(storage).absolute().as_posix()
    return TorchTrainer(
        train_worker,
        train_loop_config={"config_yaml": cfg.to_yaml(minimal=False), "run_dir": str(cfg.train.output_dir)},
        scaling_config=ScalingConfig(num_workers=par.ray_num_workers, resources_per_worker=res,
                                     placement_strategy=par.placement_strategy, use_gpu=res.get("GPU", 0) > 0),
        run_config=RunConfig(name=par.ray_run_name, storage_path=storage, storage_filesystem=filesystem),
    )


def launch(cfg: Any) -> int:
    """Run the training on Ray workers; the exit code follows the outcome rank 0 recorded."""
    from engine.ranks import signal_ranks
    from engine.runs import RunFolder

    run_dir = Path(cfg.train.output_dir)
    folder = RunFolder(run_dir)
    trainer = build_trainer(cfg)
    aborted = {"flag": False}

    def forward(signum: int, frame: Any) -> None:
        aborted["flag"] = True
        sent = signal_ranks(run_dir, signal.SIGTERM)
        logger.warning("Stop requested: SIGTERM forwarded to %s on this machine.", counted(sent, "Ray worker"))

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    error = None
    try:
        result = trainer.fit()
        error = getattr(result, "error", None)
    except Exception as err:  # noqa: BLE001 - Ray wraps worker failures; report them in the run folder
        error = err
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    info = folder.info()
    status = info.get("status")
    if error is not None and status not in ("completed", "failed", "aborted"):
        folder.update(status="failed", error=f"Ray training failed: {error}", exit_code=1)
        status = "failed"
    logger.info("Ray training ended: %s", status or "unknown")
    if status == "aborted" or aborted["flag"]:
        return 130
    if status == "completed":
        return 0
    return int(info.get("exit_code") or 1) if status == "failed" else 1


def _pick_local_device() -> None:
    """With a NOSET variable, all devices stay visible: the local rank is the device id Ray assigned."""
    chosen = [name for name in NOSET_RESOURCES if os.environ.get(name)]
    if not chosen:
        return
    import ray

    ids = ray.get_runtime_context().get_accelerator_ids().get(NOSET_RESOURCES[chosen[0]]) or []
    if ids:
        os.environ["LOCAL_RANK"] = str(ids[0])


def train_worker(config: dict[str, Any]) -> None:
    """One Ray worker: the ordinary training job under this worker's rank."""
    import yaml
    from ray import train as ray_train

    from engine.config import build_config
    from engine.lifecycle import JobContext
    from engine.train.workflow import run_train

    context = ray_train.get_context()
    for key, value in (("RANK", context.get_world_rank()), ("WORLD_SIZE", context.get_world_size()),
                       ("LOCAL_RANK", context.get_local_rank()), ("LOCAL_WORLD_SIZE", context.get_local_world_size()),
                       ("NODE_RANK", context.get_node_rank())):
        os.environ.setdefault(key, str(value))
    _pick_local_device()
    os.environ[WORKER_FLAG] = "1"
    os.environ.setdefault("LF_LAUNCHER", "ray")
    cfg = build_config(yaml.safe_load(config["config_yaml"]))
    with JobContext(config["run_dir"], "train") as ctx:
        metrics = run_train(cfg, ctx)
    if context.get_world_rank() == 0:
        ray_train.report({k: v for k, v in metrics.items() if isinstance(v, (int, float))})
