"""A real browser drives a GRPO run on the demo model: the reward settings, "try it", then the live reward chart
and the table of recent completions."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, open_on_example, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 300


pytestmark = [pytest.mark.browser, pytest.mark.slow]


def reward_points(page) -> int:
    return page.evaluate(
        "[...document.querySelectorAll('#lf-rl-reward-plot .mark-line path')]"
        ".map(p => (p.getAttribute('d') || '').split('L').length - 1).reduce((a, b) => a + b, 0)"
    )


@pytest.fixture()
def grpo_last_config(tmp_path):
    """The workspace's last-used config is the GRPO demo (2 steps), so the page opens on it. Two steps draw each of
    the chart's three lines (the weighted reward, format's mean, length's mean) as a segment: the 3 segments the test
    waits for, which a third and fourth step (a GRPO step samples 8 completions: seconds each) only lengthened."""
    open_on_example(tmp_path, "grpo_demo.yaml", max_steps=2)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_grpo_from_the_board_try_it_then_watch_rewards(grpo_last_config, live_board, browser):
    url, workspace = live_board
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-rl-try", timeout=60_000)
    checked = page.locator("#lf-rl-builtins input:checked")
    wait_for(lambda: checked.count() == 2, 30, "the ticked built-in rewards")
    page.locator("#lf-rl-try").click()  # Stop ends the scoring
    page.locator("#lf-rl-try-stop").click(timeout=30_000)
    wait_for(lambda: "Stopped; nothing was scored." in page.locator("#lf-rl-message").inner_text(), 60,
             "the stopped message")
    wait_for(lambda: not page.locator("#lf-rl-try-stop").is_visible(), 10, "the Stop button to hide")
    page.locator("#lf-rl-try").click()
    wait_for(lambda: "Scored 12 sampled completions" in page.locator("#lf-rl-message").inner_text(),
             RUN_TIMEOUT, "the try-it scores")
    assert "format" in page.locator("#lf-rl-try-table").inner_text()

    page.locator("#lf-train-start").click()
    wait_for(lambda: "started" in page.locator("#lf-train-message").inner_text(), 30, "the start message")
    wait_for(lambda: reward_points(page) >= 3, RUN_TIMEOUT, "points on the reward chart")
    wait_for(lambda: "<|im_start|>user" in page.locator("#lf-rl-completions").inner_text(), 60,
             "recent completions")
    wait_for(lambda: "completed" in page.locator("#lf-train-status").inner_text(), RUN_TIMEOUT,
             "the run to complete")
    run = next((workspace / "runs").iterdir())
    assert (run / "completions.jsonl").stat().st_size > 0
