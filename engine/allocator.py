"""Keep freed CPU memory inside the process between training steps (glibc's malloc, Linux).

glibc serves every allocation above a threshold (at most 32 MiB, adjusted as the program runs) with its own
``mmap`` and gives it back to the kernel on ``free``; freed heap memory above 128 KiB is trimmed back too. A
training step allocates and frees the same large tensors every step (activations, logits, gradients), so each
step pays the kernel again for fresh zeroed pages: on the reference workload (README "Speed") the page faults
made the log-softmax over the vocabulary 30x slower than on reused memory and one long step about 30 % slower.

:func:`keep_freed_memory` raises both thresholds so that freed blocks stay in malloc's heap for the next step. The
peak resident memory of a run does not change (the same blocks are reused); the process just does not shrink
between steps. Nothing is done where the user set glibc's own malloc variables (``MALLOC_MMAP_THRESHOLD_``,
``MALLOC_TRIM_THRESHOLD_``, ``GLIBC_TUNABLES``), off glibc, or with ``LF_KEEP_FREED_MEMORY=0``.

:func:`align_large_blocks` sets torch's ``THP_MEM_ALLOC_ENABLE``: tensors of 2 MiB and more then start on page
boundaries, which cut the reference workload's peak RSS from 1.50-1.58 to 1.32-1.37 GiB (measured; less heap
fragmentation from batches of varying length is the likely reason). torch also asks the kernel for transparent huge
pages on those blocks, and on kernels that compact memory on such a fault (``defrag: madvise``, the common default)
the first step stalled 2-3 s (first step 3.0-3.4 s without, 5.5-6.0 s with) while later steps gained nothing; so
the process keeps the page-aligned blocks and opts out of huge pages (``prctl(PR_SET_THP_DISABLE)``): first step
3.4-3.8 s, peak RSS 1.32-1.34 GiB.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import sys

logger = logging.getLogger(__name__)

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 1 << 30  # blocks up to 1 GiB come from the heap and are reused
TRIM_THRESHOLD = 2**31 - 1  # the largest value mallopt takes (an int): never trim in practice

_USER_SETTINGS = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "GLIBC_TUNABLES")


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def keep_freed_memory() -> bool:
    """Tell glibc's malloc to keep freed memory for reuse; True if it took effect."""
    if not sys.platform.startswith("linux") or os.environ.get("LF_KEEP_FREED_MEMORY", "1") == "0":
        return False
    if any(os.environ.get(name) for name in _USER_SETTINGS):
        return False  # the user tuned malloc themselves
    try:
        libc = _libc()
        mallopt = libc.mallopt
        gnu_get_libc_version = libc.gnu_get_libc_version  # glibc only (musl has no mallopt thresholds)
    except (OSError, AttributeError):
        return False
    del gnu_get_libc_version
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    done = mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD) == 1 and mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD) == 1
    if not done:
        logger.debug("mallopt refused the thresholds; freed memory goes back to the kernel as usual.")
    return done


PR_SET_THP_DISABLE = 41
PR_GET_THP_DISABLE = 42


def align_large_blocks() -> bool:
    """Page-aligned large CPU tensors without transparent huge pages (see the module docstring); call it before
    torch allocates. True if both took effect; nothing is done where the user set ``THP_MEM_ALLOC_ENABLE``."""
    if "THP_MEM_ALLOC_ENABLE" in os.environ:
        return False  # the user's choice, huge pages included
    os.environ["THP_MEM_ALLOC_ENABLE"] = "1"
    if not sys.platform.startswith("linux"):
        return False
    try:
        done = _libc().prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
    if not done:
        logger.debug("prctl(PR_SET_THP_DISABLE) was refused (errno %d); huge pages stay on.", ctypes.get_errno())
    return done
