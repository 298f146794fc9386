"""History's compare in a real browser (Debian's chromium through Playwright), in English and Chinese: the overlay's
step axis shows whole steps only (vega put ticks at 0.2 steps over a short run: app/page_script.py hides them), the
config table leaves out what a predict run never reads and says so, and a run that never evaluated has no "eval loss"
in its loss chart's legend. Screenshots land in the test's folder."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import pytest
import yaml

from engine.config.loader import RunConfig
from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUNS = {"20261207-000101-train-cmpa": ("train", 5, {"lora_rank": 16, "learning_rate": 1e-4}),
        "20261207-000102-train-cmpb": ("train", 6, {"learning_rate": 2e-4}),
        "20261207-000103-predict-cmpc": ("predict", 2, {"do_train": False, "do_predict": True, "temperature": 0.5})}

# each x-axis label of a chart: its text, and whether it is shown
X_LABELS = """(sel) => [...document.querySelectorAll(sel + ' .role-axis[aria-label^="X-axis"] .role-axis-label text')]
  .map(t => [t.textContent, getComputedStyle(t).display !== 'none'])"""


def write_run(workspace: Path, run_id: str, kind: str, steps: int, keys: dict) -> None:
    """A completed run folder as the engine leaves one: its config.yaml complete (every key, defaults included)."""
    run = workspace / "runs" / run_id
    run.mkdir(parents=True)
    now = time.time()
    config = RunConfig().to_dict() | {"model_name_or_path": "demo", "output_dir": str(run)} | keys
    (run / "config.yaml").write_text(yaml.safe_dump(config))
    events = [{"time": now - 50, "event": "start", "total_steps": steps}]
    if kind == "train":
        events += [{"time": now - 50, "event": "log", "step": i, "total_steps": steps, "loss": 2.0 / i ** 0.3,
                    "lr": 1e-4} for i in range(1, steps + 1)]
    events.append({"time": now, "event": "end", "status": "completed", "error": None, "metrics": {}})
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "stdout.log").write_text("done\n")
    (run / "run.json").write_text(json.dumps({"id": run_id, "kind": kind, "status": "completed", "exit_code": 0,
                                              "created_at": now - 60, "started_at": now - 50, "finished_at": now}))


def pick(page, run_id: str) -> None:
    page.mouse.click(5, 5)  # out of the picker, so that the next click opens its list again
    box = page.locator("#lf-runs-selected input")
    box.click()
    box.fill(run_id)
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.keyboard.press("Escape")


def texts(page, selector: str) -> list[str]:
    return page.evaluate("(sel) => [...document.querySelectorAll(sel)].map(t => t.textContent)", selector)


def compare_and_watch(page, url: str, shots: Path, locale: str, not_used: str, train_loss: str) -> None:
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.locator("#lf-tabs button[role=tab]").nth(4).click()
    wait_for(lambda: "cmpc" in page.locator("#lf-runs-table").inner_text(), 30, "the runs in History")
    for run_id in RUNS:
        pick(page, run_id)
    page.get_by_role("button", name=re.compile("^(Compare|对比|比较)$")).first.click()
    wait_for(lambda: len(page.evaluate(X_LABELS, "#lf-runs-overlay")) > 0, 30, "the overlay's step axis")
    time.sleep(0.5)
    labels = page.evaluate(X_LABELS, "#lf-runs-overlay")
    shown = [text for text, visible in labels if visible]
    assert shown == ["1", "2", "3", "4", "5", "6"], labels  # whole steps, not "1.0 1.2 1.4 ..."
    assert all(float(text) != int(float(text)) for text, visible in labels if not visible), labels
    table = page.locator("#lf-runs-diff").inner_text()
    assert "lora_rank" in table and not_used in table and "num_train_epochs" not in table, table
    page.screenshot(path=str(shots / f"compare-{locale}.png"), full_page=True)
    # the Train tab watching a run that never evaluated: its legend names the training loss only
    page.mouse.click(5, 5)
    page.locator("#lf-runs-selected .remove-all").click()
    pick(page, "20261207-000101-train-cmpa")
    page.get_by_role("button", name=re.compile("^(Watch|查看)$")).first.click()
    legend = "#lf-loss-plot .role-legend-label text"
    wait_for(lambda: texts(page, legend), 30, "the loss chart's legend")
    assert texts(page, legend) == [train_loss]
    assert [text for text, visible in page.evaluate(X_LABELS, "#lf-loss-plot") if visible] == ["1", "2", "3", "4", "5"]
    page.locator("#lf-loss-plot").screenshot(path=str(shots / f"watch-{locale}.png"))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_compare_shows_whole_steps_and_what_a_run_does_not_use(shared_board, browser, tmp_path):
    url, workspace = shared_board
    for run_id, (kind, steps, keys) in RUNS.items():
        write_run(workspace, run_id, kind, steps, keys)
    shots = Path(os.environ.get("LF_BOARD_SCREENSHOT_DIR") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    for locale, not_used, train_loss in (("en-US", "— not used by predict runs", "training loss"),
                                         ("zh-CN", "—（预测任务不使用此项）", "训练损失")):
        page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000}).new_page()
        compare_and_watch(page, url, shots, locale, not_used, train_loss)
        page.context.close()
