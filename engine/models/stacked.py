"""Frozen weight matrices that read the same input, stored back to back so one matrix multiply serves them all.

Two or three projections of one input (a SwiGLU MLP's gate and up, attention's q, k and v) are as many matrix
multiplies of the same ``tokens x hidden`` input; on the CPU one multiply by the stacked matrix is faster than
separate ones (measured here: about 10 % on the reference model's gate and up, more on its smaller q, k and v),
and so is the backward's ``grad @ W``. :func:`stack_in_place` moves the frozen weights into one storage (each
parameter keeps its identity, shape and values: only where its data lives changes), and :func:`stacked` returns
the whole matrix as a view, or None once anything has moved them apart again (a ``.to()``, a reload), so callers
fall back to separate multiplies. Nothing is copied per step.

Weights loaded from a safetensors file are pages of that file mapped into the process; copying them into the new
storage would leave the old pages resident beside the copy (on the reference model, 67 MB more resident memory for
the whole run). Those pages are handed back to the kernel (``madvise(MADV_PAGEOUT)``: for clean file pages the
kernel drops them and reads them again should anything still touch them, so nothing can change), which keeps the
resident memory what it was.
"""

from __future__ import annotations

import ctypes
import logging
import mmap
import sys

import torch

logger = logging.getLogger(__name__)

_MADV_PAGEOUT = 21  # Linux 5.4+


def _plain(weight: torch.Tensor) -> bool:
    return (type(weight) in (torch.Tensor, torch.nn.Parameter) and not hasattr(weight, "ds_numel")
            and weight.dim() == 2 and weight.is_contiguous() and not weight.requires_grad
            and weight.device.type != "meta")


def stack_in_place(*weights: torch.Tensor) -> bool:
    """Move frozen, same-width 2-D ``weights`` into one contiguous storage, in order; False when they cannot be."""
    if len(weights) < 2 or not all(_plain(w) for w in weights):
        return False
    first = weights[0]
    if any(w.shape[1] != first.shape[1] or w.dtype != first.dtype or w.device != first.device for w in weights):
        return False
    if stacked(*weights) is not None:
        return True
    old = [(w.data_ptr(), w.numel() * w.element_size()) for w in weights if w.device.type == "cpu"]
    with torch.no_grad():
        whole = torch.cat([w.detach() for w in weights])
        start = 0
        for weight in weights:
            weight.data = whole[start:start + weight.shape[0]]
            start += weight.shape[0]
    _page_out_file_pages(old)
    return True


def _file_ranges() -> list[tuple[int, int]]:
    """Address ranges of this process's file-backed mappings."""
    ranges = []
    try:
        with open("/proc/self/maps", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                if len(fields) >= 6 and fields[4] != "0" and fields[5].startswith("/"):
                    low, high = fields[0].split("-")
                    ranges.append((int(low, 16), int(high, 16)))
    except OSError:
        return []
    return ranges


def _page_out_file_pages(spans: list[tuple[int, int]]) -> None:
    """Hand the whole pages of file-backed ``(address, bytes)`` spans back to the kernel (Linux; a no-op elsewhere
    or where the kernel refuses)."""
    if not spans or not sys.platform.startswith("linux"):
        return
    ranges = _file_ranges()
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        madvise = libc.madvise
        madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    except (OSError, AttributeError):
        return
    page = mmap.PAGESIZE
    for address, size in spans:
        if not any(low <= address and address + size <= high for low, high in ranges):
            continue  # anonymous memory: freed to the allocator, reused
        start, end = -(-address // page) * page, (address + size) // page * page
        if end > start and madvise(start, end - start, _MADV_PAGEOUT) != 0:
            logger.debug("madvise(MADV_PAGEOUT) refused (errno %d); the old weight pages stay resident.",
                         ctypes.get_errno())
            return


def stacked(*weights: torch.Tensor) -> torch.Tensor | None:
    """The ``weights`` as one ``(sum of rows) x width`` view when they lie back to back in one storage, else None."""
    first = weights[0]
    if first.dim() != 2 or not first.is_contiguous():
        return None
    storage = first.untyped_storage().data_ptr()
    end = first.data_ptr() + first.numel() * first.element_size()
    for weight in weights[1:]:
        if (weight.dim() != 2 or weight.shape[1] != first.shape[1] or weight.dtype != first.dtype
                or weight.device != first.device or not weight.is_contiguous()
                or weight.untyped_storage().data_ptr() != storage or weight.data_ptr() != end):
            return None
        end += weight.numel() * weight.element_size()
    rows = sum(w.shape[0] for w in weights)
    return first.detach().as_strided((rows, first.shape[1]), first.stride(), first.storage_offset())
