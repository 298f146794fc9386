"""A live board: abort a real training run after its first checkpoint, resume it with the History tab's Resume
button in a real browser, and watch the new run finish from that checkpoint; bad API input gets clear errors and
one log line each.

Set LF_BOARD_RESUME_SCREENSHOT=path to keep a screenshot of the History tab after Resume.
"""

from __future__ import annotations

import json
import os
import signal
import urllib.request

import pytest

from tests.e2e.conftest import CHROMIUM, wait_for

pytestmark = [pytest.mark.browser, pytest.mark.slow]

TIMEOUT = 300
# The run is held still (SIGSTOP) from the moment its first checkpoint is seen until the abort is asked for, so the
# abort lands mid-run however fast the machine trains: the steps after the first checkpoint only need to cover the
# 0.1 s poll that sees it (about 3 steps at 40 ms a step). Before the hold, 80 spare steps (8 were not enough: CI ran
# to the end first) made the resumed run train ~80 steps, most of the test's time on a loaded machine.
MAX_STEPS = 25
SAVE_STEPS = 5
CONFIG = f"""
model_name_or_path: demo
template: chatml
stage: sft
finetuning_type: lora
lora_rank: 8
dataset: demo_identity
dataset_dir: examples/data
cutoff_len: 128
max_steps: {MAX_STEPS}
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
learning_rate: 2.0e-3
logging_steps: 1
save_steps: {SAVE_STEPS}
"""


def http_call(url: str, route: str, data: list) -> str:
    """Call a route over plain HTTP (JSON escapes let a lone surrogate through, as a script's client may send)."""
    body = json.dumps({"data": data}).encode("ascii")
    request = urllib.request.Request(f"{url}gradio_api/call/{route}", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as response:
        event_id = json.loads(response.read())["event_id"]
    with urllib.request.urlopen(f"{url}gradio_api/call/{route}/{event_id}", timeout=60) as response:
        return response.read().decode("utf-8")


def rejection(client, *args, api_name: str) -> str:
    with pytest.raises(Exception) as err:
        client.predict(*args, api_name=api_name)
    return str(err.value)


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_abort_then_resume_from_history_and_bad_input(live_board, browser, tmp_path):
    from gradio_client import Client

    url, workspace = live_board
    runs = workspace / "runs"
    client = Client(url, verbose=False)

    # bad input: clear, short errors (never a bare CancelledError), one log line each
    assert "at most 128 characters" in rejection(client, "r" * 100_000, api_name="/run_status")
    assert "not a finite number" in rejection(client, CONFIG + "max_grad_norm: .nan\n", "train",
                                              api_name="/submit_run")
    assert "U+D800" in http_call(url, "submit_run", [CONFIG + "default_system: a\ud800b\n", "train"])
    assert "new folder" in rejection(client, CONFIG + "resume_from_checkpoint: true\n", "train",
                                     api_name="/submit_run")

    old = client.predict(CONFIG, "train", api_name="/submit_run")
    wait_for(lambda: (runs / old / f"checkpoint-{SAVE_STEPS}" / "trainer_state.json").is_file(), TIMEOUT,
             "the first checkpoint", every=0.1)
    group = int(json.loads((runs / old / "run.json").read_text())["pgid"])
    os.killpg(group, signal.SIGSTOP)  # held still: the SIGTERM waits, delivered once it goes on
    try:
        assert client.predict(old, api_name="/abort_run")["result"] == "stopping"
    finally:
        os.killpg(group, signal.SIGCONT)
    wait_for(lambda: client.predict(old, api_name="/run_status")["status"] == "aborted", TIMEOUT, "the abort",
             every=0.5)
    stopped_at = max(int(p.name.split("-")[1]) for p in (runs / old).glob("checkpoint-*"))
    assert stopped_at < MAX_STEPS  # the abort landed mid-run

    page = browser.new_context(locale="en-US", viewport={"width": 1400, "height": 1000}).new_page()
    page.goto(url)
    page.wait_for_selector(".gradio-container", timeout=60_000)
    page.locator("#lf-tabs button[role=tab]", has_text="History").click()
    page.wait_for_selector("#lf-runs-resume", timeout=30_000)
    page.locator("#lf-runs-selected input").click()
    page.get_by_role("option", name=old).click()
    page.locator("#lf-runs-resume").click()
    found = page.get_by_text("continues as run").first
    found.wait_for(timeout=60_000)
    message = found.inner_text()
    assert old in message
    new = next(r for r in client.predict(api_name="/list_runs") if r["id"] != old)["id"]
    assert f"checkpoint-{stopped_at}" in message and new in message
    shot = os.environ.get("LF_BOARD_RESUME_SCREENSHOT") or str(tmp_path / "resume.png")
    page.screenshot(path=shot, full_page=True)
    page.context.close()  # done with it: an open page's timers keep taking CPU from the resumed run

    info = json.loads((runs / new / "run.json").read_text())
    assert info["resumed_from"] == old and info["resumed_checkpoint"].endswith(f"checkpoint-{stopped_at}")
    wait_for(lambda: client.predict(new, api_name="/run_status")["status"] in ("completed", "failed"), TIMEOUT,
             "the resumed run", every=0.5)
    status = client.predict(new, api_name="/run_status")
    assert status["status"] == "completed", status.get("error")
    assert status["step"] == status["total"] == MAX_STEPS
    steps = [json.loads(line).get("step") for line in (runs / new / "events.jsonl").read_text().splitlines()
             if '"log"' in line]
    assert steps[0] == stopped_at + 1  # it went on from the checkpoint, not from step 1

    log = (tmp_path / "board.log").read_text(errors="replace")
    assert log.count("rejected:") == 4 and "Traceback" not in log
