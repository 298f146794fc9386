"""The Train preview of a last-used config that cannot run, in a page whose language is Chinese, in a real browser
(Debian's chromium through Playwright): the page load composes the preview before the page's language is known, and
its heading stayed in English until a field changed."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import CHROMIUM, board_in, open_on_example, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_config_that_cannot_run_is_headed_in_the_pages_language(browser, tmp_path):
    open_on_example(tmp_path, "sft_lora_demo.yaml", learning_rate=-1.0)
    with board_in(tmp_path) as (url, _):
        page = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1000}).new_page()
        page.goto(url)
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
