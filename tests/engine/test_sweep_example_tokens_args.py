"""tests/golden/sweep_example_tokens.py, which the README names: `--help`, or a run without `--examples DIR`, ended
in a ValueError traceback (`'--examples' is not in list`) instead of saying what to pass."""

from __future__ import annotations

import sys

import pytest

from tests.golden import sweep_example_tokens


@pytest.mark.parametrize("argv", [["--help"], ["-h", "--examples"]])
def test_help_prints_the_usage(monkeypatch, capsys, argv):
    monkeypatch.setattr(sys, "argv", ["sweep_example_tokens", *argv])
    assert sweep_example_tokens.main() == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python -m tests.golden.sweep_example_tokens --examples DIR") and "--data" in out


@pytest.mark.parametrize(("argv", "message"), [
    (["--incumbent", "python", "--data", "d"], "--examples DIR is required"),
    (["--data", "d", "--examples"], "--examples DIR is required"),
    (["--examples", "/no/such/examples"], "--examples /no/such/examples is not a folder"),
])
def test_a_missing_examples_folder_is_named(monkeypatch, capsys, argv, message):
    monkeypatch.setattr(sys, "argv", ["sweep_example_tokens", *argv])
    monkeypatch.setattr(sweep_example_tokens.sweep_compat, "main", lambda: pytest.fail("nothing should run"))
    assert sweep_example_tokens.main() == 2
    assert message in capsys.readouterr().err
