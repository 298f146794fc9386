"""The dataset preview of media rows: thumbnails, video frame counts and soft-token counts through the plugin."""

from __future__ import annotations

import base64
import io
import json
from pathlib import Path

import numpy as np
import pytest

from app import dataset_preview
from engine.config import build_config
from engine.data.preview import preview_dataset
from engine.multimodal import media_context
from engine.multimodal.preview import media_preview, soft_token_counts
from engine.multimodal.processor import MediaOptions
from engine.templates import get_template

REPO = Path(__file__).resolve().parents[2]
LABELS = {name: name for name in ("trained", "masked", "chosen", "rejected", "kto_tag",
                                   *dataset_preview.MEDIA_LABELS)}


def _write_video(path: Path, seconds: float = 3.0, fps: int = 10) -> str:
    import av

    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 64, 48, "yuv420p"
        for index in range(int(seconds * fps)):
            frame = av.VideoFrame.from_ndarray(np.full((48, 64, 3), index * 8 % 255, dtype=np.uint8), format="rgb24")
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return str(path)


@pytest.fixture(scope="module")
def vlm():
    from engine.models import load_tokenizer

    cfg = build_config({"model_name_or_path": "demo-vlm", "template": "qwen2_vl", "dataset": "demo_vlm",
                        "dataset_dir": str(REPO / "examples" / "data"), "image_max_pixels": 12544,
                        "image_min_pixels": 3136})
    tokenizer = load_tokenizer(cfg.model)
    return cfg, tokenizer, media_context(cfg, tokenizer)


def test_demo_vlm_rows_have_thumbnails_and_the_plugins_soft_token_count(vlm):
    cfg, tokenizer, context = vlm
    result = preview_dataset(cfg.data, "sft", tokenizer, get_template("qwen2_vl", tokenizer), n=3, media=context)
    for row in result["rows"]:
        media = row["media"]
        assert media["soft_tokens"] == {"images": 4}  # 56x56 pixels: 4x4 patches of 14, merged 2x2
        thumb = media["images"][0]["thumb"]
        assert thumb.startswith("data:image/png;base64,")
        from PIL import Image

        image = Image.open(io.BytesIO(base64.b64decode(thumb.split(",", 1)[1])))
        assert max(image.size) <= 96
    json.dumps(result)  # the worker writes it as JSON
    # the same count as the plugin's expansion used for training
    example = {"messages": [{"role": "user", "content": "<image><image>Two?"}, {"role": "assistant", "content": "Yes."}],
               "images": [str(REPO / "examples/data/demo_vlm/red_square.png")] * 2}
    assert soft_token_counts(context, example) == {"images": 8}
    html = dataset_preview.render_rows(result, LABELS)
    assert html.count('<figure class="lf-thumb"><img src="data:image/png;base64,') == 3
    assert "soft_tokens: image 4" in html


def test_placeholder_mismatch_is_shown_on_the_row(vlm):
    _, _, context = vlm
    example = {"messages": [{"role": "user", "content": "No placeholder"}, {"role": "assistant", "content": "x"}],
               "images": [str(REPO / "examples/data/demo_vlm/red_square.png")]}
    shown = media_preview(example, context)
    assert shown["soft_tokens"] is None and "placeholder" in shown["error"]
    assert "lf-media-error" in dataset_preview._media_html(shown, LABELS)


def test_video_frame_count_and_unreadable_image(tmp_path):
    pytest.importorskip("av")
    video = _write_video(tmp_path / "clip.mp4")
    broken = tmp_path / "broken.png"
    broken.write_bytes(b"not a png")
    example = {"messages": [{"role": "user", "content": "<video><image>"}, {"role": "assistant", "content": "x"}],
               "videos": [video], "images": [str(broken)]}
    shown = media_preview(example, None, MediaOptions(video_fps=2.0, video_maxlen=4))
    assert shown["videos"] == [{"name": "clip.mp4", "frames": 4}]  # floor(3 s x 2 fps) = 6, capped by video_maxlen
    assert "broken.png" in shown["images"][0]["error"] and "thumb" not in shown["images"][0]
    assert shown["soft_tokens"] is None  # a text-only model: no counts
    html = dataset_preview._media_html(shown, LABELS)
    assert "video clip.mp4 · 4 frames" in html and "lf-media-error" in html
    assert media_preview({"messages": [], "images": []}) is None


def test_render_refuses_a_thumbnail_that_is_not_a_png_data_url():
    html = dataset_preview._media_html({"images": [{"name": "x.png", "thumb": "/etc/passwd"}]}, LABELS)
    assert "<img" not in html and "/etc/passwd" not in html
