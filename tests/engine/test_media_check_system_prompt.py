"""`lf-engine check` counts a row's media placeholders where LLaMA-Factory 0.9.5 (and our data map) counts them: in the
conversation, not in the system prompt (the system column, or a leading system turn). Counting the system prompt too,
a row with `<image>` in its system text and its user turn was refused by the check though it tokenizes (checked with
tests/golden/compare_rows on a tiny LLaVA: rows identical to LLaMA-Factory's), and a row whose only `<image>` sat in the
system prompt passed the check and was refused by the data map, after the processor had loaded (LLaMA-Factory refuses
it: 'The number of images does not match the number of <image> tokens')."""

from __future__ import annotations

import json

import pytest
from PIL import Image

from engine.config import build_config
from engine.multimodal.checks import check_media

TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
        "system_tag": "system"}


def _check(tmp_path, row: dict, columns: dict) -> list[str]:
    Image.new("RGB", (32, 32), (9, 9, 9)).save(tmp_path / "a.png")
    (tmp_path / "rows.json").write_text(json.dumps([{**row, "images": ["a.png"]}]))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"set": {
        "file_name": "rows.json", "formatting": "sharegpt", "tags": TAGS,
        "columns": {"messages": "messages", "images": "images", **columns}}}))
    return check_media(build_config({"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "dataset": "set",
                                     "dataset_dir": str(tmp_path)}))


TURNS = [{"role": "user", "content": "<image>What is it?"}, {"role": "assistant", "content": "Black."}]
PLAIN = [{"role": "user", "content": "What is it?"}, {"role": "assistant", "content": "Black."}]


@pytest.mark.parametrize(("row", "columns"), [
    ({"messages": TURNS, "system": "You read <image> tags literally."}, {"system": "system"}),
    ({"messages": [{"role": "system", "content": "Pictures come as <image>."}, *TURNS]}, {}),
])
def test_a_placeholder_in_the_system_prompt_is_not_counted(tmp_path, row, columns):
    assert _check(tmp_path, row, columns) == []


@pytest.mark.parametrize(("row", "columns"), [
    ({"messages": PLAIN, "system": "<image>You see it."}, {"system": "system"}),
    ({"messages": [{"role": "system", "content": "<image>You see it."}, *PLAIN]}, {}),
])
def test_a_row_whose_only_placeholder_is_in_the_system_prompt_is_refused(tmp_path, row, columns):
    assert _check(tmp_path, row, columns) == ["Dataset `set` row 0: 0 <image> placeholders but 1 image file: put one "
                                              "<image> in the text per file."]
