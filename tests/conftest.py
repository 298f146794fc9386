"""Project-wide test settings: offline, no trackers, a private cache for the demo model."""

import os
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
