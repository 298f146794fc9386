"""Two browser pages (two sessions, one English, one Chinese) chat with the same model: the second Load shares the
first page's worker instead of loading the model twice, each page sees only its own conversation, and a page whose
worker another page unloaded is told so.

Set LF_BOARD_TWO_PAGES_SHOTS=folder to keep the screenshots.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, reply_ended, wait_for

LOAD_TIMEOUT = 600

pytestmark = [pytest.mark.browser, pytest.mark.slow]



def chat_runs(workspace: Path) -> list[dict]:
    runs = []
    for run_json in (workspace / "runs").glob("*/run.json"):
        info = json.loads(run_json.read_text())
        if info.get("kind") == "chat":
            runs.append(info)
    return runs


def send(page, text: str) -> None:
    box = page.locator("#lf-chat-message textarea")
    box.fill(text)
    box.press("Enter")
    bot = page.locator("#lf-chatbot .bot")
    status = page.locator("#lf-chat-status")

    def answered() -> bool:
        # the demo model samples, and now and then ends its turn at once: the page then says its reply was empty
        said_empty = any(words in status.inner_text() for words in ("came back empty", "回复为空"))
        return (page.locator("#lf-chatbot").inner_text().count(text) >= 1 and bot.count() >= 1
                and bool(bot.last.inner_text().strip() or said_empty))

    wait_for(answered, 120, f"an answer to {text!r}")
    # the stream has ended once the send event has (not once the page stayed the same for 1.5 s)
    wait_for(lambda: reply_ended(page), 120, "the answer to end")


def shoot(page, name: str) -> None:
    folder = os.environ.get("LF_BOARD_TWO_PAGES_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


WATCH_STATUS = """() => {
    const status = document.querySelector('#lf-chat-status');
    window.lfStatusChanged = false;
    new MutationObserver(() => { window.lfStatusChanged = true; })
        .observe(status, {subtree: true, childList: true, characterData: true});
}"""


def load_and_wait_for_its_answer(page, ready: str, timeout: float) -> None:
    """Press Load and wait for its own answer, not a ready line from before it (a page that adopted the worker as
    its language was set shows one already): the status must change after the press and then start with ``ready``.
    The Load's loading and ready lines can reach the page together and leave its text as it was; then the ready line
    counts once 3 s have passed, as long as a Load takes to answer with a worker that is already running."""
    page.evaluate(WATCH_STATUS)
    page.locator("#lf-chat-load").click()
    status = page.locator("#lf-chat-status")
    try:
        wait_for(lambda: page.evaluate("window.lfStatusChanged") and status.inner_text().strip().startswith(ready), 3,
                 "a changed status")
    except AssertionError:
        wait_for(lambda: status.inner_text().strip().startswith(ready), timeout, "the shared worker")


def open_chat(browser, url: str, locale: str, tab: str):
    page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.get_by_role("tab", name=tab).click()
    page.wait_for_selector("#lf-chat-load", timeout=30_000)
    return page


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_two_pages_share_one_worker_with_their_own_conversations(live_board, browser):
    url, workspace = live_board
    # both pages are open before any model is loaded: neither knows a worker yet
    first = open_chat(browser, url, "en-US", "Chat")
    second = open_chat(browser, url, "zh-CN", "对话")
    first.locator("#lf-chat-load").click()
    wait_for(lambda: "Ready" in first.locator("#lf-chat-status").inner_text(), LOAD_TIMEOUT, "the worker")
    # (the second page may have adopted the worker as it loaded, when its language was set; either way its
    # Load must use that worker, not load the model again)
    load_and_wait_for_its_answer(second, "就绪：", 60)
    live = [r for r in chat_runs(workspace) if r.get("status") == "running"]
    assert len(chat_runs(workspace)) == 1 and len(live) == 1, "the second page loaded the model again"

    send(first, "apples from the first page")
    send(second, "pears from the second page")
    send(first, "more apples")
    assert len(chat_runs(workspace)) == 1
    shoot(first, "first-en.png")
    shoot(second, "second-zh.png")
    mine, theirs = first.locator("#lf-chatbot").inner_text(), second.locator("#lf-chatbot").inner_text()
    assert "apples from the first page" in mine and "more apples" in mine and "pears" not in mine
    assert "pears from the second page" in theirs and "apples" not in theirs

    # the second page unloads: the first page's next message says its worker is gone, not "load first"
    second.get_by_role("button", name="卸载（释放内存）").click()
    wait_for(lambda: not [r for r in chat_runs(workspace) if r.get("status") == "running"], 60, "the unload")
    box = first.locator("#lf-chat-message textarea")
    box.fill("still there?")
    box.press("Enter")
    wait_for(lambda: "no longer running" in first.locator("#lf-chat-status").inner_text(), 30,
             "the note that the worker is gone")
    shoot(first, "first-gone-en.png")
