"""A real browser trains demo-vlm from the board (after previewing its pictures), then chats about an uploaded
picture, in English and in Chinese.

Set LF_BOARD_VLM_SHOTS=folder to keep the screenshots (preview, English chat, Chinese chat).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, open_on_example, reply_ended, wait_for

REPO_ROOT = Path(__file__).resolve().parents[2]
PICTURE = REPO_ROOT / "examples" / "data" / "demo_vlm" / "blue_circle.png"
RUN_TIMEOUT = 600

pytestmark = [pytest.mark.browser, pytest.mark.slow]



@pytest.fixture()
def vlm_last_config(tmp_path):
    """The workspace's last-used config is the demo VLM example (shortened), so the page opens on it."""
    open_on_example(tmp_path, "sft_vlm_demo.yaml", max_steps=4, logging_steps=2)


def chat_about_the_picture(page, question: str) -> str:
    """Attach the picture, ask, and return the reply once the chatbot shows the picture and an answer."""
    page.locator("#lf-chat-message input[type=file]").set_input_files(str(PICTURE))
    wait_for(lambda: page.locator("#lf-chat-message img").count() >= 1, 30, "the attached picture's preview")
    box = page.locator("#lf-chat-message textarea")
    box.fill(question)
    box.press("Enter")
    wait_for(lambda: page.locator("#lf-chatbot img").count() >= 1, 60, "the picture in the conversation")
    bot = page.locator("#lf-chatbot .bot")
    status = page.locator("#lf-chat-status")

    def said_empty() -> bool:  # the demo model samples, and now and then ends its turn at once: the page says so
        return any(words in status.inner_text() for words in ("came back empty", "回复为空"))

    wait_for(lambda: bot.count() >= 1 and (bot.last.inner_text().strip() or said_empty()), 120, "the model's answer")
    # the stream has ended once the send event has (not once the answer stayed the same for 2.5 s)
    wait_for(lambda: reply_ended(page), 120, "the answer to end")
    return bot.last.inner_text().strip() or ("(an empty reply, said so)" if said_empty() else "")


def shoot(page, name: str) -> None:
    folder = os.environ.get("LF_BOARD_VLM_SHOTS")
    if folder:
        Path(folder).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(folder) / name), full_page=True)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_train_demo_vlm_then_chat_about_an_uploaded_picture(vlm_last_config, live_board, browser):
    url, workspace = live_board
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    wait_for(lambda: "demo_vlm" in page.locator("#lf-dataset").inner_text(), 30, "the demo VLM dataset")
    # pick the built-in VLM in the model list, which says which media each model takes
    page.locator("#lf-model input").click()
    option = page.get_by_role("option", name=re.compile(r"LF-Demo-VLM"))
    assert "[image" in option.first.inner_text()
    option.first.click()
    page.locator("#lf-template input").click()
    page.locator("#lf-template input").fill("qwen2_vl")
    page.get_by_role("option", name="qwen2_vl", exact=True).first.click()
    # the preview shows each row's picture and its soft-token count
    page.get_by_text('Upload and preview data', exact=True).first.click()  # the closed "data tools" accordion
    page.get_by_role("button", name="Preview the selected datasets").click()
    preview = page.locator(".lf-preview").last
    wait_for(lambda: preview.locator("img").count() >= 3, RUN_TIMEOUT, "thumbnails in the preview")
    assert "soft tokens the model sees: image 4" in preview.inner_text()
    shoot(page, "preview-en.png")

    page.locator("#lf-train-start").click()
    wait_for(lambda: "started" in page.locator("#lf-train-message").inner_text(), 30, "the start message")
    wait_for(lambda: "completed" in page.locator("#lf-train-status").inner_text(), RUN_TIMEOUT,
             "the run to complete")
    run_id = next((workspace / "runs").iterdir()).name

    # chat with the trained adapter about an uploaded picture
    page.get_by_role("tab", name="Chat").click()
    # the top bar's Refresh reads the workspace at once: with no run live its timer ticks every 30 s, which this test
    # waited out (up to 24 s here, near the 30 s a click waits for an option); test_history_empty_browser proves the
    # tick brings a new run's checkpoints into the picker
    page.locator(".lf-refresh").first.click()
    page.locator("#lf-checkpoint input").click()
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.locator("#lf-chat-load").click()
    wait_for(lambda: "ready" in page.locator("#lf-chat-status").inner_text().lower(), RUN_TIMEOUT,
             "the chat server")
    reply = chat_about_the_picture(page, "What is in the picture?")
    assert reply
    shoot(page, "chat-en.png")
    page.context.close()  # the worker stays; an open page's timers would take CPU from the next one

    # a Chinese browser adopts the running chat worker and chats the same way
    zh = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1100}).new_page()
    zh.goto(url)
    zh.wait_for_selector("#lf-train-start", timeout=60_000)
    zh.get_by_role("tab", name="对话").click()
    wait_for(lambda: zh.locator("#lf-chat-status").inner_text().strip() != "", 30, "the chat status")
    reply_zh = chat_about_the_picture(zh, "What is in the picture?")
    assert reply_zh
    shoot(zh, "chat-zh.png")
