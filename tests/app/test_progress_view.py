"""What the progress views show: status card, chart data (with gradio's colour quirk handled), redraw rules."""

from __future__ import annotations

import math
import time

from app import progress_view


def test_status_card_and_charts_of_a_finished_run(board):
    run_id = board.jobs.submit("train", {"fake_steps": 4})
    assert board.jobs.wait(run_id, 30) == "completed"
    card = progress_view.status_card(board, run_id, "en")
    assert "completed" in card and "step 4/4" in card and "100.0%" in card and "lf-completed" in card
    assert "已完成" in progress_view.status_card(board, run_id, "zh")
    loss = progress_view.loss_frame(board, run_id, "en")
    assert list(loss["series"].unique()) == ["training loss", "eval loss"]
    assert list(loss["step"]) == [1, 2, 3, 4, 4] and str(loss["step"].dtype) == "int64"
    lr = progress_view.lr_frame(board, run_id)
    assert len(lr) == 4 and lr["lr"].is_monotonic_decreasing
    assert "accuracy" not in card


def test_a_completed_run_is_not_shown_in_its_last_stage(board):
    """A prediction's last progress event says "predicting 32/32"; once the run completed its card said
    "completed ... stage: predicting · 32/32" (an export, whose last event is "done", read right)."""
    run_id = board.jobs.submit("predict", {"fake_steps": 2, "fake_stage": "predict"})
    assert board.jobs.wait(run_id, 30) == "completed"
    card = progress_view.status_card(board, run_id, "en")
    assert "stage: done · 2/2" in card and "predicting" not in card, card
    assert "阶段：完成" in progress_view.status_card(board, run_id, "zh")
    failed = board.jobs.submit("predict", {"fake_steps": 2, "fake_stage": "predict", "fake_fail": True})
    assert board.jobs.wait(failed, 30) == "failed"
    assert "stage: predicting" in progress_view.status_card(board, failed, "en")  # where it stopped


def test_the_card_shows_eval_accuracy_when_the_run_computes_it(board):
    run_id = board.jobs.submit("train", {"fake_steps": 2, "compute_accuracy": True})
    assert board.jobs.wait(run_id, 30) == "completed"
    assert "eval accuracy 0.8125" in progress_view.status_card(board, run_id, "en")
    assert "评估准确率 0.8125" in progress_view.status_card(board, run_id, "zh")


def test_the_card_shows_each_evaluation_set(board):
    run_id = board.jobs.submit("train", {"fake_steps": 2, "eval_on_each_dataset": True})
    assert board.jobs.wait(run_id, 30) == "completed"
    card = progress_view.status_card(board, run_id, "en")
    assert "eval first 0.75" in card and "eval second 0.25" in card  # both events of the step, merged
    assert "评估 first 0.75" in progress_view.status_card(board, run_id, "zh")


def test_missing_eval_series_is_padded_so_colours_stay_stable(board):
    run_id = board.jobs.submit("train", {"fake_steps": 3, "fake_fail": True, "val_size": 0.1, "eval_strategy": "steps"})
    assert board.jobs.wait(run_id, 30) == "failed"
    loss = progress_view.loss_frame(board, run_id, "en")
    evals = loss[loss["series"] == "eval loss"]
    assert len(evals) == 1 and math.isnan(evals["loss"].iloc[0]) and evals["step"].iloc[0] == 1
    assert progress_view.loss_frame(board, None, "en") is None and progress_view.lr_frame(board, None) is None


def test_a_run_that_never_evaluates_has_no_eval_series(board):
    """The legend named an "eval loss" series for runs with no evaluation data or no evaluation asked for."""
    for config in ({}, {"val_size": 0.1}, {"eval_strategy": "steps"}):  # evaluation data alone, or asked for alone
        run_id = board.jobs.submit("train", {"fake_steps": 3, "fake_fail": True, **config})
        assert board.jobs.wait(run_id, 30) == "failed"
        assert list(progress_view.loss_frame(board, run_id, "zh")["series"].unique()) == ["训练损失"], config
    run_id = board.jobs.submit("train", {"fake_steps": 3, "fake_fail": True, "eval_dataset": "b", "do_eval": True})
    assert board.jobs.wait(run_id, 30) == "failed"  # evaluates once, at its end: the series is there from the start
    assert list(progress_view.loss_frame(board, run_id, "en")["series"].unique()) == ["training loss", "eval loss"]


def test_watch_redraw_rules(board):
    assert progress_view.watch(board, "", None, "en")["card"].count("No run yet") == 1
    assert progress_view.watch(board, "", ["", 0, "en"], "en") is None  # nothing new: skip the update
    run_id = board.jobs.submit("train", {"fake_steps": 2})
    board.jobs.wait(run_id, 30)
    first = progress_view.watch(board, run_id, None, "en")
    assert first["reset"] and first["seen"][1] == -1  # another run: clear the charts, draw them next tick
    second = progress_view.watch(board, run_id, first["seen"], "en")
    assert not second["reset"] and second["changed"] and second["final"]
    assert progress_view.watch(board, run_id, second["seen"], "en") is None
    assert progress_view.watch(board, run_id, second["seen"], "zh")["reset"]  # new language, new series names
    # a watched run deleted in History: said in the card, not in the box headed "Why the run failed" (the red box
    # said a completed run "failed" once it was deleted)
    gone = progress_view.watch(board, "20200101-000000-train-dead", None, "en")
    assert gone["error"] == ""
    assert "Run <code>20200101-000000-train-dead</code> no longer exists" in gone["card"]
    assert "next run shows up here" in gone["card"]
    assert "运行 <code>20200101-000000-train-dead</code> 已不在" in progress_view.watch(
        board, "20200101-000000-train-dead", None, "zh")["card"]


def test_the_parallel_strategy_reads_in_the_page_language():
    single = {"strategy": "single", "world_size": 1, "sharded": False}
    assert progress_view.parallel_text(single, "en") == "single process · 1 process · not sharded"
    assert progress_view.parallel_text(single, "zh") == "单进程 · 1 个进程 · 未分片"
    ray = {"strategy": "fsdp2", "world_size": 2, "sharded": True, "backend": "gloo", "launcher": "ray"}
    assert progress_view.parallel_text(ray, "en") == "FSDP2 · 2 processes · sharded · gloo · via ray"
    assert progress_view.parallel_text(ray, "zh") == "FSDP2 · 2 个进程 · 已分片 · gloo · 经由 ray"
    zero = {"strategy": "deepspeed_zero3", "world_size": 8, "sharded": True}
    assert progress_view.parallel_text(zero, "zh") == "DeepSpeed ZeRO-3 · 8 个进程 · 已分片"


def test_generating_evaluations_show_their_scores():
    from app.monitor import eval_scores

    assert eval_scores({"eval_bleu-4": 13.9, "eval_rouge-l": 19.8, "eval_rouge-1": 25.0, "eval_runtime": 1.0}) == [
        ("BLEU-4", 13.9), ("ROUGE-L", 19.8)]
    assert eval_scores({"eval_loss": 1.0, "eval_a_loss": 2.0, "eval_a_runtime": 0.1}) == [("a", 2.0)]


def test_a_page_that_watches_no_run_watches_the_live_one(board):
    """A second browser (or one whose storage was cleared) said "No run yet. The progress of the next run shows up
    here." beside a running training run, inviting a second Start; as it loads, each tab that watches no run now
    watches the newest queued or running run of its kinds."""
    import gradio as gr

    from app.ui import build_ui

    demo = build_ui(board)
    (load,) = [fn for fn in demo.fns.values() if any(t[1] == "load" for t in fn.targets) and fn.outputs
               and fn.outputs == fn.inputs and all(isinstance(o, gr.BrowserState) for o in fn.outputs)]
    keys = [state.storage_key for state in load.outputs]  # one page-load event for the three tabs
    assert keys == ["lfboard-train-run", "lfboard-eval-run", "lfboard-export-run"]
    skip = type(gr.skip())
    assert all(isinstance(v, skip) for v in load.fn("", "", ""))  # nothing running: still "No run yet"
    run_id = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    board.jobs.wait(run_id, 30, statuses=("running",))
    train, evaluate, export = load.fn("", "", "")
    assert train == run_id and isinstance(evaluate, skip) and isinstance(export, skip)  # not another kind's
    assert isinstance(load.fn("20260101-000000-train-abcd", "", "")[0], skip)  # the page's own run stays
    board.jobs.abort(run_id)
    board.jobs.wait(run_id, 30)
    assert isinstance(load.fn("", "", "")[0], skip)


def test_a_stopped_run_says_what_it_kept(board):
    """Every aborted run's card said "Stopped on request; the last checkpoint is kept.", also a run cancelled while
    it waited in the queue (History gave its reason in English: "cancelled before it started"), a training run
    stopped before its first checkpoint, and an evaluation, which keeps none."""
    from app.tabs import runs

    first = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    queued = board.jobs.submit("train", {"fake_steps": 2})
    assert board.jobs.status(queued)["status"] == "queued"
    assert board.jobs.abort(queued) == "cancelled"
    card = progress_view.status_card(board, queued, "zh")
    assert "在开始前已取消" in card and "检查点" not in card
    frame, ids = runs.table_frame(board, "zh")
    assert frame.iloc[ids.index(queued), -1] == "开始前已取消"
    board.jobs.wait(first, 30, statuses=("running",))
    board.jobs.abort(first)  # at once: stopped before any checkpoint
    assert board.jobs.wait(first, 30) == "aborted"
    if not board.jobs.monitor(first).progress()["checkpoints"]:
        assert "before any checkpoint was saved" in progress_view.status_card(board, first, "en")
    second = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    deadline = time.time() + 30
    while (board.jobs.status(second).get("step") or 0) < 3:
        assert time.time() < deadline
        time.sleep(0.05)
    board.jobs.abort(second)
    assert board.jobs.wait(second, 30) == "aborted"  # the fake engine records a checkpoint as it stops
    assert "the last checkpoint is kept" in progress_view.status_card(board, second, "en")
    evaluation = board.jobs.submit("eval", {"fake_steps": 400, "fake_sleep": 0.05})
    board.jobs.wait(evaluation, 30, statuses=("running",))
    board.jobs.abort(evaluation)
    assert board.jobs.wait(evaluation, 30) == "aborted"
    card = progress_view.status_card(board, evaluation, "en")
    assert "<div>Stopped on request.</div>" in card and "checkpoint is kept" not in card
