"""The note under the dataset pickers names why a picked dataset_info.json entry is broken, in the page's language
around the engine's reason (the picker itself only says "name · broken")."""

from __future__ import annotations

import json

from app.tabs.train_data import dataset_note


def test_a_picked_broken_entry_says_why_in_each_language(tmp_path):
    (tmp_path / "good.json").write_text(json.dumps([{"instruction": "Hi", "input": "", "output": "Hello"}]))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"good": {"file_name": "good.json"}, "bad": "bad.json"}))
    assert dataset_note(str(tmp_path), ["good"], "en") == ""
    reason = 'write it as "bad": {"file_name": "bad.json"}'
    en = dataset_note(str(tmp_path), ["good", "bad", "bad"], "en")
    assert "cannot be used" in en and reason in en and en.count(reason) == 1
    zh = dataset_note(str(tmp_path), ["bad"], "zh")
    assert "无法使用" in zh and reason in zh and "cannot be used" not in zh


def test_the_picker_marks_a_broken_entry_in_the_pages_language_with_the_name_as_its_value(tmp_path):
    """The word "broken" after a malformed entry's name was English on a Chinese page: the label carries it as a
    translation key that the page shows in its language (and again after a switch, with no round trip that could
    answer late), while the value stays the dataset's name, whatever the language."""
    import re

    from app.i18n import load_locale
    from app.tabs.train import dataset_choices

    (tmp_path / "good.json").write_text(json.dumps([{"instruction": "Hi", "input": "", "output": "Hello"}]))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"good": {"file_name": "good.json"}, "bad": "bad.json"}))
    for lang in ("en", "zh"):
        choices = dict((value, label) for label, value in dataset_choices(str(tmp_path), lang)[0])
        assert set(choices) == {"good", "bad"}
        assert choices["good"] == "good · sft"
        label = choices["bad"]
        assert label.startswith("bad · ") and "broken" not in label.replace("train_dataset_kind_broken", "")
        key = json.loads(re.search(r"__i18n__(\{[^}]*\})", label).group(1))["key"]
        assert load_locale("en")[key] == "broken" and load_locale("zh")[key] == "条目有误"


def _notes(demo, lang):
    """{elem_id: the handler that composes that dataset note when the page's language changes}."""
    found = {}
    for block in demo.blocks.values():
        if getattr(block, "elem_id", None) in ("lf-dataset-note", "lf-eval-dataset-note"):
            fns = [f for f in demo.fns.values()
                   if (lang._id, "change") in [(t[0], t[1]) for t in f.targets] and block in f.outputs]
            found[block.elem_id] = (block, fns)
    return found


def test_the_dataset_notes_follow_a_switch_of_the_pages_language(tmp_path):
    """The note under the Train and the Evaluate pickers stayed in the language it was composed in until a dataset
    was picked again; the page's language switch now composes it again."""
    import gradio as gr

    from app.context import Board
    from app.jobs import JobManager
    from app.ui import build_ui
    from app.workspace import Workspace

    (tmp_path / "dataset_info.json").write_text(json.dumps({"bad": "bad.json"}))
    ws = Workspace(tmp_path / "ws").ensure()
    demo = build_ui(Board(ws, JobManager(ws.runs_dir)))
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    notes = _notes(demo, lang)
    assert set(notes) == {"lf-dataset-note", "lf-eval-dataset-note"}
    for elem_id, (note, fns) in notes.items():
        assert len(fns) == 1, f"{elem_id} is not composed again when the page's language changes"
        fn = fns[0]
        picker = next(b for b in fn.inputs if getattr(b, "elem_id", None) in ("lf-dataset", "lf-eval-dataset"))
        folder = fn.inputs[fn.inputs.index(picker) - 1]  # the dataset folder's dropdown, just before the picker
        assert isinstance(folder, gr.Dropdown) and "dataset_dir" in str(folder.label)
        for lang_code, words in (("zh", "无法使用"), ("en", "cannot be used")):
            values = {lang: lang_code, folder: str(tmp_path), picker: ["bad"]}
            out = fn.fn(*[values.get(b, [] if isinstance(b, gr.Dropdown) else None) for b in fn.inputs])
            update = out[fn.outputs.index(note)] if isinstance(out, (list, tuple)) else out
            assert words in update["value"] and update["visible"], (elem_id, update)


def test_what_an_upload_said_is_said_again_in_the_new_language_while_its_folder_and_picks_are_shown(tmp_path):
    from app.context import Board
    from app.jobs import JobManager
    from app.tabs.train_data import note_update, upload_said
    from app.workspace import Workspace

    ws = Workspace(tmp_path / "ws").ensure()
    board = Board(ws, JobManager(ws.runs_dir))
    (tmp_path / "empty.json").write_text("[]")
    said, registered = upload_said(board, str(tmp_path / "empty.json"), "", str(tmp_path), ["x"])
    assert registered is None
    assert "is empty" in note_update(str(tmp_path), ["x"], said, "en")["value"]
    zh = note_update(str(tmp_path), ["x"], said, "zh")["value"]
    assert "empty.json" in zh and "is empty" not in zh
    assert "empty.json" not in note_update(str(tmp_path), ["y"], said, "zh")["value"]  # picked since: not said again
    (tmp_path / "rows.json").write_text(json.dumps([{"instruction": "Hi", "input": "", "output": "Hello"}]))
    said, registered = upload_said(board, str(tmp_path / "rows.json"), "mine", str(tmp_path), ["x"])
    assert registered == "mine" and said["folder"] == str(ws.datasets_dir)
    said["picked"] = ["mine"]
    assert "mine" in note_update(str(ws.datasets_dir), ["mine"], said, "zh")["value"]
    assert "registered" in note_update(str(ws.datasets_dir), ["mine"], said, "en")["value"]
