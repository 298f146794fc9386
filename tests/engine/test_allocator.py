"""engine.allocator: freed tensors stay in malloc's heap for the next step instead of going back to the kernel."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc malloc (Linux)")

LOOP = r"""
import ctypes, sys
from engine.allocator import keep_freed_memory
took = keep_freed_memory() if sys.argv[1] == "keep" else False
import torch

class Info(ctypes.Structure):  # glibc's struct mallinfo2
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = Info
base = libc.mallinfo2()
x = torch.ones(16 * 2**20)  # 64 MiB, above glibc's largest default mmap threshold
live = libc.mallinfo2()
del x
freed = libc.mallinfo2()
print(took, (live.hblkhd - base.hblkhd) >> 20, (freed.arena - base.arena) >> 20)
"""


def outputs(*runs: tuple[list[str], dict[str, str]]) -> list[list[str]]:
    """Each run's (``python`` arguments, environment) printed words; the runs (fresh interpreters, each importing
    torch, sharing nothing) go side by side."""
    procs = [subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env) for args, env in runs]
    words = []
    try:
        for proc in procs:
            stdout, stderr = proc.communicate(timeout=120)
            assert proc.returncode == 0, stderr[-2000:]
            words.append(stdout.split())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    return words


def blocks(*runs: tuple[str, dict[str, str]]) -> list[tuple[str, int, int]]:
    """For each (mode, environment): (took effect, MiB in separately mmapped blocks while a 64 MiB tensor lives, MiB
    the heap grew by and kept after the free)."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith(("MALLOC_", "GLIBC_TUNABLES", "LF_KEEP"))}
    return [(took, int(mapped), int(heap)) for took, mapped, heap in
            outputs(*((["-c", LOOP, mode], {**clean, **env}) for mode, env in runs))]


def test_freed_memory_stays_in_the_heap_for_the_next_step():
    (took, mapped, heap), (_, default_mapped, default_heap) = blocks(("keep", {}), ("default", {}))
    assert took == "True"
    assert mapped < 32 and heap >= 48  # served from the heap (free space it had may take part), kept after the free
    assert default_mapped >= 64 and default_heap < 16  # glibc's default: its own mapping, unmapped again on free


def test_user_settings_and_the_switch_win():
    by_malloc, by_switch = blocks(("keep", {"MALLOC_TRIM_THRESHOLD_": "131072"}), ("keep", {"LF_KEEP_FREED_MEMORY": "0"}))
    assert by_malloc[0] == "False"
    assert by_switch[0] == "False"


def test_the_engine_entry_point_applies_it(monkeypatch, capsys):
    import engine.allocator
    from engine.cli import main

    calls = []
    monkeypatch.setattr(engine.allocator, "keep_freed_memory", lambda: calls.append("keep"))
    monkeypatch.setattr(engine.allocator, "align_large_blocks", lambda: calls.append("align"))
    main([])  # no command: prints the help
    assert calls.count("keep") == 1
    assert calls.count("align") == 1


ALIGN = r"""
import ctypes, os
from engine.allocator import PR_GET_THP_DISABLE, PR_SET_THP_DISABLE, align_large_blocks
libc = ctypes.CDLL("libc.so.6")
libc.prctl(PR_SET_THP_DISABLE, 0, 0, 0, 0)  # as a fresh process (tests calling main() set it)
took = align_large_blocks()
import torch
x = torch.ones(16 * 2**20)  # 64 MiB, touched
huge = [line.split()[1] for line in open("/proc/self/smaps_rollup") if line.startswith("AnonHugePages:")]
print(took, os.environ["THP_MEM_ALLOC_ENABLE"], libc.prctl(PR_GET_THP_DISABLE, 0, 0, 0, 0),
      x.data_ptr() % os.sysconf("SC_PAGESIZE"), huge[0] if huge else "-")
"""


def align(*envs: dict[str, str]) -> list[list[str]]:
    """What :data:`ALIGN` prints in each environment (the runs side by side)."""
    clean = {k: v for k, v in os.environ.items() if k != "THP_MEM_ALLOC_ENABLE"}
    return outputs(*((["-c", ALIGN], {**clean, **env}) for env in envs))


def test_large_tensors_are_page_aligned_without_huge_pages():
    ours, users = align({}, {"THP_MEM_ALLOC_ENABLE": "0"})
    took, setting, disabled, offset, huge_kb = ours
    assert (took, setting, disabled, offset) == ("True", "1", "1", "0")
    assert huge_kb in ("0", "-")  # the 64 MiB tensor sits on ordinary pages
    # the user's own setting wins: nothing changed
    took, setting, disabled, _, _ = users
    assert (took, setting, disabled) == ("False", "0", "0")
