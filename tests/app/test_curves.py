"""Bounded curves (app/curves.py) and every chart path that uses them: a long run's charts stay within the bound."""

from __future__ import annotations

import json
import math
import random
import time
from pathlib import Path

import pytest

from app import curves, history, progress_view, reward_view
from app.curves import LIMIT, Curve, curve_of, iter_events
from app.tabs import runs

STEPS = 20_000


def spiky(n: int, seed: int = 0) -> list[tuple[int, float]]:
    rng = random.Random(seed)
    return [(s, 2.0 / (1 + s / 500) + rng.uniform(-0.05, 0.05)) for s in range(1, n + 1)]


def check_summary(points: list[tuple[int, float]], kept: list[tuple[int, float]], limit: int) -> None:
    assert len(kept) <= limit
    assert kept[0] == points[0] and kept[-1] == points[-1]
    assert kept == sorted(kept) and len(set(kept)) == len(kept)  # in order, no point twice
    assert set(kept) <= set(points)  # real points, never invented ones
    values = [v for _, v in points]
    assert min(values) in [v for _, v in kept] and max(values) in [v for _, v in kept]


@pytest.mark.parametrize("limit", [8, 9, 100, LIMIT])
def test_small_series_is_exact(limit):
    points = spiky(limit)
    curve = Curve(limit, points)
    assert curve.points() == points
    assert len(curve) == limit and curve.last == points[-1]
    assert Curve(limit).points() == [] and not Curve(limit)


@pytest.mark.parametrize("n", [LIMIT + 1, 1500, 4096, STEPS, 65_537])
def test_long_series_is_bounded_and_keeps_first_last_min_max(n):
    points = spiky(n, seed=n)
    kept = Curve(LIMIT, points).points()
    check_summary(points, kept, LIMIT)
    assert len(kept) >= LIMIT // 4  # still a detailed curve, not a handful of points


def test_every_prefix_stays_bounded_and_keeps_the_latest_point():
    curve = Curve(16)
    points = spiky(500, seed=3)
    for i, (step, value) in enumerate(points, 1):
        curve.append(step, value)
        kept = curve.points()
        check_summary(points[:i], kept, 16)


def test_a_spike_stays_visible():
    points = [(s, 1.0 - s * 1e-5) for s in range(1, STEPS + 1)]
    points[12_345] = (12_346, 9.5)  # one diverging step
    points[7_000] = (7_001, -3.0)  # and one dip
    kept = Curve(LIMIT, points).points()
    assert (12_346, 9.5) in kept and (7_001, -3.0) in kept


def test_nan_never_hides_a_number():
    points = [(1, math.nan), *((s, 1.0 + (s == 50) * 4) for s in range(2, 3000)), (3000, math.nan)]
    kept = Curve(LIMIT, points).points()
    assert len(kept) <= LIMIT and (50, 5.0) in kept
    assert kept[0][0] == 1 and math.isnan(kept[0][1]) and kept[-1][0] == 3000  # first and last stay, NaN or not


def test_append_cost_and_memory_do_not_grow_with_the_run():
    curve = Curve(LIMIT)
    for step, value in spiky(STEPS):
        curve.append(step, value)
    assert len(curve._buckets) <= LIMIT  # what is held, not what was seen
    t0 = time.perf_counter()
    for step in range(STEPS + 1, STEPS + 2001):
        curve.append(step, 1.0)
        curve.points()
    per_tick = (time.perf_counter() - t0) / 2000
    assert per_tick < 0.01  # an append plus a full chart's points: well under a tick


@pytest.mark.parametrize("limit", [0, 7, 2.5, None])
def test_bad_limit_is_refused(limit):
    with pytest.raises(ValueError, match="limit"):
        Curve(limit)


def test_iter_events_reads_lines_and_skips_torn_ones(tmp_path):
    path = tmp_path / "events.jsonl"
    path.write_text('{"event": "log", "step": 1}\n\nnot json\n[1, 2]\n{"event": "log", "step": 2}\n{"event": "lo')
    assert [e["step"] for e in iter_events(path)] == [1, 2]
    assert list(iter_events(tmp_path / "missing.jsonl")) == []
    assert curve_of(path, lambda e: (e["step"], 1.0)) == [(1, 1.0), (2, 1.0)]


# -- the charts of a long run -------------------------------------------------------------------------------------
def write_long_run(folder: Path, steps: int = STEPS, rl: bool = False, status: str = "running") -> None:
    """A training run that logged every step (and an eval every 100), as the engine writes it."""
    folder.mkdir(parents=True, exist_ok=True)
    now = time.time()
    lines = [{"time": now, "event": "start", "total_steps": steps, **({"stage": "grpo"} if rl else {})}]
    for step in range(1, steps + 1):
        event = {"time": now, "event": "log", "step": step, "total_steps": steps,
                 "loss": 2.0 / (1 + step / 1000) + (5.0 if step == 15_000 else 0.0), "lr": 1e-4 * (1 - step / steps)}
        if rl:
            event.update({"reward": step / steps, "rewards/fmt/mean": 0.5, "kl": 0.01,
                          "completions/mean_length": 40.0})
        lines.append(event)
        if step % 100 == 0:
            lines.append({"time": now, "event": "eval", "step": step, "eval_loss": 1.0})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in lines))
    (folder / "run.json").write_text(json.dumps({"id": folder.name, "kind": "train", "status": status,
                                                 "created_at": now, "started_at": now}))
    (folder / "config.yaml").write_text("stage: sft\nmodel_name_or_path: demo\n")


def series_sizes(frame, column: str = "series") -> dict[str, int]:
    return frame.groupby(column).size().to_dict()


def test_train_tab_tick_on_a_20000_step_run_sends_at_most_the_bound(board):
    write_long_run(board.jobs.runs_dir / "long")
    loss = progress_view.loss_frame(board, "long", "en")
    lr = progress_view.lr_frame(board, "long")
    sizes = series_sizes(loss)
    assert max(sizes.values()) <= LIMIT and len(sizes) == 2  # train and eval
    assert len(lr) <= LIMIT
    assert 7.0 > loss["loss"].max() > 5.0  # the spike at step 15,000 is on the chart
    assert loss["step"].max() == STEPS and lr["step"].min() == 1  # the first and the latest point

    folder = board.jobs.runs_dir / "long"  # more steps arrive: the next tick is still bounded and shows the newest
    with (folder / "events.jsonl").open("a") as fh:
        for step in range(STEPS + 1, STEPS + 51):
            fh.write(json.dumps({"event": "log", "step": step, "loss": 0.1, "lr": 0.0}) + "\n")
    loss = progress_view.loss_frame(board, "long", "en")
    assert max(series_sizes(loss).values()) <= LIMIT and loss["step"].max() == STEPS + 50


def test_rewards_live_view_of_a_long_rl_run_is_bounded(board):
    write_long_run(board.jobs.runs_dir / "rl", rl=True)
    view = reward_view.live_view(board, "rl", "total")
    assert view is not None
    assert max(series_sizes(view["reward"]).values()) <= LIMIT
    assert len(view["kl"]) <= LIMIT and len(view["length"]) <= LIMIT
    assert view["reward"]["step"].max() == STEPS


def test_history_overlays_of_long_runs_are_bounded(board):
    for name in ("a", "b"):
        write_long_run(board.jobs.runs_dir / name, rl=True, status="completed")
    frame = runs.overlay_frame(board, ["a", "b"])
    assert series_sizes(frame, "run") == {"a": len(history.loss_points(board.jobs.runs_dir / "a")), "b": len(
        history.loss_points(board.jobs.runs_dir / "b"))}
    assert max(series_sizes(frame, "run").values()) <= LIMIT
    assert 7.0 > frame["loss"].max() > 5.0
    rewards = reward_view.reward_overlay(board, ["a", "b"])
    assert max(series_sizes(rewards, "run").values()) <= LIMIT and rewards["step"].max() == STEPS


def test_a_short_run_is_drawn_exactly(board):
    write_long_run(board.jobs.runs_dir / "short", steps=300)
    loss = progress_view.loss_frame(board, "short", "en")
    assert series_sizes(loss) == {"training loss": 300, "eval loss": 3}
    assert history.loss_points(board.jobs.runs_dir / "short") == [
        (s, 2.0 / (1 + s / 1000)) for s in range(1, 301)]


def test_the_monitor_keeps_flat_memory_and_the_exact_last_loss(board):
    write_long_run(board.jobs.runs_dir / "long")
    mon = board.jobs.monitor("long")
    assert len(mon.loss) == STEPS and mon.last_loss() == pytest.approx(2.0 / 21)
    assert all(len(c._buckets) <= LIMIT for c in (mon.loss, mon.lr, mon.eval_loss))
    assert curves.LIMIT == LIMIT


def test_a_tick_parses_only_the_new_lines(board, monkeypatch):
    """The monitor and the RL follower remember their byte offsets: after the first read of a 20,000-step run, a
    tick parses the lines appended since, never the whole file again."""
    import engine.runs as engine_runs

    write_long_run(board.jobs.runs_dir / "rl", rl=True)
    progress_view.loss_frame(board, "rl", "en")
    reward_view.live_view(board, "rl", "total")
    parsed = []
    real_loads = json.loads
    monkeypatch.setattr(engine_runs.json, "loads", lambda text, *a, **k: parsed.append(1) or real_loads(text, *a, **k))
    with (board.jobs.runs_dir / "rl" / "events.jsonl").open("a") as fh:
        fh.write(json.dumps({"event": "log", "step": STEPS + 1, "loss": 0.1, "lr": 0.0, "reward": 1.0}) + "\n")
    loss = progress_view.loss_frame(board, "rl", "en")
    view = reward_view.live_view(board, "rl", "total")
    assert len(parsed) == 2  # one new line, read once by the monitor and once by the RL follower
    assert loss["step"].max() == STEPS + 1 and view["reward"]["step"].max() == STEPS + 1


def test_event_reader_reads_a_long_log_in_chunks(tmp_path):
    from engine.runs import EventReader

    path = tmp_path / "events.jsonl"
    events = [{"event": "log", "step": i, "pad": "x" * (i * 37 % 300)} for i in range(200)]
    path.write_text("".join(json.dumps(e) + "\n" for e in events))
    reader = EventReader(path)
    sizes = []
    real = reader._read
    reader._read = lambda n: sizes.append(n) or real(n)
    assert list(reader.iter_new(chunk_bytes=100)) == events  # lines longer than a chunk come out whole
    assert len(sizes) > 100 and set(sizes) == {100}
    with path.open("a") as fh:
        fh.write(json.dumps({"event": "end"}) + "\n" + '{"event": "lo')
    assert list(reader.iter_new(chunk_bytes=100)) == [{"event": "end"}]  # then only what was appended
    with path.open("a") as fh:
        fh.write('g", "step": 200}\n')
    assert reader.read_new() == [{"event": "log", "step": 200}]
