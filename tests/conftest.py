"""Project-wide test settings: offline, no trackers, a private cache for the demo model."""

import gc
import os
import sys
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("WANDB_DISABLED", "true")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")
# No tokenized-data cache unless a test asks for one (tests that count tokenizer calls or workers stay exact).
os.environ.setdefault("LF_ENGINE_CACHE", "off")
# The demo model is built once per test session into a private folder (never the user's cache).
os.environ.setdefault("LF_BOARD_HOME", str(Path(tempfile.gettempdir()) / f"lfboard-test-home-{os.getuid()}"))

REPO_ROOT = Path(__file__).resolve().parent.parent
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


class FakeClock:
    """A clock for code that takes ``clock=``: starts at 1000.0 and moves only when a test sets ``now``."""

    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture(autouse=True)
def _process_exit_restored():
    """A run with user rewards makes os._exit raise in its process (engine.rewards.guard.refuse_process_exit);
    tests run those in this process, so each test gets the real one back."""
    import os
    import posix

    real = os._exit, posix._exit
    yield
    os._exit, posix._exit = real


_MODULES_AT_LAST_FREEZE = [0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After a test that imported modules (once its fixtures are torn down): collect, then freeze what is alive
    (gc.freeze), as a command does once its imports are done (engine.collector.settle). torch, transformers, PEFT,
    TRL, gradio and the like are imported lazily by the tests that need them: some 500,000 objects that live as long
    as this process, and every full collection walked them all again (about a second each on a loaded 2-core machine;
    one or more per in-process training run: accelerate's free_memory, the data phase's collection, the collector's
    own thresholds). Frozen, a collection walks only what was made since. What a test makes is collected as before;
    what is alive at a freeze (the modules, a module-scoped fixture's value) is no longer scanned for cycles."""
    yield
    modules = len(sys.modules)
    if modules != _MODULES_AT_LAST_FREEZE[0]:
        _MODULES_AT_LAST_FREEZE[0] = modules
        gc.collect()
        gc.freeze()
