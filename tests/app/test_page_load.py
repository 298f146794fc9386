"""What the page costs the browser as it loads (app.ui.quiet_progress): gradio's page keeps a loading status for every
component an event outputs to and sends them all again on every status message of every event, so an event that
shows no progress records none, and the Train form's page load (173 fields) leaves no status behind."""

from __future__ import annotations


def _dependencies(board) -> list[dict]:
    from app.ui import build_ui

    return build_ui(board).get_config_file()["dependencies"]


def test_events_that_show_no_progress_keep_no_loading_status_on_their_outputs(board):
    deps = _dependencies(board)
    hidden = [d for d in deps if d["show_progress"] == "hidden"]
    assert len(hidden) > 40  # the load-time, timer and background events
    assert all(d["show_progress_on"] == [] for d in hidden)
    shown = [d for d in deps if d["show_progress"] != "hidden"]
    assert shown and all(d["show_progress_on"] is None for d in shown)  # Start, Chat's send... keep theirs
    form_load = [d for d in deps if any(t[1] == "load" for t in d["targets"]) and len(d["outputs"]) > 100]
    assert len(form_load) == 1 and form_load[0]["show_progress_on"] == []


def _form_load(demo):
    (fn,) = [f for f in demo.fns.values() if any(e == "load" for _, e in f.targets) and len(f.outputs) > 100]
    return fn


def test_the_train_form_sends_only_what_differs_from_the_page_and_its_command_with_it(board):
    """A page opened on the settings it was built with gets no field again (a field set again fires its ``change``,
    and the form's preview, which reads all 175 inputs, ran twice at every page load); the command and YAML come
    with the load instead. A field the last Start changed since the board started is sent."""
    import gradio as gr

    from app.ui import build_ui
    from app.workspace import LAST_CONFIG

    demo = build_ui(board)
    load = _form_load(demo)
    out = load.fn("", "")
    fields, (command, yaml_text, pending) = out[:-3], out[-3:]
    assert len(fields) > 150 and all(v == gr.skip() for v in fields)
    assert "lf-engine train -" in command and "model_name_or_path: demo" in yaml_text and pending

    started = {**board.workspace.startup_settings(), "learning_rate": 0.000321}
    board.workspace.save_config(LAST_CONFIG, started)
    out = load.fn(pending, "en")
    assert [value for value in out[:-3] if value != gr.skip()] == [0.000321]
    assert "learning_rate: 0.000321" in out[-2] and out[-1] == pending  # the page's pending run id is kept


def test_skip_unchanged_sends_a_picker_whose_choices_grew():
    import gradio as gr

    from app.widgets import skip_unchanged

    with gr.Blocks():
        pick = gr.Dropdown(choices=["a", "b"], value="a")
        box = gr.Textbox("x")
    same = gr.update(value="a", choices=["a", "b"])
    grown = gr.update(value="a", choices=["a", "b", "c"])
    assert skip_unchanged([pick, box], [same, "x"]) == [gr.skip(), gr.skip()]
    assert skip_unchanged([pick, box], [grown, "y"]) == [grown, "y"]


def test_the_loaded_preview_of_a_config_that_cannot_run_follows_the_pages_language(board):
    """The page load composes the Train preview before the page's language is known (its `lang` is still empty), so
    a config that cannot run was headed in English on a Chinese page until a field changed. The heading now follows
    the language: after the load (the language came first) and on the language's change (it came later)."""
    import gradio as gr

    from app.i18n import t
    from app.tabs.train import retitled_preview
    from app.ui import build_ui
    from app.workspace import LAST_CONFIG

    board.workspace.save_config(LAST_CONFIG, {**board.workspace.startup_settings(), "learning_rate": -1.0})
    demo = build_ui(board)
    yaml_text = _form_load(demo).fn("", "")[-2]
    assert yaml_text.startswith(f"# {t('en', 'train_invalid')}\n") and "learning_rate" in yaml_text
    wired = [f for f in demo.fns.values() if getattr(f.fn, "__wrapped__", f.fn) is retitled_preview]
    assert len(wired) == 2 and all(len(f.inputs) == 2 and len(f.outputs) == 1 for f in wired)
    assert any(e == "change" for f in wired for _, e in f.targets)  # the language's change
    assert any(f.trigger_after == _form_load(demo)._id for f in wired)  # then, after the page load
    zh = retitled_preview(yaml_text, "zh")
    assert zh == yaml_text.replace(t("en", "train_invalid"), t("zh", "train_invalid"), 1)
    assert retitled_preview(zh, "zh") == gr.skip() and retitled_preview(zh, "") == gr.skip()
    assert retitled_preview(zh, "en") == yaml_text
    assert retitled_preview("model_name_or_path: demo\n", "zh") == gr.skip()  # a config that runs has no heading
