"""The engine's messages in the page's language: a translated heading per kind (a stable code), the text as written."""

from __future__ import annotations

import json
import re

import pytest

from app import engine_text, forms
from app.i18n import LANGUAGES, load_locale
from app.tabs import train
from engine.errors import ERROR_CODES, Problem, coded, error_code
from engine.runs import RunFolder

CJK = re.compile(r"[\u4e00-\u9fff]")


def demo_mapping(**changes):
    mapping = {"model_name_or_path": "demo", "stage": "sft", "do_train": True, "finetuning_type": "lora",
               "template": "chatml", "dataset_dir": "/nonexistent-lf-folder", "dataset": "nothing_here",
               "output_dir": "/tmp/lf-never-written"}
    mapping.update(changes)
    return mapping


def test_preflight_and_config_problems_carry_codes():
    checked = forms.validate(demo_mapping(), "train")
    assert checked.problems and all(isinstance(p, Problem) for p in checked.problems)
    assert "data" in {p.code for p in checked.problems}
    bad = forms.validate(demo_mapping(learning_rat=1e-4), "train")  # a typo: the config's own check
    assert [p.code for p in bad.problems] == ["config"] and "learning_rate" in bad.problems[0]
    missing = forms.validate(demo_mapping(model_name_or_path="/nonexistent-lf-model"), "train")
    assert "model" in {p.code for p in missing.problems}


def test_a_model_config_nested_too_deeply_gets_the_model_checks_message(tmp_path):
    """The board's own read of config.json (for the pre-quantized question) let a RecursionError through, so the
    form said only "The pre-flight check failed: maximum recursion depth exceeded..."; now it leaves the file to the
    model check, whose message names the file and the fix."""
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text("[" * 100_000 + "]" * 100_000)
    problems = forms.validate(demo_mapping(model_name_or_path=str(model)), "train").problems
    assert f"{model / 'config.json'} nests lists or objects too deeply to be read" in "\n".join(problems), problems
    assert not [p for p in problems if "pre-flight check failed" in p or "recursion" in p]
    assert "model" in {p.code for p in problems}


def test_chinese_frames_each_problem_and_keeps_the_engine_text():
    problems = [Problem("`dataset: nothing_here` is not in /x/dataset_info.json", "data"),
                Problem("A message from a check added tomorrow", "some_new_code"), "a plain string"]
    zh = engine_text.problems_text("zh", "运行未开始：", problems)
    lines = zh.splitlines()
    assert CJK.search(lines[0])  # the heading
    assert "**数据集**" in lines[1] and "`dataset: nothing_here` is not in /x/dataset_info.json" in lines[1]
    assert "**引擎提示**" in lines[2] and "A message from a check added tomorrow" in lines[2]  # unknown code
    assert "**引擎提示**" in lines[3] and "a plain string" in lines[3]
    en = engine_text.problems_text("en", "Not started:", problems)
    assert en.splitlines()[1] == "- **Dataset**: `dataset: nothing_here` is not in /x/dataset_info.json"


def test_start_in_chinese_shows_a_chinese_frame(board):
    message, run_id = train.start_run(board, demo_mapping(), "", "zh")
    assert run_id is None
    assert "**数据集**：`dataset_dir: /nonexistent-lf-folder` does not exist" in message


def test_every_code_has_a_heading_in_every_language():
    assert set(ERROR_CODES.values()) <= set(engine_text.CODES)
    for lang in LANGUAGES:
        strings = load_locale(lang)
        assert not [c for c in engine_text.CODES if f"ekind_{c}" not in strings], lang


def test_error_codes_from_exception_classes():
    from engine.config import ConfigError
    from engine.data.errors import DatasetError
    from engine.multimodal.errors import MediaError

    assert error_code(ConfigError) == "config" and error_code(DatasetError) == "data"
    assert error_code(MediaError) == "media" and error_code(RuntimeError) == "crash" and error_code(None) is None
    assert [p.code for p in coded("x", [Problem("a", "y"), "b"])] == ["y", "x"]
    assert ConfigError(["one"]).problems[0].code == "config"


def test_a_failed_run_records_its_code_and_the_board_frames_it(tmp_path):
    from engine.data.errors import DatasetError
    from engine.lifecycle import JobContext

    with pytest.raises(DatasetError):
        with JobContext(tmp_path / "run", "train"):
            raise DatasetError("`dataset: x` has no rows")
    info = json.loads((tmp_path / "run" / "run.json").read_text())
    assert info["status"] == "failed" and info["error_code"] == "data"
    end = json.loads((tmp_path / "run" / "events.jsonl").read_text().splitlines()[-1])
    assert end["error_code"] == "data"
    text = engine_text.error_text("zh", info["error_code"], info["error"])
    assert text.startswith("【数据集】") and "`dataset: x` has no rows" in text
    assert engine_text.error_text("en", "data", info["error"]) == "Dataset:\n\n" + info["error"]


def test_the_board_codes_the_outcomes_it_decides(tmp_path):
    from app.run_outcome import decide

    folder = RunFolder(tmp_path / "r")
    folder.path.mkdir()
    (folder.path / "stdout.log").write_text("Traceback...\nBoom\n")
    status, error = decide(folder, 3, None)
    assert status == "failed" and error.code == "exit_code"
    assert decide(folder, None, "aborted")[1].code == "aborted"
    assert decide(folder, 1, "lost")[1].code == "lost"


@pytest.mark.parametrize("line, error, code", [
    ('["end"]', "The process exited with code 1.", "exit_code"),  # was AttributeError: 'list' object has no 'get'
    ('"end"', "The process exited with code 1.", "exit_code"),
    (json.dumps({"event": "end", "status": "failed", "error": "boom", "error_code": ["x"]}), "boom", None),
    (json.dumps({"event": "end", "status": "failed", "error": {"a": 1}, "error_code": "crash"}), '{"a": 1}', "crash"),
    (json.dumps({"event": "end", "status": ["failed"], "error": "boom"}), "The process exited with code 1.", "exit_code"),
])
def test_a_hostile_end_event_is_read_as_data_or_passed_over(tmp_path, line, error, code):
    """events.jsonl is a file: an end line that is not an object, or whose error and code are not text, neither
    stops the board deciding the run's outcome nor records a list as run.json's error_code."""
    from app.run_outcome import decide

    folder = RunFolder(tmp_path / "r")
    folder.path.mkdir()
    folder.events_path.write_text(line + "\n", encoding="utf-8")
    status, found = decide(folder, 1, None)
    assert status == "failed" and str(found) == error and getattr(found, "code", None) == code


def test_a_dataset_folder_note_gets_a_heading_in_chinese(board, tmp_path):
    from app.ui import build_ui

    demo = build_ui(board)
    on_dir = next(f.fn for f in demo.fns.values() if "on_dataset_dir" in getattr(f.fn, "__qualname__", ""))
    _, _, note = on_dir(str(tmp_path / "nowhere"), [], [], None, "zh")  # folder, picks, an upload's message, lang
    assert note["value"].startswith("**数据集**：") and str(tmp_path / "nowhere") in note["value"]
    assert engine_text.note_text("zh", "", "data") == ""
