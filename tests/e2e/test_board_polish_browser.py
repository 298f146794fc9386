"""What a newcomer hit, in a real browser (Debian's chromium through Playwright), in English and Chinese: the
pasteable command, the preview after registering a dataset, the log box showing the end of the log, translated
table headers and no raw translation keys."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import CHROMIUM, kept_on_failure, wait_for, watch_network
from tests.e2e.test_board_browser import tab_labels

pytestmark = [pytest.mark.browser, pytest.mark.slow]

RAW_KEY = re.compile(r"__i18n__|translation_metadata|\b(?:common|upload_text|dataframe|file|chatbot)\.[a-z_]+\b")


def finished_train_run(workspace: Path) -> str:
    """A completed training run folder (as the engine leaves one) with a 300-line log."""
    run_id = "20261203-000001-train-e2e0"
    run = workspace / "runs" / run_id
    run.mkdir(parents=True)
    now = time.time()
    (run / "config.yaml").write_text(f"model_name_or_path: demo\nstage: sft\noutput_dir: {run}\n")
    (run / "run.json").write_text(json.dumps({"id": run_id, "kind": "train", "status": "completed",
                                              "created_at": now - 60, "started_at": now - 50, "finished_at": now,
                                              "exit_code": 0}))
    events = [{"time": now - 50, "event": "start", "total_steps": 5}]
    events += [{"time": now - 50 + i, "event": "log", "step": i, "total_steps": 5, "loss": 2.0 / i, "lr": 1e-3}
               for i in range(1, 6)]
    events.append({"time": now, "event": "end", "status": "completed", "error": None, "metrics": {}})
    (run / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events))
    (run / "stdout.log").write_text("".join(f"log line {i}\n" for i in range(300)) + f"Done. Outputs in {run}\n")
    return run_id


def pick_and_watch(page, run_id: str) -> None:
    page.locator("#lf-tabs button[role=tab]").nth(4).click()
    page.locator("#lf-runs-selected input").click()
    page.get_by_role("option", name=re.compile(re.escape(run_id))).first.click()
    page.keyboard.press("Escape")
    page.get_by_role("button", name=re.compile("^(Watch|查看)$")).first.click()


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_newcomer_path_in_english_and_chinese(shared_board, browser, tmp_path):
    url, workspace = shared_board
    run_id = finished_train_run(workspace)
    upload = tmp_path / "zebra.json"
    upload.write_text(json.dumps([{"instruction": "Say ZEBRAWORD please", "input": "", "output": "ZEBRAWORD"}] * 3))
    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1100}).new_page()
    seen = watch_network(page)
    page.goto(url)
    page.wait_for_selector("#lf-train-start", timeout=60_000)

    # the command is a here-document that works when pasted (the run folder does not exist yet)
    page.get_by_text("Command and YAML", exact=False).first.click()
    try:
        wait_for(lambda: "<<'LF_CONFIG'" in page.locator("#lf-train-command").inner_text(), 60, "the command")
    except AssertionError:
        page.screenshot(path=str(tmp_path / "command.png"), full_page=True)
        raise AssertionError(page.locator("#lf-train-command").inner_text()[:500]) from None
    assert "lf-engine train -" in page.locator("#lf-train-command").inner_text()

    # registering a dataset refreshes the preview without clicking Preview
    page.get_by_text("Upload and preview data", exact=False).first.click()
    page.locator("input[type=file]").first.set_input_files(str(upload))
    with kept_on_failure(page, workspace.parent, "newcomer-upload", seen):  # the board's log and the page kept
        wait_for(lambda: page.get_by_text("zebra.json").count() >= 1, 90, "the uploaded file")
    page.get_by_label("Dataset name").fill("zebra")
    page.get_by_role("button", name="Register dataset").click()
    wait_for(lambda: "ZEBRAWORD" in page.locator(".lf-preview").first.inner_text(), 120, "the new dataset's preview")
    # what the upload said follows a switch of the page's language (it stayed English), and back
    note = page.locator("#lf-dataset-note")
    wait_for(lambda: "Dataset zebra (sft) registered" in note.inner_text(), 30, "the upload's message")
    for language, words in (("中文", "数据集 zebra（sft）已注册"), ("English", "Dataset zebra (sft) registered")):
        page.locator("#lf-lang input").click()
        page.get_by_role("option", name=language).click()
        wait_for(lambda words=words: words in note.inner_text(), 30, f"the upload's message in {language}")
        page.screenshot(path=str(tmp_path / f"upload-note-{language}.png"))

    # the log box shows the end of the log
    pick_and_watch(page, run_id)
    wait_for(lambda: "Done. Outputs in" in page.locator("#lf-train-log textarea").input_value(), 30, "the log")
    wait_for(lambda: page.evaluate(
        "(() => { const t = document.querySelector('#lf-train-log textarea');"
        " return t.scrollTop + t.clientHeight >= t.scrollHeight - 8; })()"), 15, "the log at its end")
    assert not RAW_KEY.search(page.locator("body").inner_text())
    page.context.close()  # done with it: an open page's timers keep taking CPU from the next one

    # Chinese: History and Evaluate headers, and no raw keys anywhere
    zh = browser.new_context(locale="zh-CN", viewport={"width": 1400, "height": 1100}).new_page()
    zh.goto(url)
    zh.wait_for_selector("#lf-train-start", timeout=60_000)
    wait_for(lambda: tab_labels(zh)[:1] == ["训练"], 30, "Chinese tabs")
    zh.locator("#lf-tabs button[role=tab]").nth(4).click()

    def headers(selector):
        return zh.evaluate(f"[...document.querySelectorAll('{selector} th')].map(e => e.innerText.trim())")

    wait_for(lambda: "状态" in headers("#lf-runs-table"), 15, "Chinese History headers")
    assert "已完成" in zh.locator("#lf-runs-table").inner_text()
    zh.locator("#lf-tabs button[role=tab]").nth(1).click()
    wait_for(lambda: "指标" in headers("#lf-eval-metrics") and "预测" in headers("#lf-eval-predictions"), 15,
             "Chinese Evaluate headers")
    for index in range(5):
        zh.locator("#lf-tabs button[role=tab]").nth(index).click()
        time.sleep(0.5)
        text = zh.locator("body").inner_text()
        assert not RAW_KEY.search(text), RAW_KEY.search(text).group(0)
    assert shutil.which("chromium")
