"""A run that a full disk ended says so in the page's language, in History and in its run view, in a real browser
(Debian's chromium through Playwright), in English and Chinese: run.json's ``error_params`` make the message, and its
English ``error`` stays for other readers. Both languages look at the shared board and browser (a fresh browser
context each). Screenshots land in the test's folder."""

from __future__ import annotations

import json
import time

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RUN = "20261206-120000-train-d15c"


def full_disk_run(workspace) -> str:
    folder = workspace / "runs" / RUN
    folder.mkdir(parents=True, exist_ok=True)
    english = (f"No space left on device: {folder}, free 12 MB. Free some space (delete old runs or checkpoints, or set "
               "`save_total_limit`), then resume the run. Removed the incomplete checkpoint-6 (it could not be resumed "
               "from).")
    (folder / "run.json").write_text(json.dumps({
        "id": RUN, "kind": "train", "status": "failed", "created_at": time.time() - 60, "started_at": time.time() - 60,
        "finished_at": time.time(), "exit_code": 2, "error": english, "error_code": "disk_full",
        "error_params": {"path": str(folder), "free_mb": 12, "then": "resume", "removed": ["checkpoint-6"]}}))
    (folder / "config.yaml").write_text("model_name_or_path: demo\nstage: sft\ndataset: demo\n")
    return english


@pytest.fixture()
def full_disk_board(shared_board):
    """The shared board, with the failed run in its workspace (written once); yields (url, the run's English
    error)."""
    url, workspace = shared_board
    return url, full_disk_run(workspace)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize(("locale", "tab", "watch", "words", "heading"), [
    ("en-US", "History", "Watch", "No space left on device", "Disk full"),
    ("zh-CN", "历史", "查看", "设备上没有剩余空间", "磁盘已满"),
])
def test_a_full_disk_is_explained_in_the_pages_language(full_disk_board, browser, tmp_path, locale, tab, watch, words,
                                                        heading):
    url, english = full_disk_board
    context = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000})
    try:
        page = context.new_page()
        page.goto(url)
        page.wait_for_selector("#lf-train-start", timeout=60_000)
        page.get_by_role("tab", name=tab).click()
        table = page.locator("#lf-runs-table")
        try:
            wait_for(lambda: RUN in table.inner_text() and words in table.inner_text(), 30, "the run's reason")
        finally:
            page.screenshot(path=str(tmp_path / f"history-{locale}.png"), full_page=True)
        assert heading in table.inner_text()
        if locale == "zh-CN":
            assert "No space left" not in table.inner_text()
        page.locator("#lf-runs-selected input").click()
        page.get_by_role("option", name=RUN).click()
        page.keyboard.press("Escape")
        page.get_by_role("button", name=watch, exact=True).click()
        error = page.locator("#lf-train-error textarea")
        try:
            wait_for(lambda: error.is_visible() and words in error.input_value(), 30, "the run's error")
        finally:
            error.scroll_into_view_if_needed() if error.count() else None
            page.screenshot(path=str(tmp_path / f"run-{locale}.png"))
        text = error.input_value()
        assert heading in text and "checkpoint-6" in text and "12 MB" in text
        if locale == "zh-CN":
            assert english not in text and "英文" not in text
    finally:
        context.close()
