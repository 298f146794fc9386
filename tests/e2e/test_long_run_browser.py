"""A long run in a real browser (Debian's chromium through Playwright): a 20,000-step run's loss chart on the Train
tab and in History's overlay is drawn from at most app.curves.LIMIT points per series, and its loss spike is on it.

Set LF_BOARD_SCREENSHOT_DIR=folder to keep the screenshots (train-long-run.png, history-long-run.png).
"""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest

from app.curves import LIMIT
from tests.e2e.conftest import CHROMIUM, wait_for
from tests.e2e.test_board_polish_browser import pick_and_watch

pytestmark = [pytest.mark.browser, pytest.mark.slow]

STEPS = 20_000
SPIKE_STEP, SPIKE = 15_000, 9.0


def long_run(workspace: Path, run_id: str) -> None:
    """A completed run that logged every step for 20,000 steps (one loss spike) and evaluated every 500."""
    run = workspace / "runs" / run_id
    run.mkdir(parents=True)
    now = time.time()
    (run / "config.yaml").write_text(f"model_name_or_path: demo\nstage: sft\noutput_dir: {run}\n")
    lines = [json.dumps({"time": now - 100, "event": "start", "total_steps": STEPS})]
    for step in range(1, STEPS + 1):
        loss = SPIKE if step == SPIKE_STEP else 2.0 / (1 + step / 2000)
        lines.append(json.dumps({"time": now - 100, "event": "log", "step": step, "total_steps": STEPS, "loss": loss,
                                 "lr": 1e-4 * (1 - step / STEPS)}))
        if step % 500 == 0:
            lines.append(json.dumps({"time": now - 100, "event": "eval", "step": step, "eval_loss": 1.2}))
    lines.append(json.dumps({"time": now, "event": "end", "status": "completed", "error": None, "metrics": {}}))
    (run / "events.jsonl").write_text("\n".join(lines) + "\n")
    (run / "stdout.log").write_text("done\n")
    (run / "run.json").write_text(json.dumps({"id": run_id, "kind": "train", "status": "completed",
                                              "created_at": now - 110, "started_at": now - 100, "finished_at": now,
                                              "exit_code": 0}))


def chart(page, selector: str) -> dict:
    """Points per drawn line (vega draws each series as one path) and the y axis' largest label."""
    return page.evaluate(
        f"""(() => {{
        const paths = [...document.querySelectorAll('{selector} .mark-line path')];
        const labels = [...document.querySelectorAll('{selector} .role-axis-label text')]
            .map(t => parseFloat(t.textContent.replace(/,/g, ''))).filter(x => !isNaN(x));
        return {{points: paths.map(p => (p.getAttribute('d') || '').split('L').length), labels}};
    }})()"""
    )


def shoot(page, tmp_path: Path, name: str) -> None:
    folder = Path(os.environ.get("LF_BOARD_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(folder / name), full_page=False)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_long_runs_curves_are_bounded_and_keep_the_spike(shared_board, browser, tmp_path):
    url, workspace = shared_board
    run_id = "20261203-000002-train-long"
    long_run(workspace, run_id)
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    pick_and_watch(page, run_id)
    wait_for(lambda: sum(chart(page, "#lf-loss-plot")["points"]) > 100, 60, "the long run's loss chart")
    time.sleep(1.0)
    drawn = chart(page, "#lf-loss-plot")
    assert len(drawn["points"]) == 2 and max(drawn["points"]) <= LIMIT  # training and eval loss
    assert max(drawn["labels"]) >= SPIKE - 1  # the y axis reaches the spike
    lr = chart(page, "#lf-lr-plot")
    assert 100 < sum(lr["points"]) <= LIMIT
    page.locator("#lf-loss-plot").scroll_into_view_if_needed()
    shoot(page, tmp_path, "train-long-run.png")

    page.locator("#lf-tabs button[role=tab]").nth(4).click()
    page.get_by_role("button", name=re.compile("^Compare$")).first.click()
    wait_for(lambda: sum(chart(page, "#lf-runs-overlay")["points"]) > 100, 60, "the History overlay")
    overlay = chart(page, "#lf-runs-overlay")
    assert len(overlay["points"]) == 1 and overlay["points"][0] <= LIMIT
    assert max(overlay["labels"]) >= SPIKE - 1
    page.locator("#lf-runs-overlay").scroll_into_view_if_needed()
    shoot(page, tmp_path, "history-long-run.png")
