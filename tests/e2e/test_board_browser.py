"""A real browser (Debian's chromium through Playwright) drives a live board: start the demo run, see the loss
chart fill, reload without losing the run, and switch the page to Chinese.

Set LF_BOARD_SCREENSHOT=path to save a screenshot of the Train tab mid-run (how assets/screenshot.png is made).
"""

from __future__ import annotations

import os

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

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


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_start_demo_run_watch_loss_and_switch_language(live_board, browser):
    url, workspace = live_board
    context = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100})
    page = context.new_page()
    page.goto(url)
    page.wait_for_selector(".gradio-container", timeout=60_000)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    assert tab_labels(page)[:2] == ["Train", "Evaluate"]
    # the fresh workspace preselects the demo model and the demo datasets
    assert "demo_identity" in page.locator("#lf-dataset").inner_text()
    wait_for(lambda: "No run yet" in page.locator("#lf-train-status").inner_text(), 30, "the empty status")
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

    wait_for(
        lambda: "completed" in page.locator("#lf-train-status").inner_text(),
        RUN_TIMEOUT,
        "the run to complete",
    )
    run_id = next((workspace / "runs").iterdir()).name
    import yaml

    assert yaml.safe_load((workspace / "runs" / run_id / "config.yaml").read_text())["num_train_epochs"] == 1
    points = loss_points(page)
    assert points >= 10

    # a reload keeps the run view (the watched run is stored in the browser)
    page.reload()
    page.wait_for_selector("#lf-train-status", timeout=60_000)
    wait_for(lambda: run_id in page.locator("#lf-train-status").inner_text(), 30, "the run after reload")
    wait_for(lambda: loss_points(page) >= points, 30, "the loss curve after reload")

    # switch the page to Chinese with the language picker
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name="中文").click()
    wait_for(lambda: tab_labels(page)[:2] == ["训练", "评估"], 30, "Chinese tab labels")
    wait_for(lambda: "已完成" in page.locator("#lf-train-status").inner_text(), 30, "a Chinese status")
    assert page.get_by_text("超参数", exact=True).count() >= 1
    context.close()  # done with it: an open page's timers keep taking CPU from the next one

    # a browser whose language is Chinese gets the Chinese page directly
    zh_page = browser.new_context(locale="zh-CN").new_page()
    zh_page.goto(url)
    zh_page.wait_for_selector("#lf-train-start", timeout=60_000)
    wait_for(lambda: tab_labels(zh_page)[:1] == ["训练"], 30, "Chinese labels for a zh-CN browser")
    assert zh_page.locator("#lf-train-start").inner_text().strip() == "开始"
