"""LLaMA-Factory's `media_dir`: relative media paths resolve against it (default: dataset_dir), in training data
and in the preflight checks, whose messages name the resolved path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main
from engine.config import build_config
from engine.data import load_examples


def _data(root: Path) -> tuple[Path, Path]:
    """A dataset folder without its images, and a media folder that holds them."""
    from PIL import Image

    data, media = root / "data", root / "media"
    (media / "img").mkdir(parents=True)
    data.mkdir()
    Image.new("RGB", (32, 32), (200, 0, 0)).save(media / "img" / "red.png")
    rows = [{"messages": [{"role": "user", "content": "<image>Color?"}, {"role": "assistant", "content": "Red."}],
             "images": ["img/red.png"]}]
    (data / "rows.json").write_text(json.dumps(rows))
    info = {"rows": {"file_name": "rows.json", "formatting": "sharegpt",
                     "columns": {"messages": "messages", "images": "images"},
                     "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                              "assistant_tag": "assistant"}}}
    (data / "dataset_info.json").write_text(json.dumps(info))
    return data, media


def test_media_dir_defaults_to_dataset_dir_and_resolves_relative_paths(tmp_path):
    data, media = _data(tmp_path)
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data), "media_dir": str(media)})
    assert cfg.data.media_dir == str(media)
    examples = load_examples(cfg.data, "rows", "sft")
    assert examples[0]["images"] == [str(media / "img" / "red.png")]
    cfg = build_config({"dataset": "rows", "dataset_dir": str(data)})
    assert cfg.data.media_dir is None
    with pytest.raises(Exception) as err:  # default media_dir is dataset_dir, where the image is not
        load_examples(cfg.data, "rows", "sft")
    assert f"image file not found: {data / 'img' / 'red.png'}" in str(err.value)
    assert "or set media_dir" in str(err.value)


def test_media_dir_relative_to_the_current_folder(tmp_path, monkeypatch):
    data, media = _data(tmp_path)
    monkeypatch.chdir(tmp_path)
    cfg = build_config({"dataset": "rows", "dataset_dir": "data", "media_dir": "media"})
    assert load_examples(cfg.data, "rows", "sft")[0]["images"] == [str(media / "img" / "red.png")]


def test_preflight_names_the_missing_file_under_media_dir(tmp_path, capsys):
    import yaml

    data, media = _data(tmp_path)
    (media / "img" / "red.png").unlink()
    config = {"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "stage": "sft", "do_train": True,
              "dataset": "rows", "dataset_dir": str(data), "media_dir": str(media), "output_dir": str(tmp_path / "o")}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["check", str(tmp_path / "c.yaml")]) == 2
    err = capsys.readouterr().err
    assert f"image file {media / 'img' / 'red.png'} is missing" in err
    assert "relative paths are resolved against media_dir" in err
