"""What a call held at its peak, for the tests that prove a reader bounded (a sparse file of gigabytes, a line of
hundreds of MB): Python's allocations traced while it runs."""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def traced_peak(fn: Callable[[], T]) -> tuple[T, int]:
    """``fn()``'s result and the most bytes Python had allocated (traced) at once while it ran."""
    tracemalloc.start()
    try:
        return fn(), tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
