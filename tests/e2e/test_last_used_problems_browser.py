"""A board whose workspace's last-used config has problems, in a real browser (Debian's chromium through
Playwright): the Train preview of a config that cannot run is headed in the page's language, and a malformed
dataset_info.json entry says why where it is picked. Both tests look at one board opened on one last-used config
(a learning rate that cannot run, a dataset folder with a broken entry); each page is a session of its own.

The preview: the page load composes it before the page's language is known, and its heading stayed in English until
a field changed.

The broken entry, listed in the picker as "name · broken" ("name · 条目有误" on a Chinese page), shows the engine's
reason where it is picked (the note under the dataset pickers), framed in the page's language, in English and
Chinese; screenshots land in the test's folder. The pick survives a switch of the page's language: the label follows
the language, the value stays the dataset's name."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from tests.e2e.conftest import CHROMIUM, REPO_ROOT, board_in, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

REASON = "is a str, not an object"


def write_workspace(folder):
    """``folder/data`` with a good entry and a broken one, and ``folder/workspace``'s last-used config: the demo
    example with a learning rate that cannot run, on that folder's good dataset."""
    data = folder / "data"
    data.mkdir()
    (data / "good.json").write_text(json.dumps([{"instruction": "Hi", "input": "", "output": "Hello"}] * 3))
    (data / "dataset_info.json").write_text(json.dumps({"good": {"file_name": "good.json"}, "bad": "bad.json"}))
    config = yaml.safe_load((REPO_ROOT / "examples" / "sft_lora_demo.yaml").read_text())
    config.update(dataset_dir=str(data), dataset="good", learning_rate=-1.0)
    config.pop("output_dir")
    configs = folder / "workspace" / "configs"
    configs.mkdir(parents=True)
    (configs / "last-used.yaml").write_text(yaml.safe_dump(config))


@pytest.fixture(scope="module")
def problem_board(tmp_path_factory):
    """One board for this file's tests, opened on :func:`write_workspace`'s last-used config; yields its url."""
    folder = tmp_path_factory.mktemp("last-used-problems")
    write_workspace(folder)
    with board_in(folder) as (url, _):
        yield url


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_config_that_cannot_run_is_headed_in_the_pages_language(problem_board, browser, tmp_path):
    page = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(problem_board)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.get_by_text("命令与 YAML", exact=False).first.click()
    yaml_view = page.locator("#lf-train-yaml")
    try:
        wait_for(lambda: "learning_rate" in yaml_view.inner_text(), 60, "the preview's problems")
        wait_for(lambda: "该配置暂时无法运行" in yaml_view.inner_text(), 30, "the heading in Chinese")
    except AssertionError:
        page.screenshot(path=str(tmp_path / "preview.png"), full_page=True)
        raise AssertionError(yaml_view.inner_text()[:500]) from None
    assert "This config cannot run yet" not in yaml_view.inner_text()


def check_page(browser, url: str, tmp_path, locale: str, frame: str, word: str) -> None:
    """One page in ``locale`` (a session of its own): the reason under the Train and the Evaluate pickers."""
    page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    note = page.locator("#lf-dataset-note")
    assert not note.is_visible() or REASON not in note.inner_text()
    page.locator("#lf-dataset input").click()
    page.get_by_role("option", name=re.compile(rf"^bad · {word}$")).first.click()
    page.keyboard.press("Escape")
    try:
        wait_for(lambda: note.is_visible() and REASON in note.inner_text(), 30, "the reason of the entry")
    finally:
        page.screenshot(path=str(tmp_path / f"broken-{locale}.png"))
    text = note.inner_text()
    assert frame in text and "bad" in text and 'write it as "bad": {"file_name": "bad.json"}' in text
    # the Evaluate tab's picker says the same
    page.locator("#lf-tabs button[role=tab]").nth(1).click()
    page.locator("#lf-eval-dataset input").click()
    page.get_by_role("option", name=re.compile(rf"^bad · {word}$")).first.click()
    page.keyboard.press("Escape")
    shown = page.locator("#lf-eval-dataset-note")
    try:
        wait_for(lambda: shown.is_visible() and REASON in shown.inner_text(), 30, "the reason on Evaluate")
    finally:
        page.screenshot(path=str(tmp_path / f"broken-eval-{locale}.png"))
    assert frame in shown.inner_text()
    if locale == "en-US":  # switch the page to Chinese with both entries picked
        page.locator("#lf-tabs button[role=tab]").nth(0).click()
        page.locator("#lf-lang input").click()
        page.get_by_role("option", name="中文").click()
        picker = page.locator("#lf-dataset")
        wait_for(lambda: "bad · 条目有误" in picker.inner_text(), 30, "the label in Chinese")
        assert "broken" not in picker.inner_text() and "good" in picker.inner_text()
        # the note follows the switch by itself (it stayed English until a dataset was picked again)
        wait_for(lambda: "无法使用" in note.inner_text() and REASON in note.inner_text(), 30, "the note switched")
        page.screenshot(path=str(tmp_path / "broken-switched-before-pick-zh.png"))
        # the value is still the name: the note, composed again as "good" is removed, finds `bad`'s entry by
        # it (a label for a value would name no entry: no note), and says why in Chinese now
        picker.locator(".token", has_text="good").locator(".token-remove").click()
        wait_for(lambda: "good" not in picker.inner_text(), 30, "good removed")
        wait_for(lambda: "无法使用" in note.inner_text() and REASON in note.inner_text(), 30, "the note in Chinese")
        assert "bad · 条目有误" in picker.inner_text() and "bad" in note.inner_text()
        page.screenshot(path=str(tmp_path / "broken-switched-zh.png"))
    page.context.close()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_broken_entry_says_why_where_it_is_picked(problem_board, browser, tmp_path):
    # each page is a session of its own, and opens with the note hidden (what an earlier page picked is not saved),
    # so each language's check starts from scratch
    for locale, frame, word in (("en-US", "cannot be used", "broken"), ("zh-CN", "无法使用", "条目有误")):
        check_page(browser, problem_board, tmp_path, locale, frame, word)
