"""The time-by-phase line of a training command: every phase present, in order, adding up to the whole."""

from __future__ import annotations

import logging
import re

from engine.train import phases
from tests.engine.test_methods import run, tiny  # noqa: F401  (the tiny model fixture)


def test_process_age_is_positive_and_a_phase_ends_once():
    first = phases.process_age()
    assert first > 0
    phases.start()
    phases.mark("a")
    phases.mark("a")  # marked twice: keeps its first end
    assert list(phases.summary()) == ["a"]


def test_a_training_run_logs_time_by_phase(tiny, tmp_path, caplog):  # noqa: F811
    with caplog.at_level(logging.INFO, logger="engine.train.phases"):
        assert run(tiny, tmp_path / "run") == 0
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("Time: ")]
    assert len(lines) == 1, lines
    names = re.findall(r"([a-z ]+) [0-9.]+ s", lines[0].removeprefix("Time: ").split(" (")[0])
    assert [n.strip(", ") for n in names] == ["imports", "model", "data", "trainer", "first step", "steps", "saving"]
    seconds = phases.summary()
    total = float(re.search(r"\(([0-9.]+) s in all\)", lines[0]).group(1))
    assert abs(sum(seconds.values()) - total) < 0.1 + 0.01 * total
    assert seconds["first step"] > 0 and seconds["model"] > 0
