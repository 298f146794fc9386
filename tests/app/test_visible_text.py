"""Hidden characters (a right-to-left override, zero-width spaces) show as marks, and new names refuse them."""

from __future__ import annotations

import json
import time

from app import forms, markup
from app.handler_errors import as_page_error
from app.tabs import chat, runs, train_data
from app.visible_text import name_problem, reveal

RLO = "\u202e"
DISGUISED = f"report{RLO}gnp.exe"  # reads as "reportexe.png"


def test_reveal_marks_reordering_and_invisible_characters():
    assert reveal(DISGUISED) == "report⟪U+202E⟫gnp.exe"
    assert reveal("a\u200bb\u2066c\u2069") == "a⟪U+200B⟫b⟪U+2066⟫c⟪U+2069⟫"
    # in running text, right-to-left marks and joiners (emoji, Persian) are ordinary; overrides are not
    text = "سلام\u200f 👩\u200d💻 " + RLO + "x"
    assert reveal(text, names=False) == "سلام\u200f 👩\u200d💻 ⟪U+202E⟫x"
    assert name_problem("plain-name_1.2") is None and name_problem(DISGUISED) == "U+202E"
    assert name_problem("a\u200bb\u200bc\x07") == "U+200B, U+0007"


def test_messages_and_pop_ups_show_the_marks():
    shown = markup.SafeMarkdown().postprocess(f"Run `{DISGUISED}` failed")
    assert RLO not in shown and "⟪U+202E⟫" in shown
    assert RLO not in as_page_error(ValueError(DISGUISED), "test").message


def disguised_run(runs_dir) -> str:
    run_id = f"20261206-000001-train-{RLO}fdp"
    folder = runs_dir / run_id
    folder.mkdir(parents=True)
    (folder / "config.yaml").write_text(f"model_name_or_path: demo\ndataset: {DISGUISED}\nstage: sft\n", encoding="utf-8")
    (folder / "run.json").write_text(json.dumps({"id": run_id, "kind": "train", "status": "failed",
                                                 "created_at": time.time(), "error": f"bad file {DISGUISED}"}))
    return run_id


def test_history_table_and_picker_show_marks(board):
    run_id = disguised_run(board.jobs.runs_dir)
    frame, ids = runs.table_frame(board, "en")
    assert ids == [run_id]  # the picker's values stay the real ids
    cells = " ".join(str(v) for v in frame.to_numpy().ravel())
    assert RLO not in cells and cells.count("⟪U+202E⟫") == 3  # id, dataset, reason
    assert runs.run_choices(ids) == [(reveal(run_id), run_id)]


def test_chat_shows_marks_for_overrides():
    shown = chat.to_chatbot([{"role": "user", "content": f"hi {RLO}olleh"},
                             {"role": "assistant", "content": "ok"}], "en")
    assert shown[0]["content"] == "hi ⟪U+202E⟫olleh"


def test_new_names_with_hidden_characters_are_refused(board, tmp_path):
    checked = forms.validate({"model_name_or_path": "demo", "export_dir": str(tmp_path / DISGUISED)}, "export")
    hidden = [p for p in checked.problems if p.code == "hidden_chars"]
    assert not checked.ok and len(hidden) == 1 and "U+202E" in hidden[0]
    upload = tmp_path / "rows.json"
    upload.write_text(json.dumps([{"instruction": "a", "output": "b"}]))
    message, name = train_data.upload_dataset(board, str(upload), f"data{RLO}set", "zh")
    assert name is None and "U+202E" in message and "请去掉" in message


def test_folder_and_config_pickers_show_marks(board):
    """A config file put in the workspace by hand (typed names are refused) shows its marks in the Train tab's picker."""
    from app.ui import build_ui

    board.workspace.configs_dir.mkdir(parents=True, exist_ok=True)
    (board.workspace.configs_dir / f"cfg{RLO}lmay.yaml").write_text("model_name_or_path: demo\n")
    demo = build_ui(board)
    picker = next(b for b in demo.blocks.values() if getattr(getattr(b, "label", None), "key", None) == "train_saved_configs")
    assert [tuple(c) for c in picker.choices] == [("cfg⟪U+202E⟫lmay", f"cfg{RLO}lmay")]
