"""The chunked head + cross-entropy: the plain path's loss and gradients without keeping the full logits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from engine.train import head_loss
from engine.train.head_loss import HeadCrossEntropySum, chunked_head_loss


@pytest.fixture
def small_chunks(monkeypatch):
    monkeypatch.setattr(head_loss, "CHUNK", 7)  # several chunks and a ragged last one


def test_same_loss_and_hidden_gradient_as_the_plain_path(small_chunks):
    torch.manual_seed(0)
    head = nn.Linear(16, 50, bias=False).requires_grad_(False)
    hidden = torch.randn(30, 16, requires_grad=True)
    targets = torch.randint(0, 50, (30,))
    plain_hidden = hidden.detach().clone().requires_grad_(True)
    loss = chunked_head_loss(head, hidden, targets)
    plain = F.cross_entropy(head(plain_hidden).float(), targets, reduction="sum")
    torch.testing.assert_close(loss, plain, rtol=1e-5, atol=1e-5)
    (loss / 3).backward()
    (plain / 3).backward()  # the trainer divides by the number of trained tokens
    torch.testing.assert_close(hidden.grad, plain_hidden.grad, rtol=1e-5, atol=1e-6)


def test_gradcheck_in_float64(small_chunks):
    torch.manual_seed(1)
    hidden = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(9, 4, dtype=torch.float64)
    targets = torch.randint(0, 9, (10,))
    assert torch.autograd.gradcheck(lambda h: HeadCrossEntropySum.apply(h, weight, targets), (hidden,))


def test_plain_path_where_the_head_trains_or_no_gradient_is_wanted():
    hidden = torch.randn(4, 8, requires_grad=True)
    targets = torch.tensor([1, 2, 3, 0])
    assert chunked_head_loss(nn.Linear(8, 5, bias=False), hidden, targets) is None  # trainable head
    assert chunked_head_loss(nn.Linear(8, 5).requires_grad_(False), hidden, targets) is None  # bias
    frozen = nn.Linear(8, 5, bias=False).requires_grad_(False)
    with torch.no_grad():
        assert chunked_head_loss(frozen, hidden, targets) is None
    assert chunked_head_loss(frozen, hidden.detach(), targets) is None
    assert chunked_head_loss(frozen, hidden, torch.tensor([1, 2, 3, 5])) is None  # out of range: cross_entropy says so
    assert chunked_head_loss(frozen, hidden, targets) is not None


def _token_rows_head(vocab=50, hidden=16, new=(47, 3, 49)):
    """A frozen head wrapped in PEFT's trainable-token layer with the row-sparse forward (trained rows ``new``)."""
    from peft import LoraConfig, get_peft_model

    from engine.models.token_rows import use_sparse_token_rows

    class Tiny(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(hidden, hidden, bias=False)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)

    torch.manual_seed(4)
    model = get_peft_model(Tiny(), LoraConfig(r=2, target_modules=["proj"],
                                              trainable_token_indices={"lm_head": list(new)}))
    for name, param in model.named_parameters():
        if "trainable_tokens_delta" in name:
            param.data.normal_(0, 0.5)  # unlike the rows they replace
    assert use_sparse_token_rows(model) == 1
    return model.base_model.model.lm_head


def test_trained_token_rows_same_loss_and_gradients_as_the_plain_path(small_chunks):
    head = _token_rows_head()
    delta = next(p for n, p in head.named_parameters() if "trainable_tokens_delta" in n)
    torch.manual_seed(5)
    hidden = torch.randn(30, 16, requires_grad=True)
    targets = torch.randint(0, 50, (30,))
    targets[:4] = torch.tensor([47, 3, 49, 47])  # new tokens among the targets
    loss = chunked_head_loss(head, hidden, targets)
    assert loss is not None
    (loss / 3).backward()
    chunked_grads = hidden.grad.clone(), delta.grad.clone()
    hidden.grad, delta.grad = None, None
    plain = F.cross_entropy(head(hidden).float(), targets, reduction="sum")  # the layer's own forward
    torch.testing.assert_close(loss, plain, rtol=1e-5, atol=1e-5)
    (plain / 3).backward()
    torch.testing.assert_close(chunked_grads[0], hidden.grad, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(chunked_grads[1], delta.grad, rtol=1e-5, atol=1e-6)
    assert head.token_adapter.get_base_layer().weight.grad is None
    assert delta.grad.abs().sum() > 0


def test_gradcheck_with_trained_rows_in_float64(small_chunks):
    torch.manual_seed(6)
    hidden = torch.randn(10, 4, dtype=torch.float64, requires_grad=True)
    weight = torch.randn(9, 4, dtype=torch.float64)
    rows = torch.randn(2, 4, dtype=torch.float64, requires_grad=True)
    index = torch.tensor([7, 1])
    targets = torch.tensor([7, 1, 0, 2, 7, 8, 3, 1, 4, 5])
    assert torch.autograd.gradcheck(lambda h, r: HeadCrossEntropySum.apply(h, weight, targets, r, index),
                                    (hidden, rows))


def test_trained_rows_keep_the_plain_path_when_disabled_or_merged():
    head = _token_rows_head()
    hidden = torch.randn(4, 16, requires_grad=True)
    targets = torch.tensor([1, 2, 47, 0])
    assert chunked_head_loss(head, hidden, targets) is not None
    assert chunked_head_loss(head.token_adapter, hidden, targets) is not None  # the layer inside PEFT's wrapper
    head.enable_adapters(False)  # PEFT's forward runs then (base rows): the chunked path must not guess
    assert chunked_head_loss(head, hidden, targets) is None
    head.enable_adapters(True)
    head.register_forward_hook(lambda *args: None)
    assert chunked_head_loss(head, hidden, targets) is None


def test_softmax_is_written_over_the_logits_with_torchs_logsumexp():
    from engine.train.head_loss import _softmax_in_place

    torch.manual_seed(4)
    logits = torch.randn(33, 500) * 5
    logits[0, :] = float("-inf")  # a row with nothing possible: log-sum-exp -inf, as torch's
    logits[1, 3] = float("inf")
    expected_lse = torch.logsumexp(logits, dim=-1)
    expected_probs = torch.softmax(logits[2:], dim=-1)
    work = logits.clone()
    probs, lse = _softmax_in_place(work)
    assert probs.data_ptr() == work.data_ptr()  # no tokens x vocabulary temporary
    assert torch.equal(lse, expected_lse)  # the loss is bit for bit torch.logsumexp's
    torch.testing.assert_close(probs[2:], expected_probs, rtol=1e-5, atol=1e-7)


def test_under_bf16_autocast_with_float32_weights_and_trained_rows(small_chunks):
    """Under mixed-precision autocast the products run in bfloat16, as the head's own matmul would, whatever the
    stored dtypes: a float32 head with trained rows failed in the in-place product ("must have the same dtype")."""
    head = _token_rows_head()
    delta = next(p for n, p in head.named_parameters() if "trainable_tokens_delta" in n)
    torch.manual_seed(5)
    hidden = torch.randn(30, 16, requires_grad=True)
    targets = torch.randint(0, 50, (30,))
    targets[:4] = torch.tensor([47, 3, 49, 47])
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ours = chunked_head_loss(head, hidden, targets)
        ours.backward()
        got = hidden.grad.clone(), delta.grad.clone()
        hidden.grad = delta.grad = None
        reference = F.cross_entropy(head(hidden).float(), targets, reduction="sum")
    reference.backward()
    torch.testing.assert_close(ours, reference, rtol=2e-2, atol=1e-1)
    torch.testing.assert_close(got[0], hidden.grad, rtol=5e-2, atol=5e-2)
    torch.testing.assert_close(got[1], delta.grad, rtol=5e-2, atol=5e-2)
