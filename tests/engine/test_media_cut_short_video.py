"""A streamable MP4 (faststart: its index first; or fragmented) cut short opened and decoded its first frame, so it
passed the media probe of `lf-engine check` / `data` / `train` and failed in training, after the model had loaded.
(A plain MP4, its index last, cut short was already refused: it does not open.)"""

from __future__ import annotations

import numpy as np
import pytest

from engine.config import build_config
from engine.multimodal import media
from tests.engine.test_media_damaged_files import media_dataset


def _video(path, fmt=None, options=None, codec="mpeg4", frames=40):
    import av

    rng = np.random.default_rng(0)
    with av.open(str(path), "w", format=fmt, options=options or {}) as container:
        stream = container.add_stream(codec, rate=10)
        stream.width, stream.height, stream.pix_fmt, stream.gop_size = 64, 48, "yuv420p", 10
        for _ in range(frames):
            frame = av.VideoFrame.from_ndarray(rng.integers(0, 255, (48, 64, 3), dtype=np.uint8), format="rgb24")
            container.mux(stream.encode(frame))
        container.mux(stream.encode())
    return path


@pytest.mark.parametrize("movflags", ["faststart", "frag_keyframe+empty_moov"])
def test_a_streamable_mp4_cut_short_is_found(tmp_path, movflags):
    whole = _video(tmp_path / "whole.mp4", options={"movflags": movflags})
    data = whole.read_bytes()
    cut = tmp_path / "cut.mp4"
    cut.write_bytes(data[:len(data) // 2])
    assert media.probe("videos", str(whole)) is None
    assert media.probe("videos", str(cut)) == "is cut short (truncated)"


@pytest.mark.parametrize("name", ["whole.mkv", "whole.avi", "whole.mov"])
def test_whole_videos_of_other_containers_still_pass(tmp_path, name):
    assert media.probe("videos", str(_video(tmp_path / name))) is None


def test_whole_audio_still_passes(tmp_path):
    """A WAV gives no packet after a seek to its end: only an MP4's index makes that a sign of a cut."""
    import av

    path = tmp_path / "tone.wav"
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=16000)
        stream.layout = "mono"
        frame = av.AudioFrame.from_ndarray((np.sin(np.arange(16000) / 5) * 3000).astype(np.int16)[None], format="s16",
                                           layout="mono")
        frame.sample_rate = 16000
        container.mux(stream.encode(frame))
        container.mux(stream.encode())
    assert media.probe("audios", str(path)) is None


def test_check_names_the_row_and_the_video_cut_short(tmp_path):
    data = _video(tmp_path / "whole.mp4", options={"movflags": "faststart"}).read_bytes()
    (tmp_path / "cut.mp4").write_bytes(data[:len(data) // 2])
    from engine.multimodal.checks import check_media

    problems = check_media(build_config(media_dataset(tmp_path, "clips", "videos", ("whole.mp4", "cut.mp4"))))
    assert problems == [f"Dataset `clips` row 1: video file {tmp_path / 'cut.mp4'} is cut short (truncated): replace "
                        "the file."]
