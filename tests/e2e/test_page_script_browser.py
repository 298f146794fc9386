"""One Chinese page in a real browser (Debian's chromium through Playwright), switched to English once, checks two
things that follow the page's language:

- the page script (app/page_script.py): gradio's hard-coded English chrome follows the page's language, and copying
  a message leaves out the zero-width spaces that keep quoted text from rendering as markup;
- the History tab's Profile panel: a profiled run's table in the page's language, composed again when the language
  changes, with the pick kept (the refresh that the language runs leaves a listed pick alone; the view follows the
  pick). Screenshots land in the test's folder.

(One page for both: a page load and a switch of language cost the browser seconds of CPU each.)"""

from __future__ import annotations

import json
import re
import time

import pytest

from app.i18n import t
from app.tabs.profile import COLUMNS
from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

# select a box's text, send it a copy event, and read back what would reach the clipboard
COPY = """(sel) => { const el = document.querySelector(sel); const range = document.createRange();
  range.selectNodeContents(el); const s = getSelection(); s.removeAllRanges(); s.addRange(range);
  const data = new DataTransfer();
  el.dispatchEvent(new ClipboardEvent('copy', {clipboardData: data, bubbles: true, cancelable: true}));
  return [s.toString(), data.getData('text/plain')]; }"""


def profiled(workspace, name: str, step_ms: float) -> None:
    folder = workspace / "runs" / name
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"id": name, "kind": "train", "status": "completed"}))
    (folder / "profile.json").write_text(json.dumps({"steps": 3, "device": "CPU", "clock": "wall clock",
                                                     "step_ms": step_ms, "modules": [
        {"module": "model.layers.0.mlp", "calls": 3, "forward_ms": 2.0, "backward_ms": 3.0, "total_ms": 5.0,
         "share": 0.4}]}))


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def headers(page) -> list[str]:
    """The profile table's column headers as shown."""
    cells = page.locator("#lf-profile-table thead th").all_inner_texts()
    return [cell.strip() for cell in cells if cell.strip()]


def shown_in(lang: str) -> list[str]:
    return [t(lang, f"col_{c}") for c in COLUMNS]


def test_chrome_and_the_profile_panel_follow_the_language_and_copies_carry_no_marks(shared_board, browser, tmp_path):
    url, workspace = shared_board
    profiled(workspace, "20261206-110000-train-aaaa", 11.5)
    profiled(workspace, "20261206-120000-train-bbbb", 22.5)  # newest: picked first
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

    # the Profile panel on the same tab: the newest profiled run's table in Chinese, then the picked one's
    page.locator("#lf-profile").get_by_text("剖析", exact=False).first.click()
    panel = page.locator("#lf-profile")
    # the table itself in Chinese (the panel's title says 模块 too, so the headers are read, not the panel's text);
    # composed again once the page's language is known, behind the page load's own handlers (8-15 s on a busy board)
    wait_for(lambda: "22.5" in panel.inner_text() and headers(page) == shown_in("zh"), 60, "the Chinese profile table")
    assert "CPU 上 3 步的平均值" in panel.inner_text()  # the summary line too
    page.locator("#lf-profile-run input").click()
    page.get_by_role("option", name="20261206-110000-train-aaaa").click()
    wait_for(lambda: "11.5" in panel.inner_text(), 30, "the picked run's profile table")
    page.screenshot(path=str(tmp_path / "profile-zh.png"), full_page=True)

    # switched to English: the search box's chrome and the profile table follow; the profile pick stays
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name=re.compile("^English$")).click()
    wait_for(lambda: search.get_attribute("placeholder") == "Search...", 30, "the English search placeholder again")
    assert page.locator("[title='复制表格数据']").count() == 0
    try:
        wait_for(lambda: "Mean over 3 steps" in panel.inner_text() and headers(page) == shown_in("en"), 60,
                 "the English profile table")
    finally:
        page.screenshot(path=str(tmp_path / "profile-en.png"), full_page=True)
    assert "11.5 ms" in panel.inner_text() and "模块" not in panel.inner_text()
    assert page.locator("#lf-profile-run input").input_value() == "20261206-110000-train-aaaa"
