"""The automation handlers behind /submit_run, /list_runs, /run_status and /abort_run (fake engine)."""

from __future__ import annotations

import time
from pathlib import Path

import gradio as gr
import pytest
import yaml

from app.api import Automation

DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
pytestmark = pytest.mark.skipif(not (DEMO_DATA / "dataset_info.json").is_file(), reason="examples/data is missing")

CONFIG = f"""
model_name_or_path: demo
template: chatml
stage: sft
finetuning_type: lora
dataset: demo_identity
dataset_dir: {DEMO_DATA}
cutoff_len: 128
output_dir: /somewhere/else
"""


def test_submit_status_list_abort(board):
    auto = Automation(board)
    run_id = auto.submit_run(CONFIG)
    cfg = yaml.safe_load((board.jobs.runs_dir / run_id / "config.yaml").read_text())
    assert cfg["output_dir"] == str(board.jobs.runs_dir / run_id)  # the run folder, whatever the YAML said
    assert board.jobs.wait(run_id, 30) == "completed"
    status = auto.run_status(run_id)
    assert status["status"] == "completed" and status["step"] == 5 and status["total"] == 5
    assert status["loss"] == pytest.approx(0.4)
    assert [r["id"] for r in auto.list_runs()] == [run_id]
    assert auto.abort_run(run_id) == {"id": run_id, "result": "finished", "status": "completed"}


def test_status_of_a_run_whose_folder_was_deleted_is_refused(board):
    """A run folder deleted after its status was asked once: the next status names it as no run, as for any run
    not in the workspace (it had answered from the board's remembered view of the deleted run)."""
    import shutil

    auto = Automation(board)
    run_id = auto.submit_run(CONFIG)
    assert board.jobs.wait(run_id, 30) == "completed"
    assert auto.run_status(run_id)["status"] == "completed"
    shutil.rmtree(board.jobs.runs_dir / run_id)  # perhaps before the process has exited and been reaped
    with pytest.raises(gr.Error, match="no run"):
        auto.run_status(run_id)
    deadline = time.time() + 60
    while run_id in board.jobs.running() and time.time() < deadline:
        time.sleep(0.05)
    assert run_id not in board.jobs.running()  # forgotten once its process ended, never aborted at teardown
    assert not (board.jobs.runs_dir / run_id).exists()  # its outcome did not bring back a folder of one file


def test_abort_a_queued_run(board):
    busy = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    board.jobs.wait(busy, 60, ("running",))
    auto = Automation(board)
    run_id = auto.submit_run(CONFIG)
    assert auto.run_status(run_id)["queue_position"] == 1
    assert auto.abort_run(run_id) == {"id": run_id, "result": "cancelled", "status": "aborted"}
    assert auto.abort_run(busy)["result"] == "stopping"
    assert board.jobs.wait(busy, 60) == "aborted"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("model_name_or_path: demo\n  bad: [", "not valid YAML"),
        ("- a\n- b\n", "key: value"),
        ("model_name_or_path: demo\nlearning_rat: 0.1\ndataset: demo_identity\n", "Did you mean `learning_rate`"),
        ("model_name_or_path: demo\ndataset: demo_identity\n" + "".join(
            [f"x{i}: &b{i} [" + ", ".join([f"*b{i - 1}" if i else "y"] * 10) + "]\n" for i in range(10)]),
         "more than 100,000 values"),  # an alias bomb: refused before it is expanded
        ("model_name_or_path: demo\nx: " + "[" * 20000 + "]" * 20000 + "\n", "nests lists or mappings too deeply"),
    ],
)
def test_bad_configs_are_refused_with_the_reason(board, text, message):
    with pytest.raises(gr.Error, match=message):
        Automation(board).submit_run(text)
    assert board.jobs.list() == []


def test_unknown_runs_and_kinds(board):
    auto = Automation(board)
    with pytest.raises(gr.Error, match="no run"):
        auto.run_status("20200101-000000-train-0000")
    with pytest.raises(gr.Error, match="Unknown run kind"):
        auto.submit_run(CONFIG, kind="dance")


def test_a_secret_in_a_submitted_config_is_noted_by_name_in_the_board_log(board, caplog):
    """The README promises a note naming the variable to use; for /submit_run it reached no log at all."""
    import logging

    caplog.set_level(logging.INFO, logger="app.api")
    run_id = Automation(board).submit_run(CONFIG + "hf_hub_token: hf_abcdefghijklmnop123\n")
    assert any(run_id in r.getMessage() and "HF_TOKEN" in r.getMessage() for r in caplog.records)
    assert "hf_abcdefghijklmnop123" not in caplog.text
    assert "hf_abcdefghijklmnop123" not in (board.jobs.runs_dir / run_id / "config.yaml").read_text()
    board.jobs.wait(run_id, 30)


@pytest.mark.parametrize("line", ['hf_hub_token: "hf_abcdefghijklmnop123\n', "'hub_token': [hf_abcdefghijklmnop123\n"])
def test_a_config_that_is_no_yaml_never_quotes_its_token_in_the_refusal_or_the_board_log(board, caplog, line):
    """The YAML error quoted the line the parser was reading (`in what begins at line 2: `hf_hub_token: "hf_...``),
    in the reply and in the board's log line of the refused call."""
    import logging

    caplog.set_level(logging.INFO, logger="app.api")
    with pytest.raises(gr.Error, match=r"not valid YAML.*in what begins at line \d+: `\W*h\w*token\W*: \*\*\*`") as err:
        Automation(board).submit_run(CONFIG + line)
    assert "hf_abcdefghijklmnop123" not in str(err.value) and "rejected" in caplog.text
    assert "hf_abcdefghijklmnop123" not in caplog.text


@pytest.mark.parametrize(("key", "folder"), [("export_dir", "{root}/"), ("tokenized_path", "{root}/"),
                                             ("cache_dir", "{root}/"), ("export_dir", ""), ("dataset_dir", "")])
def test_a_folder_that_holds_a_nul_is_refused_with_the_reason(board, key, folder):
    """The allowed-roots check (an absolute folder to write) and the making of relative folders absolute resolved the
    path and raised `ValueError: embedded null byte` out of /submit_run (no message, a traceback in the board's log)
    for a value the config's own checks refuse."""
    folder = folder.format(root=board.workspace.root)
    with pytest.raises(gr.Error, match=rf"`{key}` holds U\+0000 \(NUL\)"):
        Automation(board).submit_run(CONFIG + f'{key}: "{folder}a\\0b"\n')
    assert board.jobs.list() == []


def test_relative_paths_of_a_submitted_config_are_read_from_the_boards_folder(board, monkeypatch, tmp_path):
    """The README's gradio_client example submits examples/sft_lora_demo.yaml (`dataset_dir: examples/data`): it runs
    on a board started in the repository root, and elsewhere is refused naming the folder it looked in."""
    auto = Automation(board)
    relative = CONFIG.replace(f"dataset_dir: {DEMO_DATA}", "dataset_dir: examples/data")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(gr.Error, match=str(tmp_path / "examples" / "data")):
        auto.submit_run(relative)
    monkeypatch.chdir(DEMO_DATA.parents[1])
    run_id = auto.submit_run(relative)
    assert board.jobs.wait(run_id, 30) == "completed"


@pytest.mark.parametrize("occupant", ["live run", "trained run", "file"])
def test_what_sits_at_the_configs_output_dir_does_not_refuse_a_submitted_run(board, tmp_path, occupant):
    """A submitted run writes to its own folder under runs/, whatever its output_dir says (README, Automation API).
    The README's example, submitted while `lf-engine train examples/sft_lora_demo.yaml` ran in a terminal, was
    refused: "`saves/demo/sft-lora` is the output folder of a run that is still going", a folder it never uses."""
    import json
    import subprocess
    import sys

    from engine.runs import process_start_time

    out = tmp_path / "saves" / "sft-lora"
    child = None
    if occupant == "file":
        out.parent.mkdir(parents=True)
        out.write_text("not a folder", encoding="utf-8")
    else:
        out.mkdir(parents=True)
        (out / "adapter_config.json").write_text("{}", encoding="utf-8")
    if occupant == "live run":
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
        started = None
        while started is None:
            started = process_start_time(child.pid)
        (out / "run.json").write_text(json.dumps({"id": "sft-lora", "kind": "train", "status": "running",
                                                  "pid": child.pid, "pid_started": started}), encoding="utf-8")
    try:
        config = CONFIG.replace("output_dir: /somewhere/else", f"output_dir: {out}")
        run_id = Automation(board).submit_run(config)
        assert board.jobs.wait(run_id, 30) == "completed"
    finally:
        if child is not None:
            child.kill()
            child.wait()
    assert (board.jobs.runs_dir / run_id / "config.yaml").is_file()
