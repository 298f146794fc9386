"""A real browser (Debian's chromium through Playwright) drives a live board: start the demo run, see the loss
chart fill, go to Chat and Load what was just trained, reload without losing the run, and switch the page to
Chinese.

The top bar's checkpoint picker stayed on "None (base model)" after the run completed, so Chat's Load said "Ready:
demo, no adapter" and the newcomer chatted with the untrained model without noticing. The page that started the run
now has the picker take the run's final adapter (and says so under the picker); another page is left as it was.

One board and one demo run for all of it (two tests trained the same 16-step run on two boards before).

Set LF_BOARD_SCREENSHOT=path to save a screenshot of the Train tab mid-run (how assets/screenshot.png is made), and
LF_BOARD_ADAPTER_SHOTS=folder to keep the screenshots of the completed run and of Chat's Load.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, kept_on_failure, wait_for, watch_network

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN_TIMEOUT = 600  # the demo run takes about a minute on a quiet 2-core machine; much longer under load


def loss_points(page) -> int:
    """Points drawn in the loss chart (vega draws each series as one path; count its segments)."""
    return page.evaluate(
        "[...document.querySelectorAll('#lf-loss-plot .mark-line path')]"
        ".map(p => (p.getAttribute('d') || '').split('L').length - 1).reduce((a, b) => a + b, 0)"
    )


def tab_labels(page) -> list[str]:
    return [text.strip() for text in page.locator("#lf-tabs button[role=tab]").all_inner_texts()]


def shoot(page, name: str) -> None:
    folder = os.environ.get("LF_BOARD_ADAPTER_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


def open_page(browser, url: str):
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector(".gradio-container", timeout=60_000)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    return page


def picker_text(page) -> str:
    return page.locator("#lf-checkpoint input").input_value()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_train_the_demo_watch_loss_chat_with_its_adapter_and_switch_language(live_board, browser):
    url, workspace = live_board
    page = open_page(browser, url)
    other = open_page(browser, url)  # a second page, open while the first one trains
    seen = watch_network(page)
    with kept_on_failure(page, workspace.parent, "demo-run", seen):
        assert tab_labels(page)[:2] == ["Train", "Evaluate"]
        # the fresh workspace preselects the demo model and the demo datasets
        assert "demo_identity" in page.locator("#lf-dataset").inner_text()
        wait_for(lambda: "No run yet" in page.locator("#lf-train-status").inner_text(), 30, "the empty status")
        wait_for(lambda: picker_text(page) == "None (base model)", 30, "the base model in the picker")
        # one epoch instead of the demo's ten (16 steps, each logged; CI's time), typed as a person would
        epochs = page.locator("#cfg-num_train_epochs input")
        epochs.fill("1")
        epochs.press("Tab")

        shot = os.environ.get("LF_BOARD_SCREENSHOT")
        if shot:  # fold the long panels so that the picture shows the form, the progress and the charts
            for title in ("Hyperparameters", "LoRA"):
                page.get_by_text(title, exact=True).first.click()
        page.locator("#lf-train-start").click()
        wait_for(lambda: "started" in page.locator("#lf-train-message").inner_text(), 30, "the start message")
        run_id = next((workspace / "runs").iterdir()).name
        wait_for(lambda: loss_points(page) >= 3, RUN_TIMEOUT, "points on the loss chart")
        status = page.locator("#lf-train-status").inner_text()
        assert "step" in status and "loss" in status
        if shot:
            wait_for(
                lambda: loss_points(page) >= 20 or "completed" in page.locator("#lf-train-status").inner_text(),
                RUN_TIMEOUT,
                "a longer curve",
            )
            page.screenshot(path=shot, full_page=True)

        wait_for(lambda: "completed" in page.locator("#lf-train-status").inner_text(), RUN_TIMEOUT, "the run's end")
        import yaml

        assert yaml.safe_load((workspace / "runs" / run_id / "config.yaml").read_text())["num_train_epochs"] == 1
        points = loss_points(page)
        assert points >= 10

        # the page that started the run: its picker takes the run's final adapter, not one of its checkpoints
        followed = page.locator("#lf-checkpoint-followed")
        wait_for(lambda: followed.is_visible() and run_id in followed.inner_text(), 30, "the line under the picker")
        assert picker_text(page) == run_id
        # "Run ... started." does not stay under Start once the run ended (its status card says "completed")
        wait_for(lambda: page.locator("#lf-train-message").inner_text().strip() == "", 30, "the start line to go")
        shoot(page, "train-completed-en.png")

        # Chat's Load loads what was just trained
        page.get_by_role("tab", name="Chat").click()
        page.locator("#lf-chat-load").click()
        chat_status = page.locator("#lf-chat-status")
        wait_for(lambda: "Ready" in chat_status.inner_text(), RUN_TIMEOUT, "the chat worker")
        ready = chat_status.inner_text()
        assert "with adapter" in ready and run_id in ready and "no adapter" not in ready
        shoot(page, "chat-ready-en.png")

    # the other page did not start the run: its picker stays on the base model (the run is listed in it)
    other.locator("#lf-refresh, .lf-refresh").first.click()
    other.wait_for_timeout(2000)
    assert picker_text(other) == "None (base model)"
    assert not other.locator("#lf-checkpoint-followed").is_visible()
    other.context.close()  # done with it: an open page's timers keep taking CPU from the next one

    # a reload keeps the run view (the watched run is stored in the browser)
    page.reload()
    page.wait_for_selector("#lf-train-status", timeout=60_000)
    page.get_by_role("tab", name="Train").click()
    wait_for(lambda: run_id in page.locator("#lf-train-status").inner_text(), 30, "the run after reload")
    wait_for(lambda: loss_points(page) >= points, 30, "the loss curve after reload")

    # switch the page to Chinese with the language picker
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name="中文").click()
    wait_for(lambda: tab_labels(page)[:2] == ["训练", "评估"], 30, "Chinese tab labels")
    wait_for(lambda: "已完成" in page.locator("#lf-train-status").inner_text(), 30, "a Chinese status")
    assert page.get_by_text("超参数", exact=True).count() >= 1
    page.context.close()

    # a browser whose language is Chinese gets the Chinese page directly
    zh_page = browser.new_context(locale="zh-CN").new_page()
    zh_page.goto(url)
    zh_page.wait_for_selector("#lf-train-start", timeout=60_000)
    wait_for(lambda: tab_labels(zh_page)[:1] == ["训练"], 30, "Chinese labels for a zh-CN browser")
    assert zh_page.locator("#lf-train-start").inner_text().strip() == "开始"
