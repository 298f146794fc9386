"""A reloaded browser tab finds its chat conversation (a picture included) and its History selection where it left
them; another tab starts with its own (app.page_memory: the tab's id lives in its sessionStorage); a duplicated tab
(the browser copies sessionStorage, the id included) takes an id of its own and starts as a copy of its original."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

PICTURE = Path(__file__).resolve().parents[2] / "examples" / "data" / "demo_vlm" / "red_square.png"
RUN = "20260101-000000-train-pgmm"  # a name no other test on the shared board uses

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def wait_for(page, predicate, timeout: float, what: str) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline:
        if predicate():
            return
        page.wait_for_timeout(300)
    raise AssertionError(f"timed out waiting for {what}")


def opened(page, url: str | None = None) -> None:
    page.goto(url) if url else page.reload()
    page.wait_for_selector("#lf-train-start", timeout=90_000)


def test_a_reloaded_tab_keeps_its_conversation_and_selection_and_another_tab_does_not_see_them(shared_board, browser):
    from app.page_memory import STORAGE_KEY, PageMemory

    url, workspace = shared_board
    (workspace / "runs" / RUN).mkdir(parents=True)
    (workspace / "runs" / RUN / "run.json").write_text(json.dumps({"id": RUN, "kind": "train", "status": "completed"}))
    context = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    opened(page, url)
    page.get_by_role("tab", name="History").click()
    page.locator("#lf-runs-selected input").click()
    page.get_by_role("option", name=RUN).click()
    page.keyboard.press("Escape")
    wait_for(page, lambda: page.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')"), 30, "the tab's id")
    page_id = page.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')")
    store = PageMemory(workspace)
    wait_for(page, lambda: store.read(page_id).get("history") == {"selected": [RUN]}, 30, "the pick kept")
    # a conversation with a picture, as a chat in this tab leaves it (the model is not needed to show it)
    name = store.keep_media(PICTURE)
    store.save(page_id, "chat", {"convo": [
        {"role": "user", "content": [{"type": "image_url", "media": name}, {"type": "text", "text": "what?"}]},
        {"role": "assistant", "content": "A red square."}], "convo_base": [], "servers": {}})

    opened(page)
    assert page.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')") == page_id
    page.get_by_role("tab", name="History").click()
    wait_for(page, lambda: RUN in page.locator("#lf-runs-selected").inner_text(), 60, "the pick back")
    page.get_by_role("tab", name="Chat").click()
    chat = page.locator("#lf-chatbot")
    wait_for(page, lambda: "A red square." in chat.inner_text() and chat.locator("img").count() == 1, 60,
             "the conversation back")
    # the picture loads (its request goes out as the bubble is drawn: asked at once, it may still be on its way)
    wait_for(page, lambda: chat.locator("img").evaluate("img => img.complete && img.naturalWidth > 0"), 30,
             "the picture loaded")

    other = context.new_page()  # another tab of the same browser: its own (empty) conversation and pick
    opened(other, url)
    other.get_by_role("tab", name="Chat").click()
    other.wait_for_timeout(3000)
    assert "A red square." not in other.locator("#lf-chatbot").inner_text()
    assert other.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')") not in (None, page_id)
    other.get_by_role("tab", name="History").click()
    assert RUN not in other.locator("#lf-runs-selected").inner_text()

    # a duplicated tab ("Duplicate tab" copies the original's sessionStorage, its id included): an id of its own,
    # starting with a copy of the original's conversation and pick; the original keeps its id across a reload
    twin = context.new_page()
    twin.add_init_script(f"if (!sessionStorage.getItem('{STORAGE_KEY}')) {{ sessionStorage.setItem('{STORAGE_KEY}', "
                         f"'{page_id}'); }}")
    opened(twin, url)
    twin_id = lambda: twin.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')")  # noqa: E731
    wait_for(twin, lambda: twin_id() != page_id, 30, "the duplicate's own id")
    copy = twin_id()
    twin.get_by_role("tab", name="Chat").click()
    wait_for(twin, lambda: "A red square." in twin.locator("#lf-chatbot").inner_text(), 60, "the copied conversation")
    twin.get_by_role("tab", name="History").click()
    wait_for(twin, lambda: RUN in twin.locator("#lf-runs-selected").inner_text(), 60, "the copied pick")
    assert store.read(copy)["chat"]["convo"][1]["content"] == "A red square."
    store.save(copy, "chat", {"convo": [{"role": "user", "content": "the duplicate's own"}], "convo_base": [],
                              "servers": {}})  # then they part
    opened(twin)
    assert twin_id() == copy  # a reload of the duplicate keeps its new id
    twin.get_by_role("tab", name="Chat").click()
    wait_for(twin, lambda: "the duplicate's own" in twin.locator("#lf-chatbot").inner_text(), 60, "its own chat")
    opened(page)
    assert page.evaluate(f"sessionStorage.getItem('{STORAGE_KEY}')") == page_id
    page.get_by_role("tab", name="Chat").click()
    wait_for(page, lambda: "A red square." in page.locator("#lf-chatbot").inner_text(), 60, "the original's chat")
    assert "the duplicate's own" not in page.locator("#lf-chatbot").inner_text()
