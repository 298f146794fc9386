"""Video for the Qwen VL families without torchvision: PyAV frames, Pillow processing, exact soft-token counts,
Qwen3-VL timestamps, and training on a generated video and on ../shared/data's (skipped when absent)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_multimodal_plugins import _write_video  # noqa: E402
from tinyvlms import build_tiny_vlm, save_tiny_vlm  # noqa: E402

from engine.cli import main  # noqa: E402
from engine.multimodal import media  # noqa: E402
from engine.multimodal.plugins import PLUGINS  # noqa: E402
from engine.multimodal.processor import MediaOptions  # noqa: E402

SHARED = Path(__file__).resolve().parents[3] / "shared" / "data"
if not SHARED.is_dir():
    SHARED = Path("/work/shared/data")


@pytest.fixture(scope="module")
def qwen():
    return {family: build_tiny_vlm(family)[1] for family in ("qwen2_vl", "qwen3_vl", "gemma4")}


def test_frames_are_laid_out_like_the_image_processor_does(qwen):
    """Two identical frames make one temporal patch equal to the image processor's patches of that frame."""
    from PIL import Image

    processor = qwen["qwen2_vl"]
    frame = Image.fromarray(np.random.default_rng(0).integers(0, 255, (56, 84, 3), dtype=np.uint8))
    video = processor.video_processor(videos=[[frame, frame]], return_tensors="np")
    image = processor.image_processor([frame], return_tensors="np")
    assert video["video_grid_thw"].tolist() == image["image_grid_thw"].tolist() == [[1, 4, 6]]
    np.testing.assert_allclose(video["pixel_values_videos"], image["pixel_values"], rtol=0, atol=1e-6)
    # three distinct frames: the last is repeated to fill the second temporal patch
    other = Image.fromarray(np.zeros((56, 84, 3), dtype=np.uint8))
    out = processor.video_processor(videos=[[frame, other, frame]], return_tensors="np")
    assert out["video_grid_thw"].tolist() == [[2, 4, 6]]
    first, second = np.split(out["pixel_values_videos"], 2)
    np.testing.assert_allclose(second, image["pixel_values"], atol=1e-6)  # (frame, frame)
    assert not np.allclose(first, image["pixel_values"])  # (frame, other)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl"])
def test_video_soft_token_counts_match_the_processor(qwen, tmp_path, family):
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    processor = qwen[family]
    path = _write_video(tmp_path / "v.mp4")  # 3 s at 10 fps, 64x48
    opts = MediaOptions(video_fps=2.0, video_max_pixels=64 * 48)
    expanded, arrays = PLUGINS[family].process(processor, [{"role": "user", "content": "<video>What happens?"}], [],
                                               [path], [], opts)
    text = expanded[0]["content"]
    grid = arrays["video_grid_thw"][0].tolist()
    assert grid[0] == 3  # 6 sampled frames, 2 per temporal patch
    factor = processor.video_processor.patch_size * processor.video_processor.merge_size
    if family == "qwen2_vl":
        height, width = smart_resize(48, 64, factor=factor, min_pixels=processor.video_processor.size["shortest_edge"],
                                     max_pixels=processor.video_processor.size["longest_edge"])
        assert grid[1:] == [height // 14, width // 14]
    per_frame = grid[1] * grid[2] // 4
    assert text.count("<|video_pad|>") == grid[0] * per_frame == int(np.prod(grid)) // 4
    assert arrays["pixel_values_videos"].shape[0] == int(np.prod(grid))
    # the processor's own count for a video of this size
    counted = processor._get_num_multimodal_tokens(video_sizes=[[6, 48, 64]])
    assert counted.num_video_tokens == [text.count("<|video_pad|>")]
    if family == "qwen2_vl":
        assert text == "<|vision_start|>" + "<|video_pad|>" * (grid[0] * per_frame) + "<|vision_end|>What happens?"
    else:
        # timestamps of the frame pairs from the sampled indices (index / original fps), as LLaMA-Factory passes them
        clip = media.read_video(path, 2.0, 128, 64 * 48)
        seconds = [index / clip.original_fps for index in clip.indices]
        stamps = [(seconds[i] + seconds[i + 1]) / 2 for i in range(0, len(seconds), 2)]
        block = "<|vision_start|>" + "<|video_pad|>" * per_frame + "<|vision_end|>"
        assert text == "".join(f"<{t:.1f} seconds>{block}" for t in stamps) + "What happens?"


def test_video_trains_end_to_end_on_a_tiny_qwen2_vl(tmp_path):
    import yaml

    model = save_tiny_vlm("qwen2_vl", tmp_path / "model")
    data = tmp_path / "data"
    data.mkdir()
    _write_video(data / "a.mp4", seconds=2.0)
    rows = [{"messages": [{"role": "user", "content": "<video>What happens?"},
                          {"role": "assistant", "content": "The screen gets brighter."}], "videos": ["a.mp4"]}] * 4
    (data / "clips.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"clips": {
        "file_name": "clips.json", "formatting": "sharegpt", "columns": {"messages": "messages", "videos": "videos"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    config = {"model_name_or_path": str(model), "template": "qwen2_vl", "stage": "sft", "do_train": True,
              "finetuning_type": "full", "dataset": "clips", "dataset_dir": str(data), "cutoff_len": 1024,
              "video_max_pixels": 64 * 48, "video_fps": 2.0, "output_dir": str(tmp_path / "out"),
              "per_device_train_batch_size": 2, "learning_rate": 0.003, "max_steps": 4, "logging_steps": 1,
              "save_strategy": "no", "plot_loss": False, "report_to": "none", "tokenized_path": str(tmp_path / "tok")}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["check", str(tmp_path / "c.yaml")]) == 0  # no torchvision refusal for this family
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines() if x]
    losses = [e["loss"] for e in events if e["event"] == "log"]
    assert len(losses) == 4 and losses[-1] < losses[0]
    from datasets import load_from_disk

    row = load_from_disk(str(tmp_path / "tok"))["train"][0]
    video = [i for i, kind in enumerate(row["mm_token_type_ids"]) if kind == 2]
    assert video and all(row["labels"][i] == -100 for i in video)  # video soft tokens never carry loss


@pytest.mark.skipif(not (SHARED / "mllm_video_demo.json").is_file(), reason="shared data absent")
def test_two_steps_on_the_shared_video_demo(tmp_path):
    import yaml

    model = save_tiny_vlm("qwen2_vl", tmp_path / "model")
    config = {"model_name_or_path": str(model), "template": "qwen2_vl", "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "mllm_video_demo",
              "dataset_dir": str(SHARED), "cutoff_len": 4096, "video_max_pixels": 64 * 64, "video_maxlen": 8,
              "output_dir": str(tmp_path / "out"), "per_device_train_batch_size": 1, "learning_rate": 0.001,
              "max_steps": 2, "logging_steps": 1, "save_strategy": "no", "plot_loss": False, "report_to": "none"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines() if x]
    assert events[0]["num_examples"] == 3 and events[-1]["status"] == "completed"


def test_qwen2_5_vl_gets_the_seconds_per_temporal_patch(tmp_path):
    """Qwen2.5-VL's rope needs seconds per temporal patch: 2 / (sampled frames / stream seconds), as LLaMA-Factory."""
    from transformers import Qwen2_5_VLProcessor

    from engine.multimodal.processor import build_processor

    base = build_tiny_vlm("qwen2_vl")[1]
    processor = build_processor(Qwen2_5_VLProcessor, {"image_processor": base.image_processor,
                                                      "tokenizer": base.tokenizer})
    path = _write_video(tmp_path / "v.mp4", seconds=3.0)
    clip = media.read_video(path, 2.0, 128)
    assert len(clip.indices) == 6 and clip.sampled_fps == pytest.approx(6 / 3.0, rel=0.02)
    _, arrays = PLUGINS["qwen2_vl"].process(processor, [{"role": "user", "content": "<video>"}], [], [path], [],
                                            MediaOptions())
    np.testing.assert_allclose(arrays["second_per_grid_ts"], [2 / clip.sampled_fps], rtol=1e-6)
    _, arrays = PLUGINS["qwen2_vl"].process(base, [{"role": "user", "content": "<video>"}], [], [path], [],
                                            MediaOptions())
    assert "second_per_grid_ts" not in arrays  # Qwen2-VL takes none


def test_gemma4_video_frames_are_timestamped_images(qwen, tmp_path):
    """Gemma 4: each sampled frame is `MM:SS {boi}{video_token x n}{eoi}`, joined by spaces, n from the frame size."""
    from transformers.models.gemma4.image_processing_pil_gemma4 import get_aspect_ratio_preserving_size

    processor = qwen["gemma4"]
    path = _write_video(tmp_path / "v.mp4")  # 3 s at 10 fps, 64x48: 6 frames at 2 fps
    expanded, arrays = PLUGINS["gemma4"].process(processor, [{"role": "user", "content": "<video>Hi"}], [], [path],
                                                 [], MediaOptions())
    video = processor.video_processor
    clip = media.read_video(path, 2.0, 128)
    height, width = get_aspect_ratio_preserving_size(clip.frames[0].height, clip.frames[0].width, video.patch_size,
                                                     video.max_soft_tokens * video.pooling_kernel_size ** 2,
                                                     video.pooling_kernel_size)
    per_frame = (height // video.patch_size) * (width // video.patch_size) // video.pooling_kernel_size ** 2
    block = processor.boi_token + processor.video_token * per_frame + processor.eoi_token
    stamps = ["00:00", "00:00", "00:01", "00:01", "00:02", "00:02"]
    assert expanded[0]["content"] == " ".join(f"{t} {block}" for t in stamps) + "Hi"
    # the processor's own count for six frames of this size
    counted = processor._get_num_multimodal_tokens(video_sizes=[[6, clip.frames[0].height, clip.frames[0].width]])
    assert counted.num_video_tokens == [6 * per_frame]
    assert arrays["num_frames_per_video"].tolist() == [6] and arrays["pixel_values_videos"].shape[0] == 6
    # pixels in [0, 1] (no normalization), as Gemma 4 was trained
    frame = arrays["pixel_values_videos"][0][: per_frame * video.pooling_kernel_size ** 2]
    assert frame.min() >= 0.0 and frame.max() <= 1.0


def test_gemma4_video_trains(tmp_path):
    import yaml

    model = save_tiny_vlm("gemma4", tmp_path / "model")
    data = tmp_path / "data"
    data.mkdir()
    _write_video(data / "a.mp4", seconds=2.0)
    rows = [{"messages": [{"role": "user", "content": "<video>What happens?"},
                          {"role": "assistant", "content": "It gets brighter."}], "videos": ["a.mp4"]}] * 2
    (data / "clips.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"clips": {
        "file_name": "clips.json", "formatting": "sharegpt", "columns": {"messages": "messages", "videos": "videos"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    config = {"model_name_or_path": str(model), "template": "gemma4", "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "clips", "dataset_dir": str(data),
              "cutoff_len": 2048, "output_dir": str(tmp_path / "out"), "per_device_train_batch_size": 2,
              "learning_rate": 0.01, "max_steps": 2, "logging_steps": 1, "save_strategy": "no", "plot_loss": False,
              "report_to": "none"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines() if x]
    assert len([e for e in events if e["event"] == "log"]) == 2 and events[-1]["status"] == "completed"


def _textured_video(path: Path, seconds: float = 3.0, fps: int = 10) -> str:
    import av

    rng = np.random.default_rng(0)
    yy, xx = np.mgrid[0:72, 0:96]
    with av.open(str(path), "w") as container:
        stream = container.add_stream("mpeg4", rate=fps)
        stream.width, stream.height, stream.pix_fmt = 96, 72, "yuv420p"
        for index in range(int(seconds * fps)):
            image = np.stack([(xx * 2 + index * 5) % 255, (yy * 3) % 255, rng.integers(0, 255, (72, 96))], -1)
            for packet in stream.encode(av.VideoFrame.from_ndarray(image.astype(np.uint8), format="rgb24")):
                container.mux(packet)
        for packet in stream.encode():
            container.mux(packet)
    return str(path)


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen3_vl", "gemma4"])
def test_pillow_video_matches_transformers_video_processor(family, tmp_path):
    """Where torchvision imports, transformers' own video processor gives the same grid, soft tokens, timestamps
    and (frames at the target size) the same pixels; with resizing only the filter differs (checked once with
    torch 2.14.1 + torchvision 0.29.1: max |diff| 0.03, mean 5e-5 after normalization)."""
    pytest.importorskip("torchvision")
    import torch
    import transformers
    from tinyvlms import _gemma4, _qwen

    from engine.multimodal.video_pil import pil_video_processor

    clip = media.read_video(_textured_video(tmp_path / "v.mp4"), 2.0, 128, 256 * 256)
    _, _, processor_cls, parts = _qwen(family) if family != "gemma4" else _gemma4()
    image = parts["image_processor"]
    real_cls = getattr(transformers, processor_cls.__name__.replace("Processor", "VideoProcessor"))
    if family == "gemma4":
        real = real_cls(patch_size=image.patch_size, pooling_kernel_size=image.pooling_kernel_size)
        kwargs = {}
    else:
        real = real_cls(patch_size=image.patch_size, merge_size=image.merge_size, size=dict(image.size),
                        temporal_patch_size=image.temporal_patch_size, image_mean=image.image_mean,
                        image_std=image.image_std)
        kwargs = {"cap_pixels_per_frame": False}
    ours = pil_video_processor(processor_cls.__name__, image, {})
    processor = processor_cls(**{**parts, "video_processor": real})
    meta = [clip.metadata(2.0)]
    common = {"video_metadata": meta, "do_sample_frames": False, "return_metadata": True, "return_tensors": "pt"}
    real_out = real(videos=[clip.frames], **common, **kwargs)
    our_out = ours(videos=[clip.frames], **common)
    assert processor.replace_video_token(real_out, 0) == processor.replace_video_token(our_out, 0)
    for key in ("video_grid_thw", "video_position_ids", "num_frames_per_video"):
        if key in real_out:
            assert torch.equal(torch.as_tensor(real_out[key]), torch.as_tensor(our_out[key]))
    diff = (real_out["pixel_values_videos"].float() - our_out["pixel_values_videos"].float()).abs()
    assert diff.mean() < 1e-3


@pytest.mark.skipif(not (SHARED / "mllm_video_audio_demo.json").is_file(), reason="shared data absent")
@pytest.mark.parametrize("dataset", ["mllm_video_audio_demo", "mllm_audio_demo"])
def test_two_steps_on_the_shared_audio_demos_with_gemma4n(tmp_path, dataset):
    import yaml

    model = save_tiny_vlm("gemma4n", tmp_path / "model")
    config = {"model_name_or_path": str(model), "template": "gemma4n", "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": dataset, "dataset_dir": str(SHARED),
              "cutoff_len": 8192, "video_max_pixels": 64 * 64, "video_maxlen": 4, "output_dir": str(tmp_path / "out"),
              "per_device_train_batch_size": 1, "learning_rate": 0.001, "max_steps": 2, "logging_steps": 1,
              "save_strategy": "no", "plot_loss": False, "report_to": "none"}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["check", str(tmp_path / "c.yaml")]) == 0
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    events = [json.loads(x) for x in (tmp_path / "out" / "events.jsonl").read_text().splitlines() if x]
    assert events[-1]["status"] == "completed" and len([e for e in events if e["event"] == "log"]) == 2


@pytest.mark.parametrize("family", ["qwen2_vl", "gemma4"])
def test_saved_folder_names_the_real_video_processor_with_our_settings(family, tmp_path):
    """A folder saved without torchvision names transformers' video processor class with the settings the Pillow
    path used, so transformers with torchvision processes the video the same way (checked there: same grids)."""
    folder = save_tiny_vlm(family, tmp_path / family)
    saved = json.loads((folder / "processor_config.json").read_text())["video_processor"]
    processor = build_tiny_vlm(family)[1]
    video = processor.video_processor
    if family == "qwen2_vl":
        assert saved["video_processor_type"] == "Qwen2VLVideoProcessor"
        assert saved["size"] == video.size and saved["merge_size"] == 2 and saved["temporal_patch_size"] == 2
    else:
        assert saved["video_processor_type"] == "Gemma4VideoProcessor"
        assert (saved["pooling_kernel_size"], saved["max_soft_tokens"], saved["patch_size"]) == (2, 70, 16)
    assert "rule" not in saved


@pytest.mark.parametrize("family", ["qwen2_vl", "qwen2_5_vl", "qwen3_vl", "qwen3_5", "gemma4"])
def test_every_saved_video_processor_is_a_class_transformers_has(family, tmp_path):
    """Qwen2.5-VL's folder had named a `Qwen2_5_VLVideoProcessor`, which no transformers has (its video processor
    is Qwen2-VL's), so neither transformers with torchvision nor LLaMA-Factory could load it. Found by an outside
    check against LLaMA-Factory."""
    import transformers

    folder = save_tiny_vlm(family, tmp_path / family)
    name = json.loads((folder / "processor_config.json").read_text())["video_processor"]["video_processor_type"]
    assert hasattr(transformers, name), name
    if family == "qwen2_5_vl":
        assert name == "Qwen2VLVideoProcessor"


def test_qwen2_5_vl_video_trains_with_its_time_scale(tmp_path):
    """The seconds per temporal patch travel with the cached rows and the batches into Qwen2.5-VL's rope."""
    import yaml

    model = save_tiny_vlm("qwen2_5_vl", tmp_path / "model")
    data = tmp_path / "data"
    data.mkdir()
    _write_video(data / "a.mp4", seconds=2.0)
    rows = [{"messages": [{"role": "user", "content": "<video>What happens?"},
                          {"role": "assistant", "content": "It gets brighter."}], "videos": ["a.mp4"]}] * 2
    (data / "clips.json").write_text(json.dumps(rows))
    (data / "dataset_info.json").write_text(json.dumps({"clips": {
        "file_name": "clips.json", "formatting": "sharegpt", "columns": {"messages": "messages", "videos": "videos"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    config = {"model_name_or_path": str(model), "template": "qwen2_vl", "stage": "sft", "do_train": True,
              "finetuning_type": "lora", "lora_target": "all", "dataset": "clips", "dataset_dir": str(data),
              "cutoff_len": 1024, "video_max_pixels": 64 * 48, "output_dir": str(tmp_path / "out"),
              "per_device_train_batch_size": 2, "learning_rate": 0.01, "max_steps": 2, "logging_steps": 1,
              "save_strategy": "no", "plot_loss": False, "report_to": "none", "tokenized_path": str(tmp_path / "tok")}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    assert main(["train", str(tmp_path / "c.yaml")]) == 0
    from datasets import load_from_disk

    from engine.multimodal.plugins import unpack_arrays

    arrays = unpack_arrays(load_from_disk(str(tmp_path / "tok"))["train"][0]["mm_inputs"])
    clip = media.read_video(str(data / "a.mp4"), 2.0, 128)
    np.testing.assert_allclose(arrays["second_per_grid_ts"], [2 / clip.sampled_fps], rtol=1e-6)


def test_the_check_decodes_a_frame_so_a_damaged_video_is_caught_before_the_model_loads(tmp_path):
    """PyAV opens random bytes as an `image2` "video" stream: `lf-engine check` passed such a file, and training failed
    on it only after the model had loaded. A folder given as a media file is named as a folder."""
    junk = tmp_path / "corrupt.jpg"  # as the review had it: PyAV picks the image2 demuxer by the name
    junk.write_bytes(np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes())
    assert media.probe("videos", str(junk)).startswith("cannot be read")
    good = tmp_path / "good.mp4"
    _write_video(good)
    assert media.probe("videos", str(good)) is None
    assert media.probe("images", str(tmp_path)) == "is a folder, not a file"


def test_a_video_whose_frames_declare_more_pixels_than_an_image_may_is_refused_before_decoding(tmp_path, monkeypatch):
    """Images are held to Pillow's decompression-bomb limit; video frames only to FFmpeg's, which is higher: a small
    file whose frames declare 15,000 x 15,000 pixels was decoded (each frame then an RGB picture of 675 MB). A raw
    YUV4MPEG header declares its size as text, so a 60-byte file stands for such a video here."""
    huge = tmp_path / "huge.y4m"
    huge.write_bytes(b"YUV4MPEG2 W15000 H15000 F2:1 Ip A1:1 C420jpeg\nFRAME\n" + b"\x80" * 64)
    decoded = []
    monkeypatch.setattr(media, "frame_image", lambda frame: decoded.append(frame) or frame.to_image())
    with pytest.raises(media.MediaError, match=r"huge\.y4m is too large to decode: its frames are 15000x15000 "
                                               r"pixels \(225,000,000\), more than the 178,956,970"):
        media.read_video(str(huge))
    assert decoded == []
    assert media.probe("videos", str(huge)).startswith("is too large to decode: its frames are 15000x15000")
    fine = tmp_path / "fine.y4m"  # the same header at an ordinary size is read as before
    fine.write_bytes(b"YUV4MPEG2 W32 H32 F2:1 Ip A1:1 C420jpeg\n" + (b"FRAME\n" + b"\x80" * (32 * 32 * 3 // 2)) * 2)
    assert len(media.read_video(str(fine)).frames) == 2
