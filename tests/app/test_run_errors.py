"""A run that a full disk ended is explained in the page's language: run.json keeps the English text (the CLI's,
other readers') and records the message's parameters beside its code (``error_params``), from which the board
composes it through the locales; a run.json written before that shows its English text as it did."""

from __future__ import annotations

import time

from app import progress_view
from app.run_errors import local_error
from app.tabs.runs import table_frame
from engine.runs import RunFolder


def test_a_full_disk_is_explained_in_the_pages_language(board):
    run_id = board.jobs.submit("train", {"fake_steps": 1, "fake_disk_full": True})
    assert board.jobs.wait(run_id, 30) == "failed"
    folder = board.jobs.runs_dir / run_id
    info = RunFolder(folder).info()
    english = f"No space left on device: {folder}, free "
    assert info["error"].startswith(english) and info["error_code"] == "disk_full"  # as the CLI and API read it
    params = info["error_params"]
    assert params["path"] == str(folder) and params["then"] == "resume" and params["removed"] == []
    assert f"free {params['free_mb']:,} MB" in info["error"]  # the same measure in both
    zh = progress_view.watch(board, run_id, None, "zh")["error"]
    assert zh.startswith("【磁盘已满】\n\n设备上没有剩余空间：" + str(folder)) and f"{params['free_mb']:,} MB" in zh
    assert english not in zh and "原始说明（英文）" not in zh and "然后恢复该运行。" in zh
    en = progress_view.watch(board, run_id, None, "en")["error"]
    assert en.startswith("Disk full:\n\n" + english)
    frame, _ = table_frame(board, "zh")
    reason = frame.iloc[list(frame.iloc[:, 0]).index(run_id)].tolist()
    assert any(str(cell).startswith("【磁盘已满】设备上没有剩余空间") for cell in reason), reason

    # a run.json written before error_params: its English text, under the translated heading, as before
    RunFolder(folder).update(error_params=None)
    old = progress_view.watch(board, run_id, None, "zh")["error"]
    assert old.startswith("【磁盘已满】以下是引擎的原始说明（英文）：\n\n" + english)


def test_the_stored_parameters_make_each_message():
    params = {"path": "/ws/runs/r1", "free_mb": 1234, "then": "start", "removed": ["checkpoint-4"]}
    assert local_error("en", "disk_full", params) == (
        "No space left on device: /ws/runs/r1, free 1,234 MB. Free some space (delete old runs or checkpoints, or set "
        "`save_total_limit`), then start the run again. Removed the incomplete checkpoint-4 (it could not be resumed "
        "from).")
    zh = local_error("zh", "disk_full", {**params, "free_mb": None})
    assert "可用 未知 MB" in zh and "然后重新开始该运行。" in zh and zh.endswith("已删除不完整的 checkpoint-4（无法从它恢复）。")
    too_large = local_error("zh", "file_too_large", {**params, "then": "resume", "removed": []})
    assert too_large.startswith("文件过大：/ws/runs/r1 下") and too_large.endswith("然后恢复该运行。")
    # no parameters (an older run.json), or a code whose words are the engine's own: shown as written
    assert local_error("zh", "disk_full", None) is None and local_error("zh", "config", params) is None


def test_a_run_stopped_on_request_says_so_in_the_pages_language(board):
    run_id = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    deadline = time.time() + 30
    while RunFolder(board.jobs.runs_dir / run_id).status() != "running":
        assert time.time() < deadline
        time.sleep(0.05)
    board.jobs.abort(run_id)
    assert board.jobs.wait(run_id, 30) == "aborted"
    assert RunFolder(board.jobs.runs_dir / run_id).info()["error"] == "stopped by request"  # the engine's words
    frame, _ = table_frame(board, "zh")
    row = [str(cell) for cell in frame.iloc[list(frame.iloc[:, 0]).index(run_id)].tolist()]
    assert "已按要求停止" in row and not any("stopped by request" in cell for cell in row), row


def test_a_process_that_ended_without_its_outcome_is_explained_in_the_pages_language(board):
    run_id = board.jobs.submit("train", {"fake_steps": 1, "fake_silent_exit": True})
    assert board.jobs.wait(run_id, 30) == "failed"
    info = RunFolder(board.jobs.runs_dir / run_id).info()
    assert info["error"].startswith("The process exited with code 3. Last lines of its log:\n")  # the board's English
    assert info["error_code"] == "exit_code" and info["error_params"] == {"exit_code": 3}
    last = info["error"].splitlines()[-1]
    zh = progress_view.watch(board, run_id, None, "zh")["error"]
    assert zh.startswith("【") and "\n\n进程以退出码 3 结束。\n" in zh and last in zh and "The process" not in zh
    frame, _ = table_frame(board, "zh")
    row = [str(cell) for cell in frame.iloc[list(frame.iloc[:, 0]).index(run_id)].tolist()]
    assert any("进程以退出码 3 结束。 … " + last in cell for cell in row), row  # the log's last line, as before


def test_a_lost_secret_is_explained_in_the_pages_language():
    params = {"secrets": ["HF_TOKEN", "WANDB_API_KEY"]}
    zh = local_error("zh", "secret_lost", params)
    assert "（HF_TOKEN, WANDB_API_KEY）" in zh and zh.endswith("请重新提交。")
    assert local_error("en", "lost", {"exit_code": None}).startswith("The process ended while the board was not")


def test_hostile_error_params_are_shown_bounded_or_as_written():
    """run.json is a file: a value of the wrong type, a number too large to print, a huge list or text neither
    raises nor fills the page; a value that cannot be what the engine wrote falls back to the English ``error``."""
    huge = 10**5000  # str() of it raises ValueError (Python's 4300-digit limit)
    assert local_error("zh", "exit_code", {"exit_code": huge}) is None and local_error("zh", "exit_code", {
        "exit_code": 10**18}) is None
    assert local_error("zh", "exit_code", {"exit_code": True}) is None  # not an exit code
    assert "未知 MB" in local_error("zh", "disk_full", {"path": "/x", "free_mb": huge})
    assert local_error("zh", "disk_full", {"path": ["a", "b"]}) is None  # a path is text
    assert local_error("zh", ["disk_full"], {"path": "/x"}) is None
    message = local_error("en", "disk_full", {"path": "P" * 10**6, "then": "T" * 10**6,
                                              "removed": [f"checkpoint-{i}" for i in range(10**5)] + [{"a": 1}]})
    assert len(message) < 3000 and message.count("checkpoint-") == 20 and "(+99980)" in message
    assert "{'a': 1}" not in message
    secrets = local_error("en", "secret_lost", {"secrets": ["KEY"] * 10**5})
    assert len(secrets) < 1000 and "(+99980)" in secrets


def test_a_huge_error_params_list_does_not_flood_history_or_the_run_view(board):
    run_id = board.jobs.submit("train", {"fake_steps": 1, "fake_disk_full": True})
    assert board.jobs.wait(run_id, 30) == "failed"
    folder = board.jobs.runs_dir / run_id
    RunFolder(folder).update(error_params={"path": str(folder), "then": "resume",
                                           "removed": [f"checkpoint-{i}" for i in range(10**5)]})
    frame, ids = table_frame(board, "zh")
    reason = " ".join(map(str, frame.iloc[ids.index(run_id)].tolist()))
    assert "设备上没有剩余空间" in reason  # History cuts its reason short in any case
    shown = progress_view.watch(board, run_id, None, "zh")["error"]
    assert "(+99980)" in shown and len(shown) < 5000  # was every one of the 100,000 names (1.8 MB)
