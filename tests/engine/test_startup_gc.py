"""The cyclic collector during a command's start-up (engine.startup_gc): paused for the imports by the entry points,
frozen and back on once the long-lived objects exist; untouched in a process that did not pause it (this one)."""

import gc
import json
import os
import subprocess
import sys
from pathlib import Path

from engine import startup_gc

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"


def run_python(code: str, **env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO), **env})
    assert out.returncode == 0, out.stderr[-3000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def test_pause_settle_and_finish_in_a_process_of_their_own():
    code = """
import gc, json
from engine import startup_gc
states = [startup_gc.pause(), gc.isenabled(), gc.get_freeze_count()]
import json.decoder, email.parser  # objects made while paused
startup_gc.settle()
states += [gc.isenabled(), gc.get_freeze_count()]
junk = [object() for _ in range(10)]
startup_gc.settle()  # a second settle freezes what was made since
states += [gc.isenabled(), gc.get_freeze_count()]
startup_gc.finish()
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
from engine import startup_gc
states = [startup_gc.pause(), gc.isenabled()]
startup_gc.settle(); startup_gc.finish()
print("RESULT " + json.dumps(states + [gc.isenabled(), gc.get_freeze_count()]))
"""
    assert run_python(code, LF_PAUSE_GC="0") == [False, True, True, 0]


def test_settle_and_finish_do_nothing_where_the_entry_point_did_not_pause():
    # this pytest process (like a notebook calling engine.cli.main) keeps its collector as it was
    enabled, frozen = gc.isenabled(), gc.get_freeze_count()
    startup_gc.settle()
    startup_gc.finish()
    assert gc.isenabled() == enabled and gc.get_freeze_count() == frozen


TRAIN = f"""
import gc, json, sys
from engine import startup_gc
full = []
gc.callbacks.append(lambda phase, info: phase == "start" and info["generation"] == 2 and full.append(1))
seen = []
real_settle = startup_gc.settle
def settle():
    before = gc.isenabled()
    real_settle()
    seen.append([before, gc.isenabled(), gc.get_freeze_count()])
startup_gc.settle = settle
sys.argv = ["lf-engine", "train", {str(EXAMPLES / "sft_lora_demo.yaml")!r}, "output_dir=" + sys.argv[1], "max_steps=2",
            "logging_steps=1", "save_strategy=no", "max_samples=16", {"dataset_dir=" + str(EXAMPLES / "data")!r}]
from engine.cli import entry
code = entry()
print("RESULT " + json.dumps({{"code": code, "full": len(full), "seen": seen}}))
"""


def test_a_training_command_imports_with_the_collector_paused_and_trains_with_it_on(tmp_path):
    def train(name: str, **env: str) -> dict:
        out = subprocess.run([sys.executable, "-c", TRAIN, str(tmp_path / name)], capture_output=True, text=True,
                             cwd=REPO, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO), **env})
        assert out.returncode == 0, out.stderr[-3000:]
        line = [x for x in out.stdout.splitlines() if x.startswith("RESULT ")][-1]
        return json.loads(line[len("RESULT "):])

    paused = train("paused")
    assert paused["code"] == 0
    assert paused["seen"][0][0] is False  # the imports ran with the collector off
    assert all(enabled for _, enabled, _ in paused["seen"])  # and it is on for the steps
    assert paused["seen"][-1][2] > 100_000  # torch, transformers, PEFT and the model frozen before the steps
    # full collections over the whole command: before, each scanned every imported object (8 on this command); now
    # the explicit ones (the data loader's, finish()'s) and those of the steps, over what was made since a settle
    assert paused["full"] <= 3
    plain = train("plain", LF_PAUSE_GC="0")  # what the test would see without the pause
    assert plain["code"] == 0 and plain["seen"][-1][2] == 0
    assert plain["full"] > paused["full"] + 2
