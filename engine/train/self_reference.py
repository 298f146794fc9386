"""Evaluation-only DPO/KTO without ``ref_model``: the model itself is the reference, as in LLaMA-Factory 0.9.5
(train/dpo/workflow.py and train/kto/workflow.py: ``if finetuning_args.ref_model is None and (not
training_args.do_train): ref_model = model``), not the model with its adapter switched off (TRL's default).

The policy and the reference then score each batch alike, so the loss is the neutral value (log 2 for sigmoid DPO,
0.5 for KTO) and LLaMA-Factory drops every ``rewards`` key from the evaluation metrics ("unable to compute rewards
if reference model is the model itself"); :func:`without_rewards` does the same.
"""

from __future__ import annotations

import copy
from typing import Any


def uses_itself(cfg: Any) -> bool:
    """Whether ``cfg`` evaluates a DPO (with a reference: not ORPO/SimPO) or KTO run against the model itself."""
    ft = cfg.finetuning
    with_reference = ft.stage == "kto" or (ft.stage == "dpo" and ft.pref_loss not in ("orpo", "simpo"))
    return with_reference and not cfg.train.do_train and not ft.ref_model


def construction_stand_in(cfg: Any, model: Any) -> Any:
    """What TRL's trainer is built with as ``ref_model`` before :func:`refer_to_itself` points it at the model.

    TRL refuses the model itself (``ref_model is model``) and, given none for a model without adapters, loads the
    base model again from its path. A shallow copy shares every module and weight (nothing is loaded or copied);
    under DeepSpeed or FSDP, which would wrap those shared modules a second time, and for an adapter model (TRL
    loads nothing for one), it is None."""
    from accelerate.utils import is_peft_model

    if is_peft_model(model) or cfg.train.deepspeed or cfg.train.fsdp:
        return None
    return copy.copy(model)


def refer_to_itself(trainer: Any) -> Any:
    """Make ``trainer``'s reference forward the model itself, adapters on (its ``ref_model`` call)."""
    trainer.ref_model = trainer.model
    return trainer


def without_rewards(metrics: dict) -> dict:
    """``metrics`` without the ``rewards`` keys, as LLaMA-Factory's workflows drop them for a self-reference."""
    return {key: value for key, value in metrics.items() if "rewards" not in key}
