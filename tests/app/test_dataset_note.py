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
