"""Evaluate's temperature, top-p and top-k are disabled while "Sample" is off (greedy decoding ignores them). gradio
disables a slider's range, number box and reset button but draws all three as live: the page dims the disabled
slider and hides its reset button (a click on it did nothing), in English and in Chinese."""

from __future__ import annotations

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

SAMPLING = ("temperature", "top_p", "top_k")

LOOKS = """keys => keys.map(key => {
  const block = document.querySelector('#cfg-eval-' + key);
  const reset = block.querySelector('.reset-button');
  const range = block.querySelector('input[type=range]');
  return {disabled: range.disabled, reset_shown: reset.offsetParent !== null, reset_disabled: reset.disabled,
          opacity: getComputedStyle(range).opacity, number_opacity: getComputedStyle(
            block.querySelector('input[type=number]')).opacity};
})"""


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize("locale", ["en-US", "zh-CN"])
def test_disabled_sampling_sliders_look_disabled_and_show_no_reset(shared_board, browser, locale):
    url, _ = shared_board
    page = browser.new_context(locale=locale, viewport={"width": 1400, "height": 1100}).new_page()
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)
    page.locator("#lf-tabs button[role=tab]").nth(1).click()
    page.wait_for_selector("#cfg-eval-top_p input[type=range]", timeout=30_000)

    greedy = page.evaluate(LOOKS, list(SAMPLING))
    assert all(s["disabled"] and s["reset_disabled"] for s in greedy), greedy
    assert not any(s["reset_shown"] for s in greedy), f"a reset button shows beside a disabled slider: {greedy}"
    assert all(float(s["opacity"]) < 1 and float(s["number_opacity"]) < 1 for s in greedy), greedy

    page.locator("#cfg-eval-do_sample input").click()  # Sample: the sliders and their reset buttons come alive
    wait_for(lambda: not any(s["disabled"] for s in page.evaluate(LOOKS, list(SAMPLING))), 30, "live sliders")
    sampling = page.evaluate(LOOKS, list(SAMPLING))
    assert all(s["reset_shown"] and not s["reset_disabled"] for s in sampling), sampling
    assert all(float(s["opacity"]) == 1 and float(s["number_opacity"]) == 1 for s in sampling), sampling
    if locale == "zh-CN":  # the page script translates gradio's own tooltip
        wait_for(lambda: page.locator("#cfg-eval-top_p .reset-button").get_attribute("aria-label")
                 != "Reset to default value", 15, "the reset button's label in Chinese")

    page.locator("#cfg-eval-do_sample input").click()  # greedy again: dim and no reset button
    wait_for(lambda: all(s["disabled"] and not s["reset_shown"] for s in page.evaluate(LOOKS, list(SAMPLING))), 30,
             "the sliders disabled again, without reset buttons")
