"""FSDP2 (torch's ``fully_shard``) through accelerate's FSDP plugin, on accelerators and on CPUs alike.

transformers turns ``fsdp`` / ``fsdp_config`` into accelerate's ``FullyShardedDataParallelPlugin``. accelerate
only honours that plugin for accelerator back-ends: with CPU processes (``MULTI_CPU``, gloo) it drops it and
wraps the model in plain DDP. :class:`ShardingMixin` puts the plugin back into the accelerator's state after
the Trainer built it, so ``Accelerator.prepare`` takes its FSDP2 path (``fully_shard`` per decoder layer and on
the root, DTensor parameters) and the Trainer's FSDP saving path gathers the full state dict on rank 0.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def enable_fsdp_on_cpu(trainer: Any) -> bool:
    """Make ``trainer``'s accelerator use the FSDP plugin on CPU processes. True when it did something."""
    plugin_args = getattr(trainer.args, "fsdp_plugin_args", None)
    if not plugin_args or getattr(trainer, "is_fsdp_enabled", False):
        return False
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = trainer.accelerator.state
    if state.distributed_type != DistributedType.MULTI_CPU:
        return False
    plugin = FullyShardedDataParallelPlugin(**plugin_args)
    if state.mixed_precision != "no":
        plugin.set_mixed_precision(state.mixed_precision)
    from accelerate.state import PartialState

    # AcceleratorState copies PartialState's shared fields each time it is constructed (the Trainer does so again
    # later), so the switch goes into both
    PartialState().distributed_type = DistributedType.FSDP
    state.distributed_type = DistributedType.FSDP
    state.fsdp_plugin = plugin
    trainer.is_fsdp_enabled = True
    logger.info("FSDP%d enabled on CPU processes (gloo): parameters are sharded with fully_shard.",
                plugin.fsdp_version)
    return True


class ShardingMixin:
    """Put before ``transformers.Trainer`` (or a TRL trainer) in the bases to get FSDP2 on CPUs too."""

    def create_accelerator_and_postprocess(self):
        refuse_fsdp1_on_cpu(self.args)
        super().create_accelerator_and_postprocess()
        enable_fsdp_on_cpu(self)


def refuse_fsdp1_on_cpu(args: Any) -> None:
    """FSDP1 syncs module states from rank 0, which torch refuses on CPUs (accelerate raised a RuntimeError while
    the Trainer was built): raise :class:`engine.errors.UserError` with the fix instead."""
    config = getattr(args, "fsdp_config", None) or {}
    version = config.get("version", config.get("fsdp_version", 1)) if isinstance(config, dict) else 1
    # (one process never gets here with `fsdp`: engine.train.arguments drops it there, with a warning)
    if not getattr(args, "fsdp", None) or str(version) != "1" or getattr(args.device, "type", "cpu") != "cpu":
        return
    from engine.errors import UserError

    raise UserError("FSDP1 (`fsdp_version: 1` in fsdp_config) does not run on CPU processes (torch refuses its "
                    "module-state sync there); use FSDP2: set `fsdp_version: 2`, as examples/fsdp/fsdp2.json does, "
                    "or run on accelerators.")


FSDP_OPTIONS = ("full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard", "offload", "auto_wrap")
"""The words LLaMA-Factory / transformers accept in the legacy ``fsdp`` string."""


def resolve_fsdp(fsdp: str | bool | list | None, fsdp_config: str | dict | None,
                 layer_classes: str | None = None) -> dict[str, Any] | None:
    """``fsdp`` / ``fsdp_config`` as the config gives them → the one ``fsdp_config`` dict transformers 5 wants.

    ``fsdp_config`` is the path of a JSON file, or the settings themselves (a mapping, or its JSON text: a mapping
    in a YAML config arrives as JSON text).

    The legacy words (``full_shard auto_wrap``, ``offload``) are folded into the dict here, so transformers gets
    ``fsdp=True`` and never warns that the string form is deprecated. FSDP2 is the default version.
    ``layer_classes`` (``fsdp_transformer_layer_cls_to_wrap``, the top-level key of transformers 4, which LLaMA-Factory
    0.9.5's examples use) becomes the dict's ``transformer_layer_cls_to_wrap``, unless the dict names its own.
    Raises :class:`engine.errors.UserError` naming the problem and the fix.
    """
    import json

    from engine.errors import UserError
    from engine.json_text import loads

    if isinstance(fsdp, (list, tuple)):  # a YAML list of words, as LLaMA-Factory's examples write them
        fsdp = " ".join(str(word) for word in fsdp)
    if fsdp in (None, False, "", "false", "False"):
        if fsdp_config or layer_classes:
            key = "fsdp_config" if fsdp_config else "fsdp_transformer_layer_cls_to_wrap"
            raise UserError(f"`{key}` is set but `fsdp` is not: add `fsdp: full_shard auto_wrap` (or remove "
                            f"`{key}`).")
        return None
    if isinstance(fsdp_config, dict):
        config = dict(fsdp_config)
    elif fsdp_config and str(fsdp_config).lstrip().startswith("{"):  # the settings inline (a mapping in YAML)
        try:
            config = loads(fsdp_config)
        except json.JSONDecodeError as err:
            raise UserError(f"`fsdp_config` holds settings that are not valid JSON ({err.msg} at character "
                            f"{err.pos + 1}); write them as a JSON object or give the path of an FSDP JSON file."
                            ) from None
        if not isinstance(config, dict):
            raise UserError("`fsdp_config` must be a JSON object of FSDP settings or the path of an FSDP JSON file.")
    elif fsdp_config:
        from engine.small_json import read_named_json

        config = read_named_json("fsdp_config", str(fsdp_config), "FSDP", "examples/fsdp/fsdp2.json", UserError)
    else:
        config = {}
    config = {(k[5:] if k.startswith("fsdp_") else k): v for k, v in config.items()}
    if layer_classes:
        config.setdefault("transformer_layer_cls_to_wrap",
                          [name.strip() for name in str(layer_classes).split(",") if name.strip()])
    version = int(config.setdefault("version", 2))
    if version not in (1, 2):
        raise UserError(f"`fsdp_config` version {version} is unknown; use 2 (FSDP2) or 1.")
    words = [] if fsdp is True else str(fsdp).replace(",", " ").split()
    for word in words:
        word = word.lower()
        if word not in FSDP_OPTIONS and word not in ("true", "1", "yes"):
            raise UserError(f"`fsdp: {fsdp}` has the unknown option `{word}`; use words from {', '.join(FSDP_OPTIONS)}.")
        if word == "offload":
            config.setdefault("cpu_offload", True)
        elif word in ("full_shard", "shard_grad_op") and version == 2:
            config.setdefault("reshard_after_forward", word == "full_shard")
        elif word in ("hybrid_shard", "hybrid_shard_zero2", "no_shard"):
            if version == 2:
                raise UserError(f"`fsdp: {word}` exists only in FSDP1; with FSDP2 use `full_shard` (or "
                                "`shard_grad_op`), and hybrid sharding through `dp_replicate_size` and `dp_shard_size`.")
            config.setdefault("reshard_after_forward", word)
        elif word in ("full_shard", "shard_grad_op"):
            config.setdefault("reshard_after_forward", word)
    return config
