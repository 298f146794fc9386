"""LLaMA-Factory's token-weighted SFT losses (DFT, EAFT, ASFT): ours equal its functions' values and gradients
(tests/golden/lf_losses.json, made by ``python -m tests.golden.generate_losses`` from LLaMA-Factory 0.9.5's own
code), on the chunked head path as on the plain one, and a config trains with them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from engine.config import ConfigError, load_config
from engine.train.head_loss import HeadCrossEntropySum
from engine.train.token_weights import Weighting, asft_loss, lm_loss_func, weights
from tests.golden.generate_losses import inputs

GOLDEN = json.loads((Path(__file__).resolve().parents[1] / "golden" / "lf_losses.json").read_text())["cases"]
KINDS = {"dft": Weighting("dft"), "eaft": Weighting("eaft", 1.0), "eaft_0.5": Weighting("eaft", 0.5)}


@pytest.mark.parametrize("case", GOLDEN, ids=lambda c: f"{c['kind']}-{c['seed']}-{c['num_items']}")
def test_the_loss_and_its_gradient_are_llama_factorys(case):
    logits, labels = inputs(case["seed"])
    logits.requires_grad_(True)
    if case["kind"].startswith("asft_"):  # against a reference model's logits
        loss = asft_loss(logits, labels, inputs(case["seed"] + 100)[0], float(case["kind"][5:]))
    else:
        loss = lm_loss_func(KINDS[case["kind"]])({"logits": logits}, labels, case["num_items"])
    loss.backward()
    assert loss.item() == pytest.approx(case["loss"], rel=1e-5)
    assert float((logits.grad ** 2).sum()) == pytest.approx(case["grad_sq"], rel=1e-4)


@pytest.mark.parametrize("weighting", [None, *KINDS.values()])
def test_the_chunked_head_path_gives_the_same_loss_and_gradients(weighting, monkeypatch):
    import engine.train.head_loss as head_loss

    monkeypatch.setattr(head_loss, "CHUNK", 16)  # several chunks
    torch.manual_seed(0)
    weight, hidden = torch.randn(50, 12), torch.randn(37, 12, requires_grad=True)
    targets = torch.randint(0, 50, (37,))
    chunked = HeadCrossEntropySum.apply(hidden, weight, targets, None, None, weighting)
    chunked.backward()
    plain_hidden = hidden.detach().clone().requires_grad_(True)
    logits = plain_hidden @ weight.t()
    losses = torch.nn.functional.cross_entropy(logits, targets, reduction="none")
    plain = (losses * (weights(weighting, logits.detach(), losses.detach()) if weighting else 1)).sum()
    plain.backward()
    assert chunked.item() == pytest.approx(plain.item(), rel=1e-5)
    assert torch.allclose(hidden.grad, plain_hidden.grad, atol=1e-6)


DEMO = {"model_name_or_path": "demo", "stage": "sft", "finetuning_type": "lora", "dataset": "demo_sft",
        "output_dir": "out"}


def test_the_keys_are_checked():
    assert load_config(None, {**DEMO, "use_eaft_loss": True, "eaft_alpha": 0.5}).methods.eaft_alpha == 0.5
    with pytest.raises(ConfigError, match="choose one"):
        load_config(None, {**DEMO, "use_dft_loss": True, "use_eaft_loss": True})
    with pytest.raises(ConfigError, match="stage sft"):
        load_config(None, {**DEMO, "stage": "dpo", "dataset": "demo_dpo", "use_dft_loss": True})


def test_sft_trains_with_the_dft_loss(tmp_path, capsys):
    from engine.cli import main

    losses = {}
    for name, extra in (("plain", []), ("dft", ["use_dft_loss=true"])):
        out = tmp_path / name
        assert main(["train", "examples/sft_lora_demo.yaml", f"output_dir={out}", "max_steps=3", "logging_steps=1",
                     "save_strategy=no", "plot_loss=false", *extra]) == 0
        events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line]
        losses[name] = [e["loss"] for e in events if e["event"] == "log" and "loss" in e]
    assert len(losses["dft"]) == 3 and all(d < p for d, p in zip(losses["dft"], losses["plain"]))  # p < 1 weights


@pytest.mark.parametrize("finetuning", ["lora", "full"])
def test_sft_trains_with_the_asft_loss(tmp_path, finetuning):
    """ASFT's reference is the model without its adapters (LoRA) or a frozen copy (full): at the first step the
    policy equals it, so the KL term is 0 and the loss is DFT's (a mean over the batch's trained tokens)."""
    from engine.cli import main

    first = {}
    for name, extra in (("dft", ["use_dft_loss=true"]), ("asft", ["use_asft_loss=true", "asft_alpha=0.5"])):
        out = tmp_path / name
        assert main(["train", "examples/sft_lora_demo.yaml", f"output_dir={out}", "max_steps=2", "logging_steps=1",
                     "save_strategy=no", "plot_loss=false", "gradient_accumulation_steps=1",
                     f"finetuning_type={finetuning}", "learning_rate=1e-3", *extra]) == 0
        events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line]
        first[name] = [e["loss"] for e in events if e["event"] == "log" and "loss" in e]
    assert first["asft"][0] == pytest.approx(first["dft"][0], rel=1e-3) and len(first["asft"]) == 2
