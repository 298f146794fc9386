"""gradio_client against a live board: submit a tiny demo run through /submit_run and watch it complete."""

from __future__ import annotations

import time

import pytest

pytestmark = pytest.mark.slow

CONFIG = """
model_name_or_path: demo
template: chatml
stage: sft
finetuning_type: lora
lora_rank: 8
dataset: demo_identity
dataset_dir: examples/data
cutoff_len: 128
max_steps: 6
per_device_train_batch_size: 4
gradient_accumulation_steps: 1
learning_rate: 2.0e-3
logging_steps: 1
save_steps: 3
"""


def test_submit_and_watch_a_run(live_board):
    from gradio_client import Client

    url, workspace = live_board
    client = Client(url, verbose=False)
    api = client.view_api(print_info=False, return_format="dict")["named_endpoints"]
    assert {"/submit_run", "/list_runs", "/run_status", "/abort_run"} <= set(api)

    # a page that rebinds its own name to 127.0.0.1 (or posts a form here) gets nothing from a board without a login
    import urllib.error
    import urllib.request

    # nor does a page another local server shows on another port (gradio's CORS would let it read the answers)
    for headers in ({"Host": "evil.example.com"}, {"Origin": "http://evil.example.com"},
                    {"Origin": "http://localhost:1"}):
        request = urllib.request.Request(url + "gradio_api/info", headers=headers)
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 403 and b"this board has no login" in refused.value.read()
    with urllib.request.urlopen(url, timeout=10) as page:  # nor may it frame the board's page under a decoy
        assert "frame-ancestors 'self'" in page.headers["Content-Security-Policy"]

    run_id = client.predict(CONFIG, "train", api_name="/submit_run")
    assert (workspace / "runs" / run_id / "config.yaml").is_file()
    seen = []
    deadline = time.time() + 300
    while time.time() < deadline:
        status = client.predict(run_id, api_name="/run_status")
        seen.append(status["status"])
        if status["status"] in ("completed", "failed", "aborted"):
            break
        time.sleep(1)
    assert status["status"] == "completed", status.get("error")
    assert status["step"] == status["total"] == 6
    assert isinstance(status["loss"], float)
    assert set(seen) <= {"queued", "running", "completed"}
    assert (workspace / "runs" / run_id / "adapter_config.json").is_file()
    assert (workspace / "runs" / run_id / "checkpoint-3").is_dir()

    runs = client.predict(api_name="/list_runs")
    assert [r["id"] for r in runs] == [run_id] and runs[0]["status"] == "completed"
    assert client.predict(run_id, api_name="/abort_run")["result"] == "finished"

    with pytest.raises(Exception, match="learning_rate"):
        client.predict(CONFIG + "learning_rat: 1\n", "train", api_name="/submit_run")
