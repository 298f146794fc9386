"""Video frames become RGB as LLaMA-Factory 0.9.5 gets them (it pins ``av<=16``): the BT.601 matrix whatever the
frame's colour tags, the range its pixel format implies. PyAV 17 and later follow the tags, so without
:func:`engine.multimodal.media.frame_image` a BT.709 video's frames (LLaMA-Factory's demo 1.mp4 and 3.mp4) came
out a level brighter on average and up to 19 levels off."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from engine.multimodal import media
from engine.multimodal.plugins import PLUGINS
from engine.multimodal.processor import MediaOptions

BT709, BT601, MPEG, JPEG = 1, 6, 1, 2  # AVColorSpace / AVColorRange values


def _yuv(seed: int = 0, height: int = 16, width: int = 32) -> np.ndarray:
    """Saturated colours (where the two matrices differ most) in the limited range, as (3, H, W) planes."""
    rng = np.random.default_rng(seed)
    return np.stack([rng.integers(16, 236, (height, width)), rng.integers(16, 241, (height, width)),
                     rng.integers(16, 241, (height, width))]).astype(np.uint8)


def _rgb(planes: np.ndarray, kr: float, kb: float, full: bool) -> np.ndarray:
    """Reference YCbCr -> RGB (uint8, H x W x 3) with the luma weights ``kr``/``kb``."""
    y, u, v = (plane.astype(np.float64) for plane in planes)
    if full:
        u, v = u - 128, v - 128
    else:
        y, u, v = (y - 16) * 255 / 219, (u - 128) * 255 / 224, (v - 128) * 255 / 224
    kg = 1 - kr - kb
    r = y + 2 * (1 - kr) * v
    b = y + 2 * (1 - kb) * u
    g = (y - kr * r - kb * b) / kg
    return np.clip(np.rint(np.stack([r, g, b], -1)), 0, 255).astype(np.uint8)


def _bt601(planes: np.ndarray, full: bool = False) -> np.ndarray:
    return _rgb(planes, 0.299, 0.114, full)


def _bt709(planes: np.ndarray, full: bool = False) -> np.ndarray:
    return _rgb(planes, 0.2126, 0.0722, full)


def _frame(planes: np.ndarray, fmt: str, colorspace: int, color_range: int):
    import av

    frame = av.VideoFrame.from_ndarray(planes, format=fmt)
    frame.colorspace, frame.color_range = colorspace, color_range
    return frame


def _off(got: object, want: np.ndarray) -> int:
    return int(np.abs(np.asarray(got, dtype=np.int64) - want).max())


def test_bt709_tagged_frame_is_converted_with_bt601():
    planes = _yuv()
    got = media.frame_image(_frame(planes, "yuv444p", BT709, MPEG))
    assert got.mode == "RGB" and got.size == (32, 16)
    assert _off(got, _bt601(planes)) <= 2  # swscale's fixed-point rounding
    assert _off(got, _bt709(planes)) > 20  # what the frame's own tags would give: the test tells them apart


def test_range_follows_the_pixel_format_not_the_tag():
    planes = _yuv(1)
    # a yuv444p frame tagged full range is read as limited range (as swscale before PyAV 17 read it) ...
    assert _off(media.frame_image(_frame(planes, "yuv444p", BT709, JPEG)), _bt601(planes)) <= 2
    # ... a yuvj444p frame as full range, whatever its tags
    assert _off(media.frame_image(_frame(planes, "yuvj444p", BT709, JPEG)), _bt601(planes, full=True)) <= 2
    assert _off(media.frame_image(_frame(planes, "yuvj444p", BT601, JPEG)), _bt601(planes, full=True)) <= 2


def test_untagged_and_rgb_frames_are_unchanged():
    import av

    planes = _yuv(2)
    untagged = av.VideoFrame.from_ndarray(planes, format="yuv444p")  # colour space unspecified
    assert np.array_equal(np.asarray(media.frame_image(untagged)), np.asarray(untagged.to_image()))
    rgb = np.random.default_rng(3).integers(0, 256, (16, 32, 3), dtype=np.uint8)
    assert np.array_equal(np.asarray(media.frame_image(av.VideoFrame.from_ndarray(rgb, format="rgb24"))), rgb)
    gray = rgb[..., 0].copy()
    assert np.array_equal(np.asarray(media.frame_image(av.VideoFrame.from_ndarray(gray, format="gray"))),
                          np.repeat(gray[..., None], 3, -1))


def _bt709_video(path: Path, planes: list[np.ndarray], fps: int = 4) -> str:
    """An H.264 yuv444p video tagged BT.709 / limited range, as phones and encoders write them today."""
    import av

    if "libx264" not in av.codecs_available:
        pytest.skip("this PyAV build has no libx264 encoder")
    with av.open(str(path), "w") as container:
        stream = container.add_stream("libx264", rate=fps, options={"qp": "0"})  # lossless: the planes survive
        stream.width, stream.height, stream.pix_fmt = planes[0].shape[2], planes[0].shape[1], "yuv444p"
        stream.codec_context.colorspace, stream.codec_context.color_range = BT709, MPEG
        for frame_planes in planes:
            for packet in stream.encode(_frame(frame_planes, "yuv444p", BT709, MPEG)):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return str(path)


def test_read_video_gives_llamafactory_colours_for_a_bt709_video(tmp_path):
    frames = [_yuv(seed, 32, 48) for seed in range(8)]
    path = _bt709_video(tmp_path / "bt709.mp4", frames)
    import av

    with av.open(path) as container:
        decoded = next(container.decode(video=0))
        assert (decoded.colorspace, decoded.format.name) == (BT709, "yuv444p")  # the tag reached the decoder
    clip = media.read_video(path, video_fps=2.0, video_maxlen=128)
    assert clip.indices == [0, 2, 4, 7]  # 2 s at 2 fps: 4 of the 8 frames
    for index, image in zip(clip.indices, clip.frames):
        assert _off(image, _bt601(frames[index])) <= 2
        assert _off(image, _bt709(frames[index])) > 20
    # and through a plugin's reader (the frames every video family's processor gets)
    even = PLUGINS["qwen2_vl"].read_videos([path], MediaOptions())[0]
    assert [np.asarray(f).tobytes() for f in even.frames] == [np.asarray(f).tobytes() for f in clip.frames]


SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"


@pytest.mark.parametrize(("name", "count", "total"), [("1.mp4", 20, 412869047), ("3.mp4", 12, 242997598)])
def test_demo_video_frames_are_llamafactory_s(name, count, total):
    """LLaMA-Factory's BT.709 demo videos: the sampled, resized frames (LLaMA-Factory 0.9.5 with PyAV 16 gave these
    pixel totals; ours were 0.9% and 0.5% brighter before)."""
    path = SHARED / "mllm_demo_data" / name
    if not path.is_file():
        pytest.skip("../shared/data is absent")
    clip = PLUGINS["qwen2_vl"].read_videos([str(path)], MediaOptions())[0]
    frames = np.stack([np.asarray(frame) for frame in clip.frames])
    assert frames.shape == (count, 192, 341, 3) and int(frames.astype(np.int64).sum()) == total
