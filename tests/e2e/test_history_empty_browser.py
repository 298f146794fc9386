"""A fresh workspace in a real browser (Debian's chromium through Playwright): History says there are no runs yet and
where to start one, in the page's language (a switch included); once a run exists the line goes, the run shows in
the table, and its adapter and checkpoint show in the top bar's checkpoint picker, without a reload (the top bar's
timer keeps the picker up to date while it skips every tick where nothing changed)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_ID = "20261207-170000-train-empty1"


def write_trained_run(workspace: Path) -> Path:
    """A completed training run with its adapter and one checkpoint (whole, if empty, safetensors files)."""
    run = workspace / "runs" / RUN_ID
    checkpoint = run / "checkpoint-2"
    checkpoint.mkdir(parents=True)
    header = b"{}"
    for folder in (run, checkpoint):
        (folder / "adapter_config.json").write_text("{}")
        (folder / "adapter_model.safetensors").write_bytes(len(header).to_bytes(8, "little") + header)
    now = time.time()
    (run / "config.yaml").write_text(f"model_name_or_path: demo\nstage: sft\noutput_dir: {run}\n")
    (run / "run.json").write_text(json.dumps({"id": RUN_ID, "kind": "train", "status": "completed", "exit_code": 0,
                                              "created_at": now - 60, "started_at": now - 50, "finished_at": now}))
    return run


def switch(page, language: str) -> None:
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name=language).click()


def checkpoint_options(page) -> list[str]:
    page.locator("#lf-checkpoint input").click()
    options = page.get_by_role("option").all_inner_texts()
    page.keyboard.press("Escape")
    page.mouse.click(5, 5)
    return options


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_history_says_there_are_no_runs_and_a_new_run_replaces_the_line(live_board, browser, tmp_path):
    url, workspace = live_board
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.get_by_role("tab", name="History").click()
    empty = page.locator("#lf-runs-empty")
    wait_for(lambda: empty.is_visible() and "No runs yet" in empty.inner_text(), 30, "the empty History line")
    assert "Train tab" in empty.inner_text()
    page.screenshot(path=str(tmp_path / "history-empty-en.png"))

    switch(page, "中文")
    wait_for(lambda: "还没有运行记录" in empty.inner_text(), 30, "the line in Chinese")
    assert "训练" in empty.inner_text() and "No runs yet" not in empty.inner_text()
    page.screenshot(path=str(tmp_path / "history-empty-zh.png"))
    assert not any(RUN_ID in option for option in checkpoint_options(page))

    run = write_trained_run(workspace)
    table = page.locator("#lf-runs-table")
    wait_for(lambda: RUN_ID in table.inner_text(), 30, "the new run in the table")  # History's own 4 s timer
    wait_for(lambda: not empty.is_visible(), 10, "the empty line to go")
    found = wait_for(lambda: [o for o in checkpoint_options(page) if RUN_ID in o], 45, "the new checkpoints",
                     every=2)  # no run is live: the top bar refreshes every IDLE_TICK (30 s)
    assert any(re.search(r"checkpoint-2", option) for option in found), found
    assert any(option.strip() == RUN_ID for option in found), found
    assert run.is_dir()
