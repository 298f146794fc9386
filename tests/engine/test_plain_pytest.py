"""The suite runs as `pytest` too, not only as the README's `python -m pytest`."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_plain_pytest_imports_the_engine_not_the_tests_folder():
    """`python -m pytest` puts the working folder on sys.path; the `pytest` script does not, and without the
    repository root there `import engine` found tests/engine (a namespace package) first: every engine test failed
    to import ("cannot import name '__version__' from 'engine'")."""
    script = Path(sys.executable).with_name("pytest")
    if not script.exists():
        pytest.skip(f"no pytest script beside {sys.executable}")
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    done = subprocess.run([str(script), "-q", "--co", "-p", "no:cacheprovider", "tests/engine/test_adapter_fit.py"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "test_adapter_fit.py::" in done.stdout
