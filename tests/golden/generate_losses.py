"""Regenerate tests/golden/lf_losses.json: LLaMA-Factory 0.9.5's DFT, EAFT and ASFT losses on fixed inputs.

    python -m tests.golden.generate_losses

The two loss functions (and their helpers) are read from the LLaMA-Factory mirror (``git show``) and run alone,
on seeded logits and labels (some masked); the file keeps each loss value and its gradient's sum of squares, so
tests/engine/test_token_weights.py can check ours against them. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import ast
import json
import subprocess
from pathlib import Path

import torch

from tests.golden.lf_harness import MIRROR, REF

NAMES = ("dft_loss_func", "_dft_cross_entropy", "eaft_loss_func", "_eaft_cross_entropy", "asft_loss_func",
         "_asft_cross_entropy", "_kl_divergence")


def lf_functions() -> dict:
    text = subprocess.run(["git", "-C", MIRROR, "show", f"{REF}:src/llamafactory/train/trainer_utils.py"],
                          check=True, capture_output=True, text=True).stdout
    tree = ast.parse(text)
    source = "\n\n".join(ast.get_source_segment(text, node) for node in tree.body
                         if isinstance(node, ast.FunctionDef) and node.name in NAMES)
    namespace = {"torch": torch, "F": torch.nn.functional, "Optional": __import__("typing").Optional}
    exec(compile("from __future__ import annotations\n" + source, "lf_trainer_utils", "exec"), namespace)
    return namespace


def inputs(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(seed)
    logits = torch.randn(3, 11, 40, generator=generator) * 3
    labels = torch.randint(0, 40, (3, 11), generator=generator)
    labels[:, :4] = -100  # a prompt
    labels[2, 7:] = -100  # padding
    return logits, labels


def main() -> None:
    lf = lf_functions()
    cases = []
    for seed in range(4):
        for kind, call in (("dft", lambda o, lab, n: lf["dft_loss_func"](o, lab, n)),
                           ("eaft", lambda o, lab, n: lf["eaft_loss_func"](o, lab, n, 1.0)),
                           ("eaft_0.5", lambda o, lab, n: lf["eaft_loss_func"](o, lab, n, 0.5))):
            for items in (None, 40):
                logits, labels = inputs(seed)
                logits.requires_grad_(True)
                loss = call({"logits": logits}, labels, items)
                loss.backward()
                cases.append({"seed": seed, "kind": kind, "num_items": items, "loss": loss.item(),
                              "grad_sq": float((logits.grad ** 2).sum())})
    for seed in range(4):
        for alpha in (0.1, 0.5):
            logits, labels = inputs(seed)
            reference = inputs(seed + 100)[0]
            logits.requires_grad_(True)
            loss = lf["asft_loss_func"]({"logits": logits}, labels, reference, asft_alpha=alpha)
            loss.backward()
            cases.append({"seed": seed, "kind": f"asft_{alpha}", "num_items": None, "loss": loss.item(),
                          "grad_sq": float((logits.grad ** 2).sum())})
    path = Path(__file__).resolve().parent / "lf_losses.json"
    path.write_text(json.dumps({"cases": cases}, indent=1) + "\n", encoding="utf-8")
    print(f"wrote {path} ({len(cases)} cases)")


if __name__ == "__main__":
    main()
