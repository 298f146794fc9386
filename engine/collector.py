"""Python's cyclic garbage collector during a command's start-up, its bulk data phase, and for the long-lived objects.

Importing torch, transformers, PEFT and the Trainer creates some 500,000 Python objects that live as long as the
process. The collector scans every tracked object on each full collection, and imports trigger full collections
over and over as that population grows: on the reference workload (README "Speed") eight full collections took 0.9
s of a 17 s command, most of them during the imports, and interpreter shutdown another 0.5-1.2 s (it collects
again over the same objects). No collection frees anything worth having there (about 12,000 objects from the imports'
own temporary cycles; the process's RSS did not change).

So a command started from the command line (:func:`pause`, called by ``lf-engine``/``python -m engine`` and by
``lf-board`` before they import anything heavy) runs its imports with automatic collection off. At the point the
command's long-lived objects exist (:func:`settle`: after the imports, again before the training loop, once a chat
model is loaded, once the board's page is built) everything alive is moved into the permanent generation
(``gc.freeze``) and automatic collection is on again: from then on collections scan only what the command creates
afterwards, cycles created afterwards are collected as usual, and shutdown no longer rescans the frozen objects
(:func:`finish`, the entry point's last step, collects the command's own cycles and freezes the rest first).
Forked data workers inherit the frozen objects without the collector touching (and copying) their pages.

Loading and tokenizing a dataset (:func:`bulk_phase`) makes millions of short-lived containers, and the collector's
full walks over everything alive before it (the tokenizer and model a command loaded after its imports) cost seconds
on a large dataset: in a command, that phase settles first, so those objects stay frozen; elsewhere it freezes them
for the phase and puts them back after.

Only a process whose entry point called :func:`pause` is changed for good: code that calls ``engine.cli.main`` in a
process of its own (tests, notebooks) keeps its collector as it was. ``LF_PAUSE_GC=0`` leaves the collector alone
entirely.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_STATE = {"managed": False, "paused": False}


def pause() -> bool:
    """Turn automatic collection off for the command's start-up; True if it did (see the module docstring)."""
    if os.environ.get("LF_PAUSE_GC", "1") == "0" or not gc.isenabled():
        return False  # opted out, or someone else already manages the collector
    gc.disable()
    _STATE.update(managed=True, paused=True)
    return True


def run_command(main: Callable[[], int]) -> int:
    """An entry point's body: :func:`pause`, ``main()``, then :func:`finish` however it ends."""
    pause()
    try:
        return main()
    finally:
        finish()


def settle() -> None:
    """Freeze every object alive now (long-lived from here on) and turn automatic collection back on; a no-op in a
    process that did not :func:`pause`. Safe to call more than once: each call freezes what was created since."""
    if not _STATE["managed"]:
        return
    gc.freeze()
    if _STATE["paused"]:
        _STATE["paused"] = False
        gc.enable()


def finish() -> None:
    """At the end of a command (its entry point's last step): collect the cycles the command left, their finalizers
    running as they would at shutdown, and freeze everything still alive, so the interpreter's shutdown does not scan
    the whole heap again (after a cached data load here: 0.15 s instead of 0.4 s; 1.1-1.3 s with nothing frozen).
    A command that never settled froze nothing yet: its objects are all start-up ones and are frozen uncollected.
    A no-op in a process that did not :func:`pause`."""
    if not _STATE["managed"]:
        return
    if not _STATE["paused"]:
        gc.collect()  # only what was created since the last settle: the frozen objects are not scanned
    gc.freeze()


@contextmanager
def paused() -> Iterator[None]:
    """No automatic collection inside (for work that makes many containers and no reference cycles), the
    collector's state restored after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def bulk_phase() -> Iterator[None]:
    """Around loading and tokenizing a dataset, which makes millions of short-lived containers and no reference
    cycles of its own: no automatic collection during it (before, 2,150 young and 18 full collections took 1.7 s
    of a 21.5 s run over 100,000 rows), one collection of what it left after, and the objects alive before it
    skipped by that one.

    In a command (after :func:`pause`) the objects alive before are long-lived, so they are frozen for good
    (:func:`settle`). Elsewhere they are frozen for the phase and put back after (``gc.unfreeze``), unless the
    process froze objects itself; and nothing is changed with ``LF_PAUSE_GC=0``."""
    if os.environ.get("LF_PAUSE_GC", "1") == "0":
        yield
        return
    thaw = False
    if _STATE["managed"]:
        settle()
    elif not gc.get_freeze_count():
        gc.freeze()
        thaw = True
    try:
        with paused():
            yield
    finally:
        gc.collect()  # whatever cycles the phase left: the frozen objects are not scanned
        if thaw:
            gc.unfreeze()
