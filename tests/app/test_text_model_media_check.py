"""The board's check before Start (app.forms.validate, the engine's pre-flight check) refuses rows with images, videos
or audio for a model that takes text only, with the message the run would stop with once its data loaded (the
datasets, the template, the fix); LLaMA-Factory 0.9.5 refuses such rows in every stage but pre-training."""

from __future__ import annotations

import json

from app import forms


def _data(folder):
    from PIL import Image

    folder.mkdir()
    Image.new("RGB", (8, 8), (20, 200, 30)).save(folder / "green.png")
    rows = [{"messages": [{"role": "user", "content": "<image>Colour?"}, {"role": "assistant", "content": "Green."}],
             "images": ["green.png"]} for _ in range(2)]
    (folder / "pictures.json").write_text(json.dumps(rows), encoding="utf-8")
    info = {"pictures": {"file_name": "pictures.json", "formatting": "sharegpt",
                         "columns": {"messages": "messages", "images": "images"},
                         "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                  "assistant_tag": "assistant"}}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return str(folder)


def test_the_board_refuses_media_rows_for_a_text_model_before_start(tmp_path):
    mapping = {"model_name_or_path": "demo", "stage": "sft", "do_train": True, "finetuning_type": "lora",
               "template": "chatml", "dataset_dir": _data(tmp_path / "data"), "dataset": "pictures",
               "output_dir": str(tmp_path / "out")}
    problems = forms.validate(mapping, "train").problems
    said = [p for p in problems if "takes text only" in p]
    assert len(said) == 1, problems
    assert said[0].code == "media"
    assert said[0].startswith("2 rows of pictures have images, videos or audio, but this model takes text only "
                              "(template `chatml`, no image/video/audio processor)")
    assert "`template: qwen2_vl`" in said[0] and "or a dataset without media" in said[0]
    pretraining = forms.validate({**mapping, "stage": "pt"}, "train").problems
    assert not [p for p in pretraining if "takes text only" in p], pretraining  # pre-training reads the text
    vlm = forms.validate({**mapping, "model_name_or_path": "demo-vlm", "template": "qwen2_vl"}, "train").problems
    assert not [p for p in vlm if "takes text only" in p], vlm
