"""Pure helpers of the hand-run benchmarks (examples/benchmark): reply figures, timer schedules, the page's timers."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "examples" / "benchmark"))
from chat_drivers import reply_figures, summarise  # noqa: E402
from heap_pattern import one_pass  # noqa: E402
from page_poller import TRAIN_RUN_KEY, due, input_values, watching_events  # noqa: E402
from run_vlm_benchmark import images_trained  # noqa: E402


def test_reply_figures():
    figures = reply_figures(sent=10.0, stamps=[10.5, 11.0, 12.5], ended=12.5, tokens=9)
    assert figures["first"] == pytest.approx(0.5)
    assert figures["tps"] == pytest.approx(9 / 2.5)
    assert figures["decode_tps"] == pytest.approx(8 / 2.0)
    empty = reply_figures(sent=1.0, stamps=[], ended=2.0, tokens=0)
    assert empty["first"] is None and empty["decode_tps"] is None and empty["tps"] == 0


def test_summarise_keeps_the_cold_reply_apart():
    replies = [{"sent": 0.0, "stamps": [3.0], "ended": 4.0, "tokens": 4},
               {"sent": 0.0, "stamps": [0.1], "ended": 1.0, "tokens": 10},
               {"sent": 0.0, "stamps": [0.3], "ended": 2.0, "tokens": 10}]
    out = summarise(replies)
    assert out["first_cold"] == pytest.approx(3.0)
    assert out["first"] == pytest.approx(0.2)  # median of the later replies only
    assert out["tps"] == pytest.approx(7.5)
    assert out["tokens"] == 10


def test_timers_fire_at_their_own_interval():
    assert [sum(due(interval, s) for s in range(1, 13)) for interval in (1.0, 1.5, 2.0, 4.0)] == [12, 8, 6, 3]


def test_the_page_watching_a_run_has_the_train_tab_and_top_bar_timers(board):
    from app.ui import build_ui

    config = build_ui(board).get_config_file()
    events = watching_events(config)
    assert sorted(e["interval"] for e in events) == [1.0, 2.0, 4.0]  # Train tab status, its RL panel, top bar
    tick = next(e for e in events if e["interval"] == 1.0)
    values = input_values(config, tick, {TRAIN_RUN_KEY: "run-1"})
    # watched run (BrowserState), seen (server-side State), language, the line under Start and what it follows
    assert values == ["run-1", None, "en", None, None]


def test_the_heap_pattern_keeps_a_decoder_layers_activations_per_layer():
    kept = one_pass(tokens=3, hidden=8, inter=20, layers=2)
    # per layer: two normalized inputs, q, k, v and the attention output (hidden wide), gate and up (inter wide)
    assert len(kept) == 16 and [t.numel() for t in kept[:8]] == [24] * 6 + [60] * 2
    assert len({t.data_ptr() for t in kept}) == 16


@pytest.mark.parametrize("script", sorted(p.name for p in (Path(__file__).resolve().parents[2] / "examples" /
                                                             "benchmark").glob("run_*.py")))
def test_every_benchmark_script_answers_help_without_running(script):
    """The README lists these scripts; `--help` must print their usage and exit, never start a benchmark."""
    import subprocess

    repo = Path(__file__).resolve().parents[2]
    out = subprocess.run([sys.executable, f"examples/benchmark/{script}", "--help"], cwd=repo, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("usage:")


def _imports_of_ours(tree) -> list[tuple[str, str, int]]:
    """(module, name, line) of every ``from engine...|app... import name`` in a tree, and in the code strings a
    script runs in another process (``python -c CODE``)."""
    import ast

    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in ("engine", "app"):
            found += [(node.module, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "import " in node.value:
            try:
                inner = ast.parse(node.value)
            except SyntaxError:
                continue
            found += _imports_of_ours(inner)
    return found


def test_the_benchmark_scripts_import_names_our_modules_still_have():
    """run_data_benchmark's own side imported ``engine.cli._setup_logging`` long after it was renamed, and the
    script failed at once; scripts run by hand get no other check."""
    import ast
    import importlib

    folder = Path(__file__).resolve().parents[2] / "examples" / "benchmark"
    missing, seen = [], 0
    for script in sorted(folder.glob("*.py")):
        for module, name, line in _imports_of_ours(ast.parse(script.read_text(encoding="utf-8"))):
            seen += 1
            if not hasattr(importlib.import_module(module), name):
                try:
                    importlib.import_module(f"{module}.{name}")
                except ImportError:
                    missing.append(f"{script.name}:{line}: from {module} import {name}")
    assert seen > 10 and missing == []


def test_vlm_benchmark_counts_the_images_the_run_trained_on():
    """`run_vlm_benchmark.py max_steps=2` divided the whole epoch's 144 images by two steps' time (322 images/s
    where 8 were seen); the images are those of the epochs the last logged step covered."""
    assert images_trained(144, {"epoch": 1.0}) == 144
    assert images_trained(144, {"epoch": 8 / 144}) == pytest.approx(8)
    assert images_trained(144, {"epoch": 2.0}) == 288
