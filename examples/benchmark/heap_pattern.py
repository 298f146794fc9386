"""How glibc's heap grows under a training step's allocation pattern, without a model: run it by hand.

    python examples/benchmark/heap_pattern.py                      # torch's 2 MiB alignment, as lf-engine sets it
    THP_MEM_ALLOC_ENABLE=0 python examples/benchmark/heap_pattern.py

Each pass allocates, eight times over (one decoder layer of the README's reference model at the run's longest batch,
1,825 tokens), the tensors a LoRA training step keeps for its backward pass (the normalized inputs, q, k, v, the
attention output, the MLP's gate and up) and the temporaries freed in between, with malloc set up as ``lf-engine``
sets it (``engine.allocator.keep_freed_memory``). After each pass it prints glibc's ``mallinfo2``: the heap, what is in
use and what is free. An allocator that reused freed blocks of the same size would hold the heap near "in use"; the
figures are in SITTINGS.md beside this file. Nothing here asserts anything.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]


def heap_figures(libc: ctypes.CDLL) -> str:
    info = libc.mallinfo2()
    return f"heap {info.arena >> 20} MiB, in use {info.uordblks >> 20} MiB, free {info.fordblks >> 20} MiB"


def one_pass(tokens: int, hidden: int, inter: int, layers: int) -> list[Any]:
    """The kept tensors of one forward pass (freed by the caller, as the backward pass frees them)."""
    import torch

    unit, wide = tokens * hidden, tokens * inter
    kept: list[Any] = []
    for _ in range(layers):
        norm1, scratch = torch.empty(unit), torch.empty(unit)
        q, k, v = torch.empty(unit), torch.empty(unit), torch.empty(unit)
        q_rot, k_rot = torch.empty(unit), torch.empty(unit)
        del q, k
        attn = torch.empty(unit)
        o_proj, residual = torch.empty(unit), torch.empty(unit)
        del o_proj
        norm2 = torch.empty(unit)
        gate, up = torch.empty(wide), torch.empty(wide)
        act, down = torch.empty(wide), torch.empty(unit)
        del act, down, scratch, residual
        kept += [norm1, q_rot, k_rot, v, attn, norm2, gate, up]
    return kept


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=1825)
    parser.add_argument("--passes", type=int, default=6)
    args = parser.parse_args()
    if not sys.platform.startswith("linux"):
        raise SystemExit("glibc's mallinfo2 is Linux-only.")
    os.environ.setdefault("THP_MEM_ALLOC_ENABLE", "1")  # before torch loads, as lf-engine does
    from engine.allocator import keep_freed_memory

    libc = ctypes.CDLL("libc.so.6")
    libc.mallinfo2.restype = MallInfo2
    print("malloc set up as lf-engine does:", keep_freed_memory(),
          "| THP_MEM_ALLOC_ENABLE =", os.environ["THP_MEM_ALLOC_ENABLE"])
    for number in range(1, args.passes + 1):
        kept = one_pass(args.tokens, 512, 1376, 8)
        size = sum(t.numel() * t.element_size() for t in kept) >> 20
        print(f"pass {number}: {size} MiB kept; {heap_figures(libc)}")
        del kept
    print(f"after the last pass: {heap_figures(libc)}")


if __name__ == "__main__":
    main()
