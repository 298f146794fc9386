"""The History tab's Profile panel shows a finished run's per-module table."""

from __future__ import annotations

import json

from app.tabs.profile import profile_view, profiled_runs


def _profile(folder, modules):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "run.json").write_text(json.dumps({"id": folder.name, "kind": "train", "status": "completed"}))
    report = {"steps": 3, "device": "CPU", "clock": "wall clock", "step_ms": 12.5, "modules": modules}
    (folder / "profile.json").write_text(json.dumps(report))


def test_only_profiled_runs_are_offered_and_shown(board):
    runs_dir = board.jobs.runs_dir
    _profile(runs_dir / "run-a", [{"module": "model.layers.0.mlp", "calls": 1, "forward_ms": 2.0,
                                   "backward_ms": 3.0, "total_ms": 5.0, "share": 0.4}])
    (runs_dir / "run-b").mkdir()
    (runs_dir / "run-b" / "run.json").write_text(json.dumps({"id": "run-b", "kind": "train"}))
    assert profiled_runs(runs_dir, board.jobs.list()) == ["run-a"]
    summary, frame = profile_view(runs_dir, "run-a", "en")
    assert "over 3 steps on" in summary and "12.5 ms" in summary
    assert frame.to_dict("records") == [{"module": "model.layers.0.mlp", "calls": 1, "forward (ms)": 2.0,
                                         "backward (ms)": 3.0, "total (ms)": 5.0, "share": "40.0%"}]
    summary, frame = profile_view(runs_dir, "run-b", "zh")
    assert "run-b" in summary and frame.empty
    assert list(frame.columns) == ["模块", "调用次数", "前向（毫秒）", "反向（毫秒）", "合计（毫秒）", "占比"]
    assert "profile_modules" in profile_view(runs_dir, None, "en")[0]


def test_the_page_builds_with_the_panel(board):
    from app.ui import build_ui

    demo = build_ui(board)
    ids = {getattr(block, "elem_id", None) for block in demo.blocks.values()}
    assert {"lf-profile", "lf-profile-run", "lf-profile-table"} <= ids


def _refresh_and_view(demo):
    """The panel's refresh run when the page's language arrives, and the view chained after it."""
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    picker = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-profile-run")
    table = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-profile-table")
    fns = list(demo.fns.values())
    refresh = [f for f in fns if picker in f.outputs and (lang._id, "change") in f.targets]
    assert len(refresh) == 1
    view = [f for f in fns if table in f.outputs and f.trigger_after == fns.index(refresh[0])]
    assert len(view) == 1 and view[0].inputs == [picker, lang]
    return lang, refresh[0], view[0]


def test_the_panel_is_composed_again_when_the_page_language_is_set(board):
    """Composed on load, before the page's language is known, a Chinese page kept the panel's hint ("No profiled
    run yet: set profile_modules ...") and its table headers in English."""
    from app.ui import build_ui

    lang, refresh, view = _refresh_and_view(build_ui(board))
    refresh.fn(*[None if b is not lang else "zh" for b in refresh.inputs])
    summary, table = view.fn(None, "zh")
    assert summary.startswith("还没有剖析过的运行") and list(table.columns)[0] == "模块"


def test_a_late_refresh_leaves_a_pick_made_meanwhile_alone(board):
    """The refresh run when the page's language arrives or changes is answered with the pick as it was when it was
    sent; written back, it undid a pick made meanwhile (and showed the old run's table under the new pick's name)."""
    from app.ui import build_ui

    for name in ("run-a", "run-b"):
        _profile(board.jobs.runs_dir / name, [{"module": "m", "calls": 1, "forward_ms": 1.0, "backward_ms": 1.0,
                                                "total_ms": 2.0, "share": 1.0}])
    lang, refresh, view = _refresh_and_view(build_ui(board))
    update = refresh.fn(*["run-a" if b is not lang else "zh" for b in refresh.inputs])  # sent with run-a picked
    assert "value" not in update and sorted(update["choices"]) == ["run-a", "run-b"], update
    first = refresh.fn(*[None if b is not lang else "zh" for b in refresh.inputs])  # a page with no pick yet
    assert first["value"] in ("run-a", "run-b")
    assert "3" in view.fn("run-b", "zh")[0]  # the view follows the pick as it is when it is composed


def test_a_profile_from_elsewhere_neither_holds_nor_breaks_the_panel(board, tmp_path):
    """The panel reads every run's profile.json as the page opens: one that is a named pipe held that page load for
    good (a link to /dev/zero would fill the memory), and rows that are no objects or a share that is no number
    stopped the view with TypeError/ValueError."""
    import os
    import threading

    runs_dir = board.jobs.runs_dir
    _profile(runs_dir / "run-pipe", [])
    (runs_dir / "run-pipe" / "profile.json").unlink()
    os.mkfifo(runs_dir / "run-pipe" / "profile.json")
    _profile(runs_dir / "run-odd", [1, "x", {"module": "m", "share": "lots"}])
    (runs_dir / "run-odd" / "profile.json").write_text(json.dumps({
        "steps": {"a": 1}, "device": ["x"], "clock": 3, "step_ms": "fast",
        "modules": [1, "x", {"module": "m", "share": "lots"}]}))
    found = []
    lister = threading.Thread(target=lambda: found.append(profiled_runs(runs_dir, board.jobs.list())), daemon=True)
    lister.start()
    lister.join(20)
    assert found == [["run-odd"]]
    summary, frame = profile_view(runs_dir, "run-odd", "en")
    assert "?" in summary and frame.to_dict("records")[0]["module"] == "m" and len(frame) == 1
    assert frame.to_dict("records")[0]["share"] == "?"
