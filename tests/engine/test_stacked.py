"""Frozen weights moved into one storage: same parameters and values, one view of the whole, and a fallback once
they are moved apart."""

from __future__ import annotations

import torch
from torch import nn

from engine.models.stacked import stack_in_place, stacked


def test_stacking_keeps_parameters_and_values_and_gives_one_view():
    a, b, c = (nn.Linear(6, rows, bias=False).requires_grad_(False) for rows in (4, 2, 3))
    params = [a.weight, b.weight, c.weight]
    before = [p.detach().clone() for p in params]
    assert stacked(*params) is None  # separate storages
    assert stack_in_place(*params)
    assert [id(p) for p in (a.weight, b.weight, c.weight)] == [id(p) for p in params]  # the same parameters
    for param, old in zip(params, before):
        assert torch.equal(param, old)
    whole = stacked(*params)
    assert whole.shape == (9, 6) and torch.equal(whole, torch.cat(before))
    x = torch.randn(5, 6)
    torch.testing.assert_close(x.mm(whole.t()), torch.cat([a(x), b(x), c(x)], 1))
    assert stack_in_place(*params)  # already stacked: nothing moves
    assert stacked(*params).data_ptr() == whole.data_ptr()


def test_refused_for_trainable_mismatched_or_moved_weights():
    trainable = nn.Linear(4, 3, bias=False)
    frozen = nn.Linear(4, 3, bias=False).requires_grad_(False)
    assert not stack_in_place(trainable.weight, frozen.weight)
    assert not stack_in_place(frozen.weight, nn.Linear(5, 3, bias=False).requires_grad_(False).weight)  # widths
    assert not stack_in_place(frozen.weight, frozen.weight.detach().double())  # dtypes
    a, b = (nn.Linear(4, 3, bias=False).requires_grad_(False) for _ in range(2))
    assert stack_in_place(a.weight, b.weight)
    b.to(torch.float64)  # moved apart: callers must fall back
    assert stacked(a.weight, b.weight) is None
    a2, b2 = (nn.Linear(4, 3, bias=False).requires_grad_(False) for _ in range(2))
    assert stack_in_place(a2.weight, b2.weight)
    assert stacked(b2.weight, a2.weight) is None  # order matters


def test_weights_from_a_mapped_file_leave_no_resident_copy_behind(tmp_path):
    """Stacking weights that live in a mapped safetensors file hands the file's pages back (Linux)."""
    import sys

    import pytest
    from safetensors.torch import load_file, save_file

    if not sys.platform.startswith("linux"):
        pytest.skip("resident pages are read from /proc on Linux")
    size = 1024  # 4 MiB per float32 matrix
    save_file({"a": torch.randn(size, size), "b": torch.randn(size, size)}, str(tmp_path / "w.safetensors"))
    loaded = load_file(str(tmp_path / "w.safetensors"))  # memory-mapped
    a = nn.Parameter(loaded["a"], requires_grad=False)
    b = nn.Parameter(loaded["b"], requires_grad=False)
    expected = torch.cat([a, b]).clone()

    def file_rss() -> int:
        with open("/proc/self/status") as handle:
            return next(int(line.split()[1]) for line in handle if line.startswith("RssFile")) * 1024

    a.sum(), b.sum()  # every page resident
    before = file_rss()
    assert stack_in_place(a, b)
    assert torch.equal(stacked(a, b), expected)
    assert file_rss() < before - 6 * 2**20  # the two matrices' 8 MiB of file pages mostly handed back
