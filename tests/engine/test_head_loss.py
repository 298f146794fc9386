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
