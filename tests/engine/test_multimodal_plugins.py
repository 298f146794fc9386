"""engine.multimodal: placeholder expansion exact against the real processors, media readers, collation."""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from tinyvlms import FAMILIES, build_tiny_vlm  # noqa: E402

from engine.multimodal import media  # noqa: E402
from engine.multimodal.collator import MediaCollator, join_arrays  # noqa: E402
from engine.multimodal.errors import MediaError  # noqa: E402
from engine.multimodal.plugins import (  # noqa: E402
    PLUGINS,
    expand_placeholders,
    pack_arrays,
    soft_token_ids,
    unpack_arrays,
)
from engine.multimodal.processor import MediaOptions, has_torchvision  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


@pytest.fixture(scope="module")
def vlms():
    return {family: build_tiny_vlm(family) for family in FAMILIES}


def _image(tmp_path: Path, name: str, size=(100, 60), color=(200, 30, 30)) -> str:
    from PIL import Image

    path = tmp_path / name
    Image.new("RGB", size, color).save(path)
    return str(path)


@pytest.mark.parametrize("family", FAMILIES)
def test_image_expansion_equals_the_processor(vlms, tmp_path, family):
    """Our expanded text tokenizes to exactly what transformers' processor makes of the same images."""
    from engine.multimodal.plugins import plugin_for

    model, processor = vlms[family]
    plugin = plugin_for(model.config.model_type)  # Qwen3.5 is served by the qwen3_vl plugin
    images = [_image(tmp_path, "a.png"), _image(tmp_path, "b.png", size=(40, 90))]
    messages = [{"role": "user", "content": "<image>Who are they?"}, {"role": "assistant", "content": "Players."},
                {"role": "user", "content": "And here<image>?"}]
    opts = MediaOptions()
    expanded, arrays = plugin.process(processor, messages, images, [], [], opts)
    text = "".join(m["content"] for m in expanded)
    ours = processor.tokenizer(text, add_special_tokens=False)["input_ids"]
    wrap = plugin.image_wrap
    raw = "".join(m["content"] for m in messages).replace("<image>", wrap[0] + processor.image_token + wrap[1])
    loaded = [media.load_image(path, opts.image_max_pixels, opts.image_min_pixels) for path in images]
    reference = processor(text=[raw], images=loaded, return_tensors="np", add_special_tokens=False)
    assert ours == reference["input_ids"][0].tolist()
    soft = sum(token in soft_token_ids(processor) for token in ours)
    assert soft > 2  # the placeholders really were expanded
    def pixels(out):  # Video-LLaVA's image processor names them pixel_values_images (LLaMA-Factory's key too)
        return out["pixel_values"] if "pixel_values" in out else out["pixel_values_images"]

    np.testing.assert_allclose(pixels(arrays), pixels(reference), rtol=1e-5, atol=1e-5)
    if plugin.type_ids_key:
        key = "token_type_ids" if family == "gemma3" else "mm_token_type_ids"
        assert plugin.type_ids(processor, ours) == reference[key][0].tolist()


def test_placeholder_and_modality_errors(vlms, tmp_path):
    model, processor = vlms["gemma3"]
    image = _image(tmp_path, "a.png")
    with pytest.raises(MediaError, match=r"2 <image> placeholders but 1 image file;"):
        PLUGINS["gemma3"].process(processor, [{"role": "user", "content": "<image><image>"}], [image], [], [],
                                  MediaOptions())
    with pytest.raises(MediaError, match="takes images, not videos"):
        PLUGINS["gemma3"].process(processor, [{"role": "user", "content": "<video>"}], [], ["x.mp4"], [],
                                  MediaOptions())
    with pytest.raises(MediaError, match="not found"):
        PLUGINS["gemma3"].process(processor, [{"role": "user", "content": "<image>"}], [str(tmp_path / "no.png")],
                                  [], [], MediaOptions())


def test_expand_placeholders_in_order():
    messages = [{"role": "user", "content": "<audio>a<image>b<image>"}, {"role": "user", "content": "<image>"}]
    out = expand_placeholders(messages, {"images": ["I1", "I2", "I3"], "videos": [], "audios": ["A1"]})
    assert [m["content"] for m in out] == ["A1aI1bI2", "I3"]


def test_image_resize_bounds(tmp_path):
    big = media.load_image(_image(tmp_path, "big.png", size=(400, 300)), max_pixels=100 * 100, min_pixels=10)
    assert big.size[0] * big.size[1] <= 100 * 100 and abs(big.size[0] / big.size[1] - 4 / 3) < 0.05
    small = media.load_image(_image(tmp_path, "s.png", size=(4, 4)), max_pixels=10_000, min_pixels=32 * 32)
    assert small.size[0] * small.size[1] >= 31 * 31 and small.mode == "RGB"


def test_sample_indices_follow_llamafactory():
    # LLaMA-Factory: floor(duration * fps) frames, capped, spread by linspace(0, total - 1) and truncated.
    assert media.sample_indices(total_frames=100, duration=4.0, video_fps=2.0, video_maxlen=128) == \
        [int(x) for x in np.linspace(0, 99, 8).astype(np.int32)]
    assert media.sample_indices(100, 4.0, 2.0, 3) == [0, 49, 99]
    assert media.sample_indices(10, 0.2, 2.0, 128) == [0]


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


def test_generated_video_frames_and_timestamps(tmp_path):
    clip = media.read_video(_write_video(tmp_path / "v.mp4"), video_fps=2.0, video_maxlen=128)
    assert clip.total_frames == 30 and math.isclose(clip.original_fps, 10.0)
    assert clip.indices == [int(x) for x in np.linspace(0, 29, 6).astype(np.int32)]  # floor(3 s * 2 fps) = 6
    assert clip.scaled_indices == [i / 10.0 * 2.0 for i in clip.indices]
    # Gemma 4 writes MM:SS from index / fps; the scaled indices give the frames' real times
    assert media.timestamps_mmss(clip.scaled_indices, 2.0) == ["00:00", "00:00", "00:01", "00:01", "00:02", "00:02"]
    assert len(clip.frames) == 6 and clip.frames[0].size[0] * clip.frames[0].size[1] <= 256 * 256
    even = PLUGINS["qwen2_vl"].read_videos([str(tmp_path / "v.mp4")], MediaOptions(video_maxlen=5))[0]
    assert len(even.frames) == 6 and even.indices[-1] == even.indices[-2]  # padded to an even count


@pytest.mark.skipif(not (SHARED / "mllm_demo_data" / "1.mp4").is_file(), reason="shared data absent")
def test_shared_video_indices():
    import av

    path = SHARED / "mllm_demo_data" / "1.mp4"
    with av.open(str(path)) as container:
        stream = container.streams.video[0]
        total, duration = stream.frames, float(stream.duration * stream.time_base)
    clip = media.read_video(str(path), 2.0, 128)
    expected = np.linspace(0, total - 1, min(total, 128, max(1, math.floor(duration * 2.0)))).astype(np.int32)
    assert clip.indices == [int(x) for x in expected]
    assert media.timestamps_mmss(clip.scaled_indices, 2.0)[0] == "00:00"


@pytest.mark.skipif(not (SHARED / "mllm_demo_data" / "1.mp3").is_file(), reason="shared data absent")
def test_shared_audio_resampled():
    wave = media.read_audio(str(SHARED / "mllm_demo_data" / "1.mp3"), 16000)
    assert wave.dtype == np.float32 and wave.ndim == 1 and 3.5 * 16000 < len(wave) < 4.5 * 16000


def _write_wav(path, channels, rate):
    """A 16-bit PCM file of the given (channels, samples) float array."""
    import av

    layout = "mono" if len(channels) == 1 else "stereo"
    samples = (np.asarray(channels) * 32767).astype(np.int16).T.reshape(1, -1)  # interleaved
    with av.open(str(path), "w") as container:
        stream = container.add_stream("pcm_s16le", rate=rate, layout=layout)
        frame = av.AudioFrame.from_ndarray(samples, format="s16", layout=layout)
        frame.sample_rate = rate
        for packet in [*stream.encode(frame), *stream.encode(None)]:
            container.mux(packet)


def test_stereo_audio_is_the_mean_of_its_channels(tmp_path):
    """LLaMA-Factory mixes channels to mono by their mean; PyAV's mono layout had given the result sqrt(2) louder
    (found by an outside check against LLaMA-Factory)."""
    rate = 16000
    tone = np.sin(2 * np.pi * 440 * np.arange(rate) / rate)
    _write_wav(tmp_path / "s.wav", [0.6 * tone, 0.2 * tone], rate)
    wave = media.read_audio(str(tmp_path / "s.wav"), rate)
    expected = (np.round(0.6 * tone * 32767) + np.round(0.2 * tone * 32767)) / 2 / 32768
    assert np.abs(wave - expected).max() < 1e-4


def test_audio_at_a_rate_that_resamples_only_through_gigabytes_is_refused_with_the_fix(tmp_path):
    """A rate sharing no large divisor with the rate read at needs a filter bank of about new x old values (torchaudio's
    and LLaMA-Factory's alike): one second of 48,001 Hz audio in a dataset row would have taken about 16 GB, one of
    8,001 Hz took 2.4 GB and 6 s. Refused before anything is built; every rate in use still resamples."""
    import time

    tone = np.sin(2 * np.pi * 440 * np.arange(48001) / 48001)
    _write_wav(tmp_path / "odd.wav", [tone], 48001)
    started = time.monotonic()
    with pytest.raises(MediaError, match=r"odd.wav is sampled at 48,001 Hz, which shares no large divisor with the "
                                         r"16,000 Hz .*filter of 768,624,000 values .*ffmpeg -i IN -ar 16000 OUT"):
        media.read_audio(str(tmp_path / "odd.wav"), 16000)
    assert time.monotonic() - started < 5
    with pytest.raises(MediaError, match=r"would become 4,800,100,000 samples at 4,800,100,000 Hz"):
        media.read_audio(str(tmp_path / "odd.wav"), 48001 * 100_000)  # audio_sampling_rate far past any in use
    rates = (8000, 11025, 16000, 22050, 24000, 32000, 44100, 48000, 96000, 192000)
    assert all(media.resample_problem(a, b, a) is None for a in rates for b in rates)
    _write_wav(tmp_path / "ok.wav", [tone[:44100]], 44100)
    assert len(media.read_audio(str(tmp_path / "ok.wav"), 16000)) == 16000


def test_resampling_is_band_limited_and_keeps_a_tone(tmp_path):
    """torchaudio's method (which LLaMA-Factory uses): the output length is ceil(n * new / old), a tone below both
    Nyquist frequencies keeps its frequency and amplitude, and one above the new Nyquist frequency is filtered out."""
    import torch

    old, new = 48000, 16000
    t = np.arange(old) / old
    low = torch.tensor(np.sin(2 * np.pi * 1000 * t), dtype=torch.float32)[None]
    out = media.resample(low, old, new)
    assert out.shape == (1, new) and out.dtype == torch.float32
    middle = out[0, 200:-200].numpy()
    expected = np.sin(2 * np.pi * 1000 * np.arange(new) / new)[200:-200]
    assert np.abs(middle - expected).max() < 2e-3
    high = torch.tensor(np.sin(2 * np.pi * 12000 * t), dtype=torch.float32)[None]
    assert media.resample(high, old, new)[0, 200:-200].abs().max() < 0.01  # aliasing would fold it to 4 kHz
    assert media.resample(low, old, old) is low
    odd = media.resample(torch.zeros(2, 3, 1001), 44100, 16000)
    assert odd.shape == (2, 3, math.ceil(1001 * 160 / 441))


def _encode_audio(target: Any, codec: str, rate: int, layout: str, frames: list[np.ndarray], **options: Any) -> None:
    """Write ``frames`` (int16 arrays shaped as PyAV's packed s16 frames) to ``target`` (a path or a file object)."""
    import av

    with av.open(target, "w", **options) as container:
        stream = container.add_stream(codec, rate=rate, layout=layout)
        for samples in frames:
            frame = av.AudioFrame.from_ndarray(samples, format="s16", layout=layout)
            frame.sample_rate = rate
            for packet in stream.encode(frame):
                container.mux(packet)
        for packet in stream.encode(None):
            container.mux(packet)


def _write_tone(path: Path) -> Path:
    """One second of a mono tone at 22,050 Hz (resampled to 16 kHz when read)."""
    _encode_audio(str(path), "pcm_s16le", 22050, "mono", [(np.sin(np.arange(22050) / 10) * 8000).astype(np.int16)[None]])
    return path


def test_gemma4_audio_expansion_equals_the_processor(tmp_path):
    model, processor = build_tiny_vlm("gemma4n")
    path = _write_tone(tmp_path / "a.wav")
    expanded, arrays = PLUGINS["gemma4"].process(processor, [{"role": "user", "content": "<audio>Hi"}], [], [],
                                                 [str(path)], MediaOptions())
    wave = media.read_audio(str(path), 16000)
    reference = processor(text=[processor.audio_token + "Hi"], audio=[wave], return_tensors="np",
                          add_special_tokens=False)
    ours = processor.tokenizer(expanded[0]["content"], add_special_tokens=False)["input_ids"]
    assert ours == reference["input_ids"][0].tolist()
    assert sum(t == processor.audio_token_id for t in ours) == 25  # 1 s of audio at 40 ms per soft token


@pytest.mark.skipif(has_torchvision(), reason="checks the refusal without torchvision")
def test_video_without_torchvision_is_refused_with_the_install(vlms, tmp_path):
    """A family without a Pillow video path (its processor got the refusing stand-in) names the install."""
    import copy

    from engine.multimodal.processor import _no_video_class

    processor = copy.copy(vlms["gemma4"][1])
    processor.video_processor = _no_video_class()()
    with pytest.raises(MediaError, match="torchvision==0.29.1"):
        PLUGINS["gemma4"].process(processor, [{"role": "user", "content": "<video>"}], [],
                                    [_write_video(tmp_path / "v.mp4")], [], MediaOptions())


@pytest.mark.parametrize("side", ["right", "left"])
def test_collator_pads_type_ids_on_the_tokenizer_side(vlms, side):
    model, processor = vlms["gemma4"]
    tokenizer = processor.tokenizer
    tokenizer.padding_side = side
    try:
        rows = [{"input_ids": [5, 6, 7], "labels": [-100, 6, 7], "mm_token_type_ids": [0, 1, 0],
                 "mm_inputs": pack_arrays({"pixel_values": np.ones((1, 4, 3), np.float32)})},
                {"input_ids": [5], "labels": [5], "mm_token_type_ids": [1],
                 "mm_inputs": pack_arrays({"pixel_values": np.zeros((2, 4, 3), np.float32)})}]
        batch = MediaCollator(tokenizer=tokenizer, pad_to_multiple_of=None)(rows)
    finally:
        tokenizer.padding_side = "right"
    expected = [[0, 1, 0], [1, 0, 0]] if side == "right" else [[0, 1, 0], [0, 0, 1]]
    assert batch["mm_token_type_ids"].tolist() == expected
    assert batch["pixel_values"].shape == (3, 4, 3) and batch["pixel_values"][0].sum() == 12


def test_join_arrays_pads_ragged_audio():
    out = join_arrays([{"input_features": np.ones((1, 5, 2), np.float32)},
                       {"input_features": np.ones((1, 3, 2), np.float32)}])
    assert out["input_features"].shape == (2, 5, 2) and out["input_features"][1, 3:].sum() == 0
    blob = pack_arrays({"a": np.arange(3)})
    assert unpack_arrays(blob)["a"].tolist() == [0, 1, 2] and unpack_arrays(b"") == {}


def test_qwen2_audio_expansion_and_features_equal_the_processor(tmp_path):
    """Qwen2-Audio: the soft tokens between <|audio_bos|> and <|audio_eos|> and the padded Whisper features with
    their mask (``feature_attention_mask``) are what transformers' processor makes of the same audio."""
    model, processor = build_tiny_vlm("qwen2_audio")
    path = _write_tone(tmp_path / "a.wav")
    expanded, arrays = PLUGINS["qwen2_audio"].process(processor, [{"role": "user", "content": "<audio>Hi"}], [], [],
                                                      [str(path)], MediaOptions())
    wave = media.read_audio(str(path), 16000)
    raw = processor.audio_bos_token + processor.audio_token + processor.audio_eos_token + "Hi"
    reference = processor(text=[raw], audio=[wave], return_tensors="np")
    ours = processor.tokenizer(expanded[0]["content"], add_special_tokens=False)["input_ids"]
    assert ours == reference["input_ids"][0].tolist()
    assert sum(t == processor.audio_token_id for t in ours) == 25  # 1 s: 100 frames, halved twice by the encoder
    np.testing.assert_allclose(arrays["input_features"], reference["input_features"], rtol=1e-5, atol=1e-5)
    assert arrays["feature_attention_mask"].tolist() == reference["feature_attention_mask"].tolist()
    with pytest.raises(MediaError, match="takes audios, not images"):
        PLUGINS["qwen2_audio"].process(processor, [{"role": "user", "content": "<image>"}], [_image(tmp_path, "i.png")],
                                       [], [], MediaOptions())


def test_paligemma_images_leave_the_text_and_match_the_processors_pixels(tmp_path):
    """PaliGemma's placeholders are removed (its image tokens open the row, see test_multimodal_train); the pixel
    values are the processor's."""
    model, processor = build_tiny_vlm("paligemma")
    images = [_image(tmp_path, "a.png"), _image(tmp_path, "b.png", size=(40, 90))]
    messages = [{"role": "user", "content": "<image><image>Compare them."}]
    expanded, arrays = PLUGINS["paligemma"].process(processor, messages, images, [], [], MediaOptions())
    assert expanded[0]["content"] == "Compare them."
    assert PLUGINS["paligemma"].prefix_ids(processor, 2) == [processor.image_token_id] * 8
    loaded = [media.load_image(path, MediaOptions().image_max_pixels, MediaOptions().image_min_pixels) for path in images]
    reference = processor(text=["<image><image>Compare them."], images=loaded, return_tensors="np")
    np.testing.assert_allclose(arrays["pixel_values"], reference["pixel_values"], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family", ["mistral3", "pixtral"])
def test_pixtral_images_are_rows_of_image_tokens_as_llamafactory_writes_them(tmp_path, family):
    """LLaMA-Factory's pixtral plugin: the image processor's sizes (called on its own, as there) cut into
    ``patch_size * spatial_merge_size`` cells, a row of [IMG] per cell row closed by [IMG_BREAK], the last by
    [IMG_END]; rows whose images differ in size are zero-padded and the model takes the batch."""
    import torch

    from engine.multimodal.processor import processor_class

    model, processor = build_tiny_vlm(family)
    assert type(processor) is processor_class("PixtralProcessor")  # transformers' own class, torchvision or not
    images = [_image(tmp_path, "a.png", size=(50, 30)), _image(tmp_path, "b.png", size=(30, 60))]
    messages = [{"role": "user", "content": "<image>Compare<image>"}]
    expanded, arrays = PLUGINS["pixtral"].process(processor, messages, images, [], [], MediaOptions())
    loaded = [media.load_image(path, MediaOptions().image_max_pixels, MediaOptions().image_min_pixels) for path in images]
    reference = processor.image_processor(loaded, return_tensors="np")
    cell = processor.patch_size * processor.spatial_merge_size
    layouts = []
    for height, width in reference["image_sizes"].tolist():
        tokens = (["[IMG]"] * (width // cell) + ["[IMG_BREAK]"]) * (height // cell)
        layouts.append("".join(tokens[:-1] + ["[IMG_END]"]))
    assert expanded[0]["content"] == f"{layouts[0]}Compare{layouts[1]}"
    assert layouts[0] != layouts[1]
    np.testing.assert_allclose(arrays["pixel_values"], reference["pixel_values"], rtol=1e-5, atol=1e-5)
    assert arrays["image_sizes"].tolist() == reference["image_sizes"].tolist()

    # two rows, one image each, of different sizes: padded into one batch the model takes
    rows = []
    for path in images:
        text, row_arrays = PLUGINS["pixtral"].process(processor, [{"role": "user", "content": "<image>hi"}], [path],
                                                      [], [], MediaOptions())
        ids = processor.tokenizer(text[0]["content"])["input_ids"]
        rows.append({"input_ids": ids, "attention_mask": [1] * len(ids), "labels": ids,
                     "mm_inputs": pack_arrays(row_arrays)})
    batch = MediaCollator(tokenizer=processor.tokenizer, type_ids_key=None)(rows)
    assert batch["pixel_values"].shape[0] == 2 and batch["image_sizes"].tolist() == reference["image_sizes"].tolist()
    with torch.no_grad():
        assert torch.isfinite(model(**batch).loss)


def test_a_damaged_processor_config_is_refused_with_the_file_named(tmp_path):
    """A processor_config.json naming something that is not a processor, or not JSON at all, stops with the file and
    the fix, not a traceback from transformers."""
    import json

    from tinyvlms import save_tiny_vlm

    from engine.config import build_config
    from engine.multimodal.processor import load_media_processor

    folder = save_tiny_vlm("pixtral", tmp_path / "model")
    model_args = build_config({"model_name_or_path": str(folder)}).model
    assert load_media_processor(model_args) is not None
    config_file = folder / "processor_config.json"
    config = json.loads(config_file.read_text())
    config_file.write_text(json.dumps({**config, "processor_class": "Trainer"}))
    with pytest.raises(MediaError, match="`processor_class: Trainer`, which is not a transformers processor"):
        load_media_processor(model_args)
    config_file.write_text("{broken")
    with pytest.raises(MediaError, match="processor_config.json cannot be read"):
        load_media_processor(model_args)


def test_videos_of_different_lengths_in_one_batch_are_refused_where_frames_are_an_axis():
    """LLaVA-NeXT-Video / Video-LLaVA take (videos, frames, C, H, W) and read every frame, so zero frames padded onto
    a shorter clip would give features without tokens (transformers' ValueError mid-training): refused with the fix.
    Families whose frames are concatenated (Gemma 4, the Qwen-VL patches) are padded as before."""
    from engine.multimodal.collator import join_numpy

    three, two = np.zeros((1, 3, 3, 4, 4), np.float32), np.zeros((1, 2, 3, 4, 4), np.float32)
    assert join_numpy([{"pixel_values_videos": three}, {"pixel_values_videos": three}])["pixel_values_videos"].shape \
        == (2, 3, 3, 4, 4)
    with pytest.raises(MediaError, match=r"sample 2, 3 frames.*per_device_train_batch_size: 1"):
        join_numpy([{"pixel_values_videos": three}, {"pixel_values_videos": two}])
    flat = join_numpy([{"pixel_values_videos": np.zeros((4, 8), np.float32)},
                       {"pixel_values_videos": np.zeros((2, 8), np.float32)}])
    assert flat["pixel_values_videos"].shape == (6, 8)


def test_qwen_families_bring_thin_images_to_llamafactorys_sides(tmp_path):
    """LLaMA-Factory's Qwen2-VL plugin (and its Qwen3-VL, GLM-4V and Qwen-Omni subclasses) widens a side under 28
    pixels to 28 and brings an aspect ratio above 200 to 180, for images and video frames; a 10000 x 1 image made
    transformers' processor raise "absolute aspect ratio must be smaller than 200" here. (The rows of such images
    were compared with LLaMA-Factory 0.9.5's for qwen2_vl, qwen3_vl and glm4v: identical.)"""
    from PIL import Image

    assert media.qwen_sides(Image.new("RGB", (10000, 1))).size == (28 * 180, 28)
    assert media.qwen_sides(Image.new("RGB", (300, 5))).size == (300, 28)
    assert media.qwen_sides(Image.new("RGB", (5, 300))).size == (28, 300)
    assert media.qwen_sides(Image.new("RGB", (64, 64))).size == (64, 64)
    assert {name for name, plugin in PLUGINS.items() if plugin.qwen_sides} == {
        "qwen2_vl", "qwen3_vl", "glm4v", "qwen2_omni", "qwen3_omni"}
    model, processor = build_tiny_vlm("qwen2_vl")
    Image.new("RGB", (10000, 1), (200, 30, 30)).save(tmp_path / "thin.png")
    messages, arrays = PLUGINS["qwen2_vl"].process(processor, [{"role": "user", "content": "<image>Thin?"}],
                                                   [str(tmp_path / "thin.png")], [], [], MediaOptions())
    grid = arrays["image_grid_thw"][0]
    assert messages[0]["content"].count("<|image_pad|>") == int(np.prod(grid)) // 4 > 0


def test_audio_that_decodes_past_the_bound_is_refused_while_decoding(monkeypatch):
    """Silence compresses about 5,000-fold: a minute of 192 kHz stereo FLAC is ~19 KB, so a few MB in a dataset row
    or a chat request decoded to tens of GB and the process was killed. Decoding now stops at the bound."""
    import io

    buffer = io.BytesIO()
    _encode_audio(buffer, "flac", 192_000, "stereo", [np.zeros((1, 2 * 192_000), dtype=np.int16)] * 20, format="flac")
    data = buffer.getvalue()
    assert len(data) < 20_000  # 20 s of sound, 30 MB as float32
    assert len(media.read_audio(data, 16000)) == 20 * 16000  # under the bound: read whole, as before
    monkeypatch.setattr(media, "MAX_AUDIO_VALUES", 5 * 192_000 * 2)
    with pytest.raises(media.MediaError, match=r"longer than 5 seconds \(2 channels at 192,000 Hz\).*cut it"):
        media.read_audio(data, 16000)
