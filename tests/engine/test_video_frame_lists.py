"""A video given as the list of its frames' image files, which LLaMA-Factory 0.9.5 takes ("processed video frames":
``"videos": [["f1.jpg", "f2.jpg", ...]]``, each frame resolved against media_dir, every frame kept, none sampled, at
``video_fps`` frames a second). Ours refused such a row: "an entry of video is not a file path"."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm  # noqa: E402

from engine.config import build_config  # noqa: E402
from engine.data.registry import resolve_dataset  # noqa: E402
from engine.data.row_media import row_media  # noqa: E402
from engine.multimodal import media  # noqa: E402

TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}


@pytest.fixture
def data(tmp_path) -> Path:
    from PIL import Image

    (tmp_path / "frames").mkdir()
    for index in range(3):
        Image.new("RGB", (56, 56), (80 * index, 20, 200)).save(tmp_path / "frames" / f"{index}.png")
    rows = [{"messages": [{"role": "user", "content": "<video>What happens?"}, {"role": "assistant", "content": "A."}],
             "videos": [[f"frames/{index}.png" for index in range(3)]]}]
    (tmp_path / "rows.json").write_text(json.dumps(rows))
    (tmp_path / "dataset_info.json").write_text(json.dumps({"clips": {
        "file_name": "rows.json", "formatting": "sharegpt", "columns": {"messages": "messages", "videos": "videos"},
        "tags": TAGS}}))
    return tmp_path


def test_frames_resolve_against_the_dataset_folder(data):
    spec = resolve_dataset("clips", str(data))
    row = json.loads((data / "rows.json").read_text())[0]
    assert row_media(row, "videos", spec, "videos") == [[str(data / "frames" / f"{i}.png") for i in range(3)]]


def test_every_frame_is_kept_at_video_fps(data):
    frames = [str(data / "frames" / f"{i}.png") for i in range(3)]
    clip = media.read_video(frames, video_fps=2.0, video_maxlen=1)  # video_maxlen does not cut a frame list
    assert len(clip.frames) == 3 and clip.indices == [0, 1, 2] and clip.scaled_indices == [0.0, 1.0, 2.0]
    assert clip.duration == 1.5 and clip.sampled_fps == 2.0 and clip.frames[0].mode == "RGB"


def test_qwen2_vl_takes_the_frames_as_one_video(data):
    """Three frames, padded to four as LLaMA-Factory's Qwen2-VL plugin pads them: two temporal patches."""
    from engine.multimodal.plugins import plugin_for
    from engine.multimodal.processor import MediaOptions

    model, processor = build_tiny_vlm("qwen2_vl")
    frames = [str(data / "frames" / f"{i}.png") for i in range(3)]
    messages = [{"role": "user", "content": "<video>What happens?"}, {"role": "assistant", "content": "A."}]
    _, arrays = plugin_for(model.config.model_type).process(processor, messages, [], [frames], [], MediaOptions())
    assert arrays["video_grid_thw"].tolist() == [[2, 4, 4]]


def test_check_passes_frame_lists_and_names_a_missing_frame(data):
    from engine.multimodal.checks import check_media

    cfg = build_config({"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "dataset": "clips",
                        "dataset_dir": str(data)})
    assert check_media(cfg) == []
    (data / "frames" / "1.png").unlink()
    assert check_media(cfg) == [f"Dataset `clips` row 0: a frame of a video: image file {data / 'frames' / '1.png'} "
                                "is missing: fix the path (relative paths are resolved against dataset_dir, or set "
                                "media_dir)."]


def test_lf_engine_data_tokenizes_a_frame_list(data, capsys, monkeypatch):
    from engine.cli import main

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    examples = Path(__file__).resolve().parents[2] / "examples"
    assert main(["data", str(examples / "sft_vlm_demo.yaml"), "dataset=clips", f"dataset_dir={data}"]) == 0, \
        capsys.readouterr().err
    assert "train: 1 row -> 1 sequence (" in capsys.readouterr().out


def test_the_preview_names_and_counts_a_frame_list(data):
    from engine.multimodal.preview import media_preview

    frames = [str(data / "frames" / f"{i}.png") for i in range(3)]
    shown = media_preview({"messages": [], "images": [], "videos": [frames], "audios": []})
    assert shown["videos"] == [{"name": "0.png … 2.png", "frames": 3}]
