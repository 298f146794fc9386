"""A newcomer's path in a real browser: train the demo, go to Chat, Load, and chat with what was just trained.

The top bar's checkpoint picker stayed on "None (base model)" after the run completed, so Chat's Load said "Ready:
demo, no adapter" and the newcomer chatted with the untrained model without noticing. The page that started the run
now has the picker take the run's final adapter (and says so under the picker); another page is left as it was.

Set LF_BOARD_ADAPTER_SHOTS=folder to keep the screenshots.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, kept_on_failure, wait_for, watch_network

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT = 600  # the demo run takes about a minute on a quiet 2-core machine; much longer under load


def shoot(page, name: str) -> None:
    folder = os.environ.get("LF_BOARD_ADAPTER_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def open_page(browser, url: str):
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    return page


def picker_text(page) -> str:
    return page.locator("#lf-checkpoint input").input_value()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_train_the_demo_then_chat_loads_the_trained_adapter(live_board, browser):
    url, workspace = live_board
    page = open_page(browser, url)
    other = open_page(browser, url)  # a second page, open while the first one trains
    seen = watch_network(page)
    with kept_on_failure(page, workspace.parent, "trained-adapter", seen):
        wait_for(lambda: picker_text(page) == "None (base model)", 30, "the base model in the picker")
        epochs = page.locator("#cfg-num_train_epochs input")
        epochs.fill("1")
        epochs.press("Tab")
        page.locator("#lf-train-start").click()
        wait_for(lambda: "started" in page.locator("#lf-train-message").inner_text(), 30, "the start message")
        run_id = next((workspace / "runs").iterdir()).name
        wait_for(lambda: "completed" in page.locator("#lf-train-status").inner_text(), RUN_TIMEOUT, "the run's end")
        followed = page.locator("#lf-checkpoint-followed")
        wait_for(lambda: followed.is_visible() and run_id in followed.inner_text(), 30, "the line under the picker")
        assert picker_text(page) == run_id  # the run's final adapter, not one of its checkpoints
        # "Run ... started." does not stay under Start once the run ended (its status card says "completed")
        wait_for(lambda: page.locator("#lf-train-message").inner_text().strip() == "", 30, "the start line to go")
        shoot(page, "train-completed-en.png")

        page.get_by_role("tab", name="Chat").click()
        page.locator("#lf-chat-load").click()
        status = page.locator("#lf-chat-status")
        wait_for(lambda: "Ready" in status.inner_text(), RUN_TIMEOUT, "the chat worker")
        ready = status.inner_text()
        assert "with adapter" in ready and run_id in ready and "no adapter" not in ready
        shoot(page, "chat-ready-en.png")

    # the other page did not start the run: its picker stays on the base model (the run is listed in it)
    other.locator("#lf-refresh, .lf-refresh").first.click()
    other.wait_for_timeout(2000)
    assert picker_text(other) == "None (base model)"
    assert not other.locator("#lf-checkpoint-followed").is_visible()
