"""The History tab's Profile panel in a real browser (Debian's chromium through Playwright): a profiled run's table
in the page's language, composed again when the language changes, with the pick kept (the refresh that the language
runs leaves a listed pick alone; the view follows the pick). Screenshots land in the test's folder."""

from __future__ import annotations

import json

import pytest

from app.i18n import t
from app.tabs.profile import COLUMNS
from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def profiled(workspace, name: str, step_ms: float) -> None:
    folder = workspace / "runs" / name
    folder.mkdir(parents=True)
    (folder / "run.json").write_text(json.dumps({"id": name, "kind": "train", "status": "completed"}))
    (folder / "profile.json").write_text(json.dumps({"steps": 3, "device": "CPU", "clock": "wall clock",
                                                     "step_ms": step_ms, "modules": [
        {"module": "model.layers.0.mlp", "calls": 3, "forward_ms": 2.0, "backward_ms": 3.0, "total_ms": 5.0,
         "share": 0.4}]}))


def headers(page) -> list[str]:
    """The profile table's column headers as shown."""
    cells = page.locator("#lf-profile-table thead th").all_inner_texts()
    return [cell.strip() for cell in cells if cell.strip()]


def shown_in(lang: str) -> list[str]:
    return [t(lang, f"col_{c}") for c in COLUMNS]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_the_profile_panel_follows_the_language_and_keeps_the_pick(shared_board, browser, tmp_path):
    url, workspace = shared_board
    profiled(workspace, "20261206-110000-train-aaaa", 11.5)
    profiled(workspace, "20261206-120000-train-bbbb", 22.5)  # newest: picked first
    page = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.get_by_role("tab", name="历史").click()
    page.locator("#lf-profile").get_by_text("剖析", exact=False).first.click()
    panel = page.locator("#lf-profile")
    # the table itself in Chinese (the panel's title says 模块 too, so the headers are read, not the panel's text);
    # composed again once the page's language is known, behind the page load's own handlers (8-15 s on a busy board)
    wait_for(lambda: "22.5" in panel.inner_text() and headers(page) == shown_in("zh"), 60, "the Chinese table")
    assert "CPU 上 3 步的平均值" in panel.inner_text()  # the summary line too
    page.locator("#lf-profile-run input").click()
    page.get_by_role("option", name="20261206-110000-train-aaaa").click()
    wait_for(lambda: "11.5" in panel.inner_text(), 30, "the picked run's table")
    page.screenshot(path=str(tmp_path / "profile-zh.png"), full_page=True)
    page.locator("#lf-lang input").click()
    page.get_by_role("option", name="English").click()
    try:
        wait_for(lambda: "Mean over 3 step(s)" in panel.inner_text() and headers(page) == shown_in("en"), 60,
                 "the English table")
    finally:
        page.screenshot(path=str(tmp_path / "profile-en.png"), full_page=True)
    assert "11.5 ms" in panel.inner_text() and "模块" not in panel.inner_text()  # the title too
    assert page.locator("#lf-profile-run input").input_value() == "20261206-110000-train-aaaa"
