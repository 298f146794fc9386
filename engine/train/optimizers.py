"""Muon for the 2-D weight matrices of the blocks, AdamW for everything else, stepped as one optimizer.

torch ships ``torch.optim.Muon`` (orthogonalised momentum for matrices). Embeddings, the output head, norms,
biases and any 1-D parameter stay on AdamW with the usual betas, eps and weight decay; both use the training
learning rate, so the Trainer's scheduler drives both through the shared parameter groups.
"""

from __future__ import annotations

from typing import Any

import torch

from engine.errors import UserError


class MuonWithAdamW(torch.optim.Optimizer):
    """One optimizer object over two inner ones; its ``param_groups`` are theirs, so schedulers reach both."""

    def __init__(self, muon: torch.optim.Optimizer | None, adamw: torch.optim.Optimizer | None):
        self.inner = [opt for opt in (muon, adamw) if opt is not None]
        params = [p for opt in self.inner for g in opt.param_groups for p in g["params"]]
        super().__init__(params, {})
        self.param_groups = [g for opt in self.inner for g in opt.param_groups]

    @property
    def state(self):  # noqa: D102 - the inner optimizers' state, merged
        merged: dict = {}
        for opt in getattr(self, "inner", []):
            merged.update(opt.state)
        return merged

    @state.setter
    def state(self, value):
        return None

    def step(self, closure=None):
        loss = closure() if closure is not None else None
        for opt in self.inner:
            opt.step()
        return loss

    def zero_grad(self, set_to_none: bool = True):
        for opt in self.inner:
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self) -> dict[str, Any]:
        return {"inner": [opt.state_dict() for opt in self.inner]}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        for opt, sd in zip(self.inner, state_dict["inner"]):
            opt.load_state_dict(sd)


def is_muon_param(name: str, param: torch.Tensor, head_and_embeddings: set[int]) -> bool:
    return param.ndim == 2 and id(param) not in head_and_embeddings and "embed" not in name and "lm_head" not in name


def build_muon_optimizer(model: torch.nn.Module, args: Any) -> MuonWithAdamW:
    """Split the trainable parameters between Muon (2-D block matrices) and AdamW (the rest)."""
    if not hasattr(torch.optim, "Muon"):
        raise UserError("`use_muon: true` needs torch >= 2.9 (torch.optim.Muon); upgrade torch or remove it.")
    excluded = set()
    for getter in ("get_input_embeddings", "get_output_embeddings"):
        module = getattr(model, getter, lambda: None)()
        if module is not None and getattr(module, "weight", None) is not None:
            excluded.add(id(module.weight))
    muon_params, decay, no_decay = [], [], []
    for name, param in model.named_parameters():
        if not param.requires_grad:
            continue
        if is_muon_param(name, param, excluded):
            muon_params.append(param)
        elif param.ndim >= 2:
            decay.append(param)
        else:
            no_decay.append(param)
    muon = torch.optim.Muon(muon_params, lr=args.learning_rate, weight_decay=args.weight_decay) if muon_params else None
    groups = [g for g in ({"params": decay, "weight_decay": args.weight_decay},
                          {"params": no_decay, "weight_decay": 0.0}) if g["params"]]
    adamw = torch.optim.AdamW(groups, lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                              eps=args.adam_epsilon) if groups else None
    return MuonWithAdamW(muon, adamw)
