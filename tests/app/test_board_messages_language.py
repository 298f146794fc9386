"""The board's own messages (the job manager's refusals, the notes on missing engine parts) come in the page's
language, from locales/, not in English whatever the page shows."""

from __future__ import annotations

import re

from app import catalog, topbar
from app.jobs import JobError
from app.tabs import runs

HAN = re.compile(r"[\u4e00-\u9fff]")


def test_a_job_error_is_english_as_text_and_in_the_pages_language_on_the_page():
    err = JobError("job_abort_first", run="r1", status="running")
    assert str(err) == "Run `r1` is still running; abort it before deleting it."
    zh = err.text("zh")
    assert "r1" in zh and "运行中" in zh and "abort" not in zh and HAN.search(zh)
    raw = JobError("No space left on device: /ws/runs. Free some space.")  # a message as it is
    assert raw.text("zh") == str(raw) == "No space left on device: /ws/runs. Free some space."


def test_deleting_a_running_run_says_why_in_chinese(board, monkeypatch):
    def refuse(run_id):
        raise JobError("job_abort_first", run=run_id, status="running")

    monkeypatch.setattr(board.jobs, "delete", refuse)
    text = runs.delete_runs(board, ["r1"], "zh")
    assert "请先中止" in text and "abort it before deleting" not in text
    assert "abort it before deleting it" in runs.delete_runs(board, ["r1"], "en")


def test_a_missing_run_is_said_in_chinese(board):
    try:
        board.jobs.folder("nope")
    except JobError as err:
        assert "nope" in err.text("zh") and HAN.search(err.text("zh")) and "There is no run" in str(err)
    else:
        raise AssertionError("no JobError")


def test_notes_on_missing_engine_parts_follow_the_page_language(board, monkeypatch):
    def missing(modules, name):
        raise catalog.EngineMissing(f"{modules[0]}.{name}", "No module named 'engine.x'")

    monkeypatch.setattr(catalog, "_engine_attr", missing)
    _, note = catalog.models("zh")
    assert "engine.models.registry.list_models" in note and "pip install -e ." in note and HAN.search(note)
    assert catalog.templates("en")[1].startswith("The engine function `engine.templates.list_templates`")
    shown = topbar.load_values(board, "zh")[0]["value"]
    assert shown.count("引擎函数") == 2 and "is not available" not in shown


def test_a_full_disk_is_said_in_the_pages_language(tmp_path, monkeypatch):
    """Submitting on a full disk: the refusal names the folder and its free space in English and in Chinese."""
    import errno

    from app import jobs as jobs_module
    from app.jobs import JobManager
    from engine.runs import RunFolder

    def full(folder, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    manager = JobManager(tmp_path / "runs")
    monkeypatch.setattr(RunFolder, "create", full)
    try:
        manager.submit("train", {"fake_steps": 1})
    except JobError as err:
        english, chinese = str(err), err.text("zh")
    else:
        raise AssertionError("no JobError")
    folder = str(manager.runs_dir)
    assert english.startswith(f"No space left on device: {folder}, free ") and "then try again" in english
    assert folder in chinese and "设备上没有剩余空间" in chinese and "MB" in chinese and "No space" not in chinese
    monkeypatch.setattr(jobs_module, "free_mb", lambda path: None)
    unknown = jobs_module.disk_full_error(folder)
    assert "cannot be read" in str(unknown) and "无法读取" in unknown.text("zh") and folder in unknown.text("zh")


def test_the_devices_line_is_composed_again_as_the_page_language_changes(board, monkeypatch):
    """A language switch redraws the top bar's devices line at once (it waited for the 4 s tick, in the old one)."""
    import gradio as gr

    from app.ui import build_ui

    monkeypatch.setattr(catalog.ENVIRONMENT, "get", lambda: ({"cpu": {"cores": 2}, "devices": []}, None))
    demo = build_ui(board)
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    devices = next(b for b in demo.blocks.values() if "lf-devices" in (getattr(b, "elem_classes", None) or []))
    (on_switch,) = [f for f in demo.fns.values() if (lang._id, "change") in [tuple(t[:2]) for t in f.targets]
                    and devices in f.outputs]
    assert isinstance(on_switch.inputs[2], gr.Textbox) and on_switch.inputs[2] is lang
    # the known checkpoints, what the page shows, the language, the picker and the run it follows
    _, _, line, shown, *_ = on_switch.fn([], {}, "zh", "", None)
    assert line.startswith("设备") and "2 核" in line
    _, _, line, *_ = on_switch.fn([], shown, "en", "", None)
    assert line.startswith("Devices: CPU: 2 cores")


def test_the_chat_s_tool_titles_follow_a_switch_of_the_page_language(board):
    """The chat box titled a tool call or result in the language the page had when it was sent, for good."""
    import gradio as gr

    from app.ui import build_ui

    demo = build_ui(board)
    relabel = next(f.fn for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_relabel")
    call = {"role": "assistant", "content": "", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "now", "arguments": "{}"}}]}
    convo = [{"role": "user", "content": "time?"}, call, {"role": "tool", "content": "12:00"}]
    shown, base = relabel(convo, [], "zh")
    assert [m.get("metadata", {}).get("title") for m in shown] == [None, "工具调用", "工具结果"]
    assert base == gr.skip()  # nothing to retitle: the box is left as it is (a reply may be streaming into it)
    shown, _ = relabel(convo, [], "en")
    assert [m.get("metadata", {}).get("title") for m in shown] == [None, "Tool call", "Tool result"]
    assert relabel([{"role": "user", "content": "hi"}], [], "zh") == (gr.skip(), gr.skip())


def test_nothing_the_page_fills_as_it_loads_shows_gradios_timer(board):
    """The top bar's model list and checkpoints (and the Train form, History's table) are filled by page-load
    events: without show_progress="hidden" the pickers showed gradio's "0.7s" timer while they were pending."""
    from app.ui import build_ui

    demo = build_ui(board)
    loading = {i for i, f in demo.fns.items() if any(target[1] == "load" for target in f.targets)}
    step = True
    while step:  # and everything chained after them with .then
        step = {i for i, f in demo.fns.items() if i not in loading and f.trigger_after in loading}
        loading |= step
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    loading |= {i for i, f in demo.fns.items() if (lang._id, "change") in [tuple(t[:2]) for t in f.targets]}
    shown = {f"{i} {demo.fns[i].name}": [getattr(o, "elem_id", None) for o in demo.fns[i].outputs] for i in loading
             if demo.fns[i].fn is not None and demo.fns[i].outputs and demo.fns[i].show_progress != "hidden"}
    assert len(loading) > 10 and shown == {}


def test_element_ids_are_unique_in_the_page(board):
    """Train, Evaluate and Chat each had `cfg-cutoff_len`, `cfg-max_samples`, `cfg-temperature`...: one id twice in a
    page is invalid HTML, and a `#cfg-...` selector found whichever came first."""
    import collections

    from app.ui import build_ui

    demo = build_ui(board)
    ids = collections.Counter(getattr(b, "elem_id", None) for b in demo.blocks.values())
    assert {elem: n for elem, n in ids.items() if elem and n > 1} == {}
    assert {"cfg-max_samples", "cfg-eval-max_samples", "cfg-temperature", "cfg-eval-temperature",
            "cfg-chat-temperature", "cfg-export-export_size"} <= set(ids)


def test_the_evaluate_tables_are_headed_in_the_pages_language_as_the_tab_first_opens(board):
    """On a Chinese page the Evaluate tab's two tables showed "metric | value" and "prompt | label | predict" for
    about 5 s after the tab was first opened: gradio draws a tab's components when it is first shown, from the headers
    they were built with (the column keys), and the translated empty tables sent as the page's language arrived
    reached them only with a later update. They are built with translation keys now, which the page shows in its
    language from the first paint (in Chromium: 指标 | 数值 at once, where 4.7 s of English was seen before)."""
    from app.i18n import L
    from app.tabs import profile, runs
    from app.tabs.evaluate import METRIC_COLUMNS, PREDICTION_COLUMNS
    from app.ui import build_ui

    demo = build_ui(board)
    # History's run table and its profile table were built with the column keys too ("id | kind | status ...")
    for elem_id, columns in (("lf-eval-metrics", METRIC_COLUMNS), ("lf-eval-predictions", PREDICTION_COLUMNS),
                             ("lf-runs-table", runs.COLUMNS), ("lf-profile-table", profile.COLUMNS)):
        table = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == elem_id)
        assert [str(h) for h in table.get_config()["headers"]] == [str(L(f"col_{c}")) for c in columns]
