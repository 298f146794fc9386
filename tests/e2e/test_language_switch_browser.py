"""What a language switch shows at once, before the server answers it, in a real browser (Debian's chromium through
Playwright), English to Chinese and back.

The page puts a text that started as a translation key back on every switch of its language, even after a handler
wrote another one (gradio 6.31): the Chat tab's status line said "no model loaded" over a loaded model, and the top
bar's devices line "looking…", until the switch's own handlers answered (seconds on a busy board). Here the server's
answers to the switch are held back, so only what the page does by itself is seen.
"""

from __future__ import annotations

import re

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

HELD = re.compile(r"/gradio_api/(queue/join|run/)")
"""Where the page asks the server to run handlers, queued or not (the top bar's refresh is not): held back while a
switch is checked."""


def switch(page, language: str) -> None:
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name=language).click()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_switch_puts_no_build_time_text_back_over_a_handler_s(shared_board, browser, tmp_path):
    url, _ = shared_board
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    devices = page.locator("#lf-devices")
    # the line as its handler wrote it (while an event is pending, gradio shows its timer, "0.7s", above it)
    line = wait_for(lambda: next((row.strip() for row in devices.inner_text().splitlines() if "CPU" in row.upper()), None),
                    60, "the devices line")
    page.get_by_role("tab", name="Chat").click()
    hint, status = page.locator("#lf-chat-hint"), page.locator("#lf-chat-status")
    wait_for(lambda: "No model loaded" in hint.inner_text(), 30, "the hint")
    # a handler's words on the status line: a compare with no adapter to compare is refused
    page.get_by_label("Side by side with the base model").check()
    page.locator("#lf-chat-load").click()
    refused = "Pick an adapter or checkpoint in the top bar to compare"
    wait_for(lambda: refused in status.inner_text(), 30, "the refusal")
    assert not hint.is_visible()

    page.route(HELD, lambda route: None)  # held: never answered
    switch(page, "中文")
    load = page.locator("#lf-chat-load")
    wait_for(lambda: load.inner_text().strip() == "加载模型", 30, "the page in Chinese")
    page.wait_for_timeout(1500)
    page.screenshot(path=str(tmp_path / "switched-held-zh.png"))
    assert refused in status.inner_text() and "尚未加载模型" not in status.inner_text()
    assert not hint.is_visible()
    assert line in devices.inner_text() and "检测中" not in devices.inner_text(), devices.inner_text()

    # answered: the devices line follows the language; the refusal stays as written (as every message box's
    # words do), with no hint beside it
    page.unroute(HELD)
    switch(page, "English")
    switch(page, "中文")
    wait_for(lambda: "设备" in devices.inner_text() and "检测中" not in devices.inner_text(), 30,
             "the Chinese devices line")
    assert refused in status.inner_text() and not hint.is_visible()
    page.screenshot(path=str(tmp_path / "switched-zh.png"))
