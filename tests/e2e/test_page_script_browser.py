"""The page script (app/page_script.py) in a real browser: gradio's hard-coded English chrome follows the page's
language, and copying a message leaves out the zero-width spaces that keep quoted text from rendering as markup."""

from __future__ import annotations

import re
import time

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# select a box's text, send it a copy event, and read back what would reach the clipboard
COPY = """(sel) => { const el = document.querySelector(sel); const range = document.createRange();
  range.selectNodeContents(el); const s = getSelection(); s.removeAllRanges(); s.addRange(range);
  const data = new DataTransfer();
  el.dispatchEvent(new ClipboardEvent('copy', {clipboardData: data, bubbles: true, cancelable: true}));
  return [s.toString(), data.getData('text/plain')]; }"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_chrome_follows_the_language_and_copies_carry_no_marks(shared_board, browser):
    url, _workspace = shared_board
    page = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)

    # a problem quoting a path with markup-like text, framed in Chinese; a copy of it reads as written
    model = page.locator("#lf-model input")
    model.click()
    model.fill("/tmp/no<such](x)model")
    page.keyboard.press("Tab")
    time.sleep(1.5)
    page.locator("#lf-train-start").click()
    message = page.locator("#lf-train-message")
    wait_for(lambda: "does not exist" in message.inner_text(), 60, "the problem message")
    assert "模型设置" in message.inner_text()
    shown, copied = page.evaluate(COPY, "#lf-train-message")
    assert "\u200b" in shown  # what the page shows keeps the marks (no tag or link can form)...
    assert "/tmp/no<such](x)model" in copied and "\u200b" not in copied  # ...the copy drops them

    # the History table's search box: gradio writes "Search..." in every language
    page.locator("#lf-tabs button[role=tab]").nth(4).click()
    search = page.locator("input.search-input").first
    wait_for(lambda: search.get_attribute("placeholder") == "搜索…", 30, "the Chinese search placeholder")
    assert page.locator("[title='复制表格数据']").count() >= 1
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name=re.compile("^English$")).click()
    wait_for(lambda: search.get_attribute("placeholder") == "Search...", 30, "the English one again")
    assert page.locator("[title='复制表格数据']").count() == 0
