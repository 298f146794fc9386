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
