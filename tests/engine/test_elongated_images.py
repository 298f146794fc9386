"""Images far longer than wide (1 x 100,000 pixels: a few hundred bytes of PNG) for processors that scale the shorter
side up to a fixed length (CLIP's rule: LLaVA, Video-LLaVA). A 1 x 3,000 PNG became 336 x 1,008,000 pixels in LLaVA's
processor (3.5 GB, 23 s) before its centre crop; 1 x 100,000 would take about 120 GB. Such a picture is refused, with
its size and the fix, before the processor builds it; Qwen-style processors (a longest edge too) and LLaVA-NeXT's grid
bound the pixels themselves and take it."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import build_tiny_vlm  # noqa: E402

from engine.multimodal import media  # noqa: E402
from engine.multimodal.errors import MediaError  # noqa: E402
from engine.multimodal.plugins import plugin_for  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

MESSAGES = [{"role": "user", "content": "<image>What is it?"}, {"role": "assistant", "content": "A line."}]


@pytest.fixture
def small_limit(monkeypatch):
    """The pixel limit at 2,000,000 (Pillow's decompression-bomb limit halved), so the test's pictures stay small."""
    from PIL import Image

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000_000)


def _line(tmp_path: Path, height: int) -> str:
    from PIL import Image

    path = tmp_path / f"line_{height}.png"
    Image.new("RGB", (1, height), (200, 0, 0)).save(path)
    return str(path)


@pytest.mark.parametrize("family", ["llava", "video_llava"])
def test_an_elongated_image_is_refused_before_the_processor_builds_it(tmp_path, small_limit, family):
    model, processor = build_tiny_vlm(family)  # the tiny processors scale the shorter side to 28
    plugin = plugin_for(model.config.model_type)
    line = _line(tmp_path, 5_000)  # 28 x 140,000 = 3,920,000 pixels in the processor
    with pytest.raises(MediaError) as err:
        plugin.process(processor, MESSAGES, [line], [], [], MediaOptions())
    assert str(err.value) == (f"Image {line} is 1x5000 pixels: this model's processor scales its shorter side to 28, "
                              "which makes about 3,920,000 pixels, more than the 2,000,000 an image may have; crop or "
                              "pad it so that its longer side is at most 2,551 times its shorter.")
    plugin.process(processor, MESSAGES, [_line(tmp_path, 2_000)], [], [], MediaOptions())  # 1,568,000: taken


@pytest.mark.parametrize("family", ["qwen2_vl", "llava_next", "gemma3"])
def test_processors_that_bound_the_pixels_take_it(tmp_path, small_limit, family):
    model, processor = build_tiny_vlm(family)
    plugin_for(model.config.model_type).process(processor, MESSAGES, [_line(tmp_path, 5_000)], [], [], MediaOptions())


def test_the_rule_reads_dict_and_size_dict_sizes():
    from transformers import CLIPImageProcessor

    clip = CLIPImageProcessor(size={"shortest_edge": 336}, crop_size={"height": 336, "width": 336})
    assert media.shorter_side_problem(clip, 1, 100_000).startswith("is 1x100000 pixels: this model's processor scales "
                                                                   "its shorter side to 336, which makes about "
                                                                   "11,289,600,000 pixels")
    assert media.shorter_side_problem(clip, 300, 168) is None
    assert media.shorter_side_problem(type("P", (), {"size": {"shortest_edge": 336}})(), 1, 100_000)
    assert media.shorter_side_problem(type("P", (), {"size": {"shortest_edge": 3136, "longest_edge": 9e6}})(),
                                      1, 100_000) is None
