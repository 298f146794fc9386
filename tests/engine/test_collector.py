"""The cyclic collector during a command's start-up (engine.collector): paused for the imports by the entry points,
frozen and back on once the long-lived objects exist; untouched in a process that did not pause it (this one);
and around the bulk data phase, paused with what was alive before it frozen."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine import collector

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def start_python(code: str, *args: str, **env: str) -> subprocess.Popen:
    """Start ``code`` in a fresh interpreter (its answer: :func:`answer`)."""
    return subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), **env})


def answer(proc: subprocess.Popen) -> dict:
    """The JSON a :func:`start_python` interpreter prints after ``RESULT ``, once it has ended."""
    try:
        stdout, stderr = proc.communicate(timeout=600)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, stderr[-3000:]
    line = [x for x in stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def run_python(code: str, *args: str, **env: str) -> dict:
    """Run ``code`` in a fresh interpreter; the JSON it prints after ``RESULT ``."""
    return answer(start_python(code, *args, **env))


def test_pause_settle_and_finish_in_a_process_of_their_own():
    code = """
import gc, json
from engine import collector
states = [collector.pause(), gc.isenabled(), gc.get_freeze_count()]
import json.decoder, email.parser  # objects made while paused
collector.settle()
states += [gc.isenabled(), gc.get_freeze_count()]
junk = [object() for _ in range(10)]
collector.settle()  # a second settle freezes what was made since
states += [gc.isenabled(), gc.get_freeze_count()]
collector.finish()
states += [gc.get_freeze_count()]
print("RESULT " + json.dumps(states))
"""
    paused, enabled_while_paused, frozen0, enabled1, frozen1, enabled2, frozen2, frozen3 = run_python(code)
    assert paused is True and enabled_while_paused is False and frozen0 == 0
    assert enabled1 is True and frozen1 > 1000  # everything imported so far
    assert enabled2 is True and frozen2 > frozen1
    assert frozen3 >= frozen2


def test_opting_out_leaves_the_collector_alone():
    code = """
import gc, json
from engine import collector
states = [collector.pause(), gc.isenabled()]
collector.settle(); collector.finish()
print("RESULT " + json.dumps(states + [gc.isenabled(), gc.get_freeze_count()]))
"""
    assert run_python(code, LF_PAUSE_GC="0") == [False, True, True, 0]


def test_settle_and_finish_do_nothing_where_the_entry_point_did_not_pause(monkeypatch):
    # this pytest process (like a notebook calling engine.cli.main) keeps its collector as it was: neither calls
    # into gc at all. (Not read off gc.get_freeze_count(): a frozen object that another thread frees while this
    # test runs leaves the permanent generation, and the count drifts by itself.)
    calls = []
    for name in ("freeze", "unfreeze", "collect", "enable", "disable"):
        monkeypatch.setattr(gc, name, lambda *a, _name=name, **k: calls.append(_name))
    enabled = gc.isenabled()
    collector.settle()
    collector.finish()
    assert calls == [] and gc.isenabled() == enabled


@pytest.fixture
def nothing_frozen():
    """This process as a notebook's is: nothing frozen (the suite's conftest freezes what the tests' imports made,
    tests/conftest.py); frozen again after."""
    gc.unfreeze()
    try:
        yield
    finally:
        gc.freeze()


def test_the_bulk_data_phase_pauses_collection_and_leaves_this_process_as_it_was(nothing_frozen):
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    assert frozen == 0  # a process that froze nothing
    with collector.bulk_phase():
        inside = gc.isenabled(), gc.get_freeze_count()
    assert inside[0] is False and inside[1] > 1000  # the modules, this test's objects: out of every walk
    assert gc.isenabled() == enabled and gc.get_freeze_count() == 0  # put back


def test_the_bulk_data_phase_leaves_what_the_process_froze_itself_frozen(nothing_frozen, monkeypatch):
    gc.freeze()  # as this suite's conftest does (or a program of its own)
    frozen = gc.get_freeze_count()
    calls = []  # what the phase asks of gc besides collecting (the count alone can drift down: see above)
    for name in ("freeze", "unfreeze"):
        monkeypatch.setattr(gc, name, lambda *a, _real=getattr(gc, name), _name=name: calls.append(_name) or _real())
    with collector.bulk_phase():
        inside = gc.isenabled(), gc.get_freeze_count()
    assert inside[0] is False and calls == []  # paused; nothing more frozen for the phase
    assert gc.isenabled() and calls == [] and gc.get_freeze_count() > frozen // 2  # and nothing thawed after it


def test_the_bulk_data_phase_in_a_command_keeps_what_it_froze():
    code = """
import gc, json
from engine import collector
collector.pause(); collector.settle()
before = gc.get_freeze_count()
tokenizer_like = [[i] for i in range(5000)]  # made after the imports settled: a tokenizer, a model
with collector.bulk_phase():
    inside = [gc.isenabled(), gc.get_freeze_count()]
print("RESULT " + json.dumps([before] + inside + [gc.isenabled(), gc.get_freeze_count()]))
"""
    before, enabled_inside, frozen_inside, enabled_after, frozen_after = run_python(code)
    assert enabled_inside is False and frozen_inside >= before + 5000
    # long-lived in a command: kept frozen (less the few frozen temporaries freed since)
    assert enabled_after is True and frozen_after >= before + 5000
    plain = run_python(code, LF_PAUSE_GC="0")
    assert plain[1:] == [True, 0, True, 0]


TRAIN = f"""
import gc, json, sys
from engine import collector
full = []
gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2 and full.append(1))
seen = []
real_settle = collector.settle
def settle():
    before = gc.isenabled()
    real_settle()
    seen.append([before, gc.isenabled(), gc.get_freeze_count()])
collector.settle = settle
sys.argv = ["lf-engine", "train", {str(EXAMPLES / "sft_lora_demo.yaml")!r}, "output_dir=" + sys.argv[1], "max_steps=2",
            "logging_steps=1", "save_strategy=no", "max_samples=16", {"dataset_dir=" + str(EXAMPLES / "data")!r}]
from engine.cli import entry
code = entry()
print("RESULT " + json.dumps({{"code": code, "full": len(full), "seen": seen}}))
"""


def test_a_training_command_imports_with_the_collector_paused_and_trains_with_it_on(tmp_path):
    # the two commands share nothing, so they run side by side
    started = [start_python(TRAIN, str(tmp_path / "paused")),
               start_python(TRAIN, str(tmp_path / "plain"), LF_PAUSE_GC="0")]  # as it would be without the pause
    try:
        paused, plain = (answer(proc) for proc in started)
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
    assert paused["code"] == 0
    assert paused["seen"][0][0] is False  # the imports ran with the collector off
    assert all(enabled for _, enabled, _ in paused["seen"])  # and it is on for the steps
    assert paused["seen"][-1][2] > 100_000  # torch, transformers, PEFT and the model frozen before the steps
    # full collections over the whole command: before, each scanned every imported object (8 on this command); now
    # the explicit ones (the data loader's, finish()'s) and those of the steps, over what was made since a settle
    assert paused["full"] <= 3
    assert plain["code"] == 0 and plain["seen"][-1][2] == 0
    assert plain["full"] > paused["full"] + 2
