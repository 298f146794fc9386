"""Video for Qwen2-VL / Qwen2.5-VL / Qwen3-VL and Gemma 4 without torchvision: PyAV frames processed with Pillow.

transformers' video processors need torchvision, and no torchvision build on PyPI imports with the CPU torch 2.13
(0.28.0, the one that pins torch 2.13, is linked against CUDA). :class:`PilQwenVideoProcessor` stands in for the
family's video processor: it takes the sampled frames (PIL images, see :func:`engine.multimodal.media.read_video`),
resizes every frame of a video to the size the family's rule gives (Qwen2-VL: per frame; Qwen3-VL: a pixel budget
over all frames), rescales and normalizes them, and lays the patches out exactly as the real processor does
(``temporal_patch_size`` consecutive frames per patch, the last frame repeated to fill the last group). It
returns ``pixel_values_videos``, ``video_grid_thw`` and, on request, the video metadata the processor's
``replace_video_token`` reads for Qwen3-VL's timestamps. :class:`PilGemma4VideoProcessor` does the same for
Gemma 4, whose frames are processed like images. The only difference from the torchvision path is the resampling
filter's implementation (Pillow's bicubic instead of torchvision's).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from engine.multimodal.errors import MediaError

QWEN_PROCESSORS = {"Qwen2VLProcessor": "qwen2_vl", "Qwen2_5_VLProcessor": "qwen2_vl", "Qwen3VLProcessor": "qwen3_vl",
                   "Qwen2_5OmniProcessor": "qwen2_vl", "Qwen3OmniMoeProcessor": "qwen2_vl"}
"""Processor class -> the resize rule of its video processor (the omni models take Qwen2-VL's video processor)."""

GEMMA4_PROCESSORS = ("Gemma4Processor",)

_DEFAULT_SIZE = {"qwen2_vl": {"shortest_edge": 128 * 28 * 28, "longest_edge": 28 * 28 * 768},
                 "qwen3_vl": {"shortest_edge": 128 * 32 * 32, "longest_edge": 32 * 32 * 768}}


def frame_size_qwen2(height: int, width: int, factor: int, min_pixels: int, max_pixels: int) -> tuple[int, int]:
    """Qwen2-VL's per-frame rule: the nearest multiple of ``factor`` with the pixel count kept in bounds."""
    from transformers.models.qwen2_vl.image_processing_pil_qwen2_vl import smart_resize

    return smart_resize(height, width, factor=factor, min_pixels=min_pixels, max_pixels=max_pixels)


def frame_size_qwen3(num_frames: int, height: int, width: int, temporal_factor: int, factor: int, min_pixels: int,
                     max_pixels: int) -> tuple[int, int]:
    """Qwen3-VL's rule: the bounds apply to the pixels of all frames together (rounded to ``temporal_factor``)."""
    if num_frames < temporal_factor:
        raise MediaError(f"A Qwen3-VL video needs at least {temporal_factor} frames; raise video_fps or use a longer "
                         "video.")
    if height < factor or width < factor:
        scale = max(factor / height, factor / width)
        height, width = int(height * scale), int(width * scale)
    if max(height, width) / min(height, width) > 200:
        raise MediaError(f"A video of {width}x{height} pixels is too narrow (aspect ratio above 200); crop it.")
    h_bar, w_bar = round(height / factor) * factor, round(width / factor) * factor
    t_bar = round(num_frames / temporal_factor) * temporal_factor
    if t_bar * h_bar * w_bar > max_pixels:
        beta = math.sqrt((num_frames * height * width) / max_pixels)
        h_bar = max(factor, math.floor(height / beta / factor) * factor)
        w_bar = max(factor, math.floor(width / beta / factor) * factor)
    elif t_bar * h_bar * w_bar < min_pixels:
        beta = math.sqrt(min_pixels / (num_frames * height * width))
        h_bar, w_bar = math.ceil(height * beta / factor) * factor, math.ceil(width * beta / factor) * factor
    return h_bar, w_bar


def patchify_video(frames: Any, patch_size: int, merge_size: int, temporal_patch_size: int) -> tuple[Any, list[int]]:
    """(patches of shape (t*h*w, C*T*p*p), [grid_t, grid_h, grid_w]) of normalized frames (num_frames, C, H, W),
    in the layout of transformers' Qwen video processors."""
    import numpy as np

    if pad := -frames.shape[0] % temporal_patch_size:
        frames = np.concatenate([frames, np.repeat(frames[-1:], pad, axis=0)], axis=0)
    num_frames, channel, height, width = frames.shape
    grid_t, grid_h, grid_w = num_frames // temporal_patch_size, height // patch_size, width // patch_size
    patches = frames.reshape(grid_t, temporal_patch_size, channel, grid_h // merge_size, merge_size, patch_size,
                             grid_w // merge_size, merge_size, patch_size)
    patches = patches.transpose(0, 3, 6, 4, 7, 2, 1, 5, 8)
    flat = patches.reshape(grid_t * grid_h * grid_w, channel * temporal_patch_size * patch_size * patch_size)
    return np.ascontiguousarray(flat, dtype=np.float32), [grid_t, grid_h, grid_w]


def _base_class() -> type:
    from transformers.video_processing_utils import BaseVideoProcessor

    return BaseVideoProcessor


def _settings_type(name: str, **fields: type) -> type:
    """The processor's ``valid_kwargs``: the video keyword arguments plus the family's own settings.

    transformers (5.25 and later) fills a processor's settings from this type's keys
    (``_merge_and_standardize_kwargs``), e.g. when ``processor._get_num_multimodal_tokens`` counts a video's tokens;
    a key missing here is missing there.
    """
    from typing import TypedDict

    from transformers.processing_utils import VideosKwargs

    return TypedDict(name, {**VideosKwargs.__annotations__, **fields}, total=False)


class PilQwenVideoProcessor(_base_class()):
    """Qwen2-VL / Qwen3-VL video processing with Pillow and numpy (see the module docstring)."""

    model_input_names = ["pixel_values_videos", "video_grid_thw"]
    valid_kwargs = _settings_type("PilQwenVideoKwargs", patch_size=int, temporal_patch_size=int, merge_size=int,
                                  min_pixels=int, max_pixels=int)

    def configure(self, rule: str, image_processor: Any, settings: dict[str, Any] | None = None) -> PilQwenVideoProcessor:
        """Take patch sizes, normalization and size from the video settings, falling back to the image processor's
        (as transformers does when a model folder has no video processor config)."""
        settings = dict(settings or {})
        self.rule = rule
        for name in ("patch_size", "temporal_patch_size", "merge_size", "image_mean", "image_std", "rescale_factor"):
            setattr(self, name, settings.get(name, getattr(image_processor, name, None)))
        size = settings.get("size") or dict(getattr(image_processor, "size", None) or {}) or _DEFAULT_SIZE[rule]
        for old, new in (("min_pixels", "shortest_edge"), ("max_pixels", "longest_edge")):
            if settings.get(old):
                size[new] = settings[old]
        self.size = {"shortest_edge": int(size["shortest_edge"]), "longest_edge": int(size["longest_edge"])}
        self.temporal_patch_size = int(self.temporal_patch_size or 2)
        self.rescale_factor = float(self.rescale_factor or 1 / 255)
        return self

    def frame_size(self, num_frames: int, height: int, width: int) -> tuple[int, int]:
        """The (height, width) every frame of a video of this size is resized to."""
        factor = self.patch_size * self.merge_size
        low, high = self.size["shortest_edge"], self.size["longest_edge"]
        if self.rule == "qwen3_vl":
            return frame_size_qwen3(num_frames, height, width, self.temporal_patch_size, factor, low, high)
        return frame_size_qwen2(height, width, factor, low, high)

    def _frames(self, frames: list[Any]) -> Any:
        import numpy as np
        from PIL import Image

        images = [frame.convert("RGB") if isinstance(frame, Image.Image) else Image.fromarray(np.asarray(frame))
                  for frame in frames]
        height, width = self.frame_size(len(images), images[0].height, images[0].width)
        mean = np.asarray(self.image_mean, dtype=np.float32)[:, None, None]
        std = np.asarray(self.image_std, dtype=np.float32)[:, None, None]
        out = []
        for image in images:
            if image.size != (width, height):
                image = image.resize((width, height), Image.Resampling.BICUBIC)
            array = np.asarray(image, dtype=np.float32).transpose(2, 0, 1) * self.rescale_factor
            out.append((array - mean) / std)
        return np.stack(out)

    def __call__(self, videos: Any = None, video_metadata: Any = None, return_metadata: bool = False,
                 return_tensors: str | None = "pt", **kwargs: Any) -> dict[str, Any]:
        import numpy as np
        import torch
        from transformers.video_utils import VideoMetadata

        if not videos:
            raise MediaError("No video frames were given.")
        patches, grids = [], []
        for frames in videos:
            if not len(frames):
                raise MediaError("A video has no frames.")
            flat, grid = patchify_video(self._frames(list(frames)), self.patch_size, self.merge_size,
                                        self.temporal_patch_size)
            patches.append(flat)
            grids.append(grid)
        pixel_values = np.concatenate(patches, axis=0)
        out: dict[str, Any] = {"pixel_values_videos": pixel_values, "video_grid_thw": np.asarray(grids, dtype=np.int64)}
        if return_tensors == "pt":
            out = {key: torch.from_numpy(value) for key, value in out.items()}
        if return_metadata:
            metadata = video_metadata or [{"total_num_frames": len(frames), "fps": None} for frames in videos]
            out["video_metadata"] = [item if isinstance(item, VideoMetadata) else VideoMetadata(**item)
                                     for item in metadata]
        return out

    preprocess = __call__

    def get_num_of_video_patches(self, num_frames: int, height: int, width: int, videos_kwargs: Any = None) -> int:
        """Patches of a video of this size (what ``processor._get_num_multimodal_tokens`` asks)."""
        resized_height, resized_width = self.frame_size(num_frames, height, width)
        grid_t = (num_frames + -num_frames % self.temporal_patch_size) // self.temporal_patch_size
        return grid_t * (resized_height // self.patch_size) * (resized_width // self.patch_size)


class PilGemma4VideoProcessor(_base_class()):
    """Gemma 4 video processing with Pillow: every frame goes through the PIL image processor with the video
    settings (70 soft tokens per frame by default, pixels in [0, 1]), as transformers' video processor treats
    frames; the processor writes each frame as ``MM:SS {boi}{video_token x n}{eoi}`` from the metadata."""

    model_input_names = ["pixel_values_videos", "video_position_ids", "num_frames_per_video"]
    valid_kwargs = _settings_type("PilGemma4VideoKwargs", patch_size=int, pooling_kernel_size=int, max_soft_tokens=int)

    def configure(self, image_processor: Any, settings: dict[str, Any] | None = None) -> PilGemma4VideoProcessor:
        settings = dict(settings or {})
        self.image_processor = image_processor
        self.patch_size = int(settings.get("patch_size", getattr(image_processor, "patch_size", 16)))
        self.pooling_kernel_size = int(settings.get("pooling_kernel_size",
                                                    getattr(image_processor, "pooling_kernel_size", 3)))
        self.max_soft_tokens = int(settings.get("max_soft_tokens", 70))
        self.image_mean = list(settings.get("image_mean", [0.0, 0.0, 0.0]))
        self.image_std = list(settings.get("image_std", [1.0, 1.0, 1.0]))
        self.rescale_factor = float(settings.get("rescale_factor", 1 / 255))
        return self

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        out.pop("image_processor", None)  # not part of the saved config
        return out

    def __call__(self, videos: Any = None, video_metadata: Any = None, return_metadata: bool = False,
                 return_tensors: str | None = "pt", **kwargs: Any) -> dict[str, Any]:
        import numpy as np
        import torch
        from transformers.video_utils import VideoMetadata

        if not videos:
            raise MediaError("No video frames were given.")
        pixels, positions, frames_per_video, tokens_per_video = [], [], [], []
        for frames in videos:
            if not len(frames):
                raise MediaError("A video has no frames.")
            out = self.image_processor(list(frames), max_soft_tokens=self.max_soft_tokens, image_mean=self.image_mean,
                                       image_std=self.image_std, rescale_factor=self.rescale_factor,
                                       patch_size=self.patch_size, pooling_kernel_size=self.pooling_kernel_size,
                                       return_tensors="np")
            pixels.append(np.asarray(out["pixel_values"], dtype=np.float32))
            positions.append(np.asarray(out["image_position_ids"]))
            frames_per_video.append(len(frames))
            tokens_per_video.append(int(out["num_soft_tokens_per_image"][0]))
        data: dict[str, Any] = {"pixel_values_videos": np.concatenate(pixels, axis=0),
                                "video_position_ids": np.concatenate(positions, axis=0),
                                "num_frames_per_video": np.asarray(frames_per_video, dtype=np.int64)}
        if return_tensors == "pt":
            data = {key: torch.from_numpy(value) for key, value in data.items()}
        data["num_soft_tokens_per_video"] = tokens_per_video
        if return_metadata:
            metadata = video_metadata or [{"total_num_frames": len(frames), "fps": None} for frames in videos]
            data["video_metadata"] = [item if isinstance(item, VideoMetadata) else VideoMetadata(**item)
                                      for item in metadata]
        return data

    preprocess = __call__


def video_settings(path: str | Path) -> dict[str, Any]:
    """The video processor's settings saved in a model folder (processor_config.json's ``video_processor`` or
    video_preprocessor_config.json), {} when there are none."""
    from engine.multimodal.processor import read_folder_json  # (bounded, regular files only)

    folder = Path(path)
    combined = folder / "processor_config.json"
    if combined.is_file():
        section = read_folder_json(combined).get("video_processor")
        if isinstance(section, dict):
            return section
    single = folder / "video_preprocessor_config.json"
    if single.is_file():
        return read_folder_json(single)
    return {}


def pil_video_processor(processor_name: str, image_processor: Any, settings: dict[str, Any]) -> Any:
    """A working video processor for a Qwen VL or Gemma 4 processor class without torchvision, or None for other
    families."""
    if image_processor is None:
        return None
    if processor_name in GEMMA4_PROCESSORS:
        return PilGemma4VideoProcessor().configure(image_processor, settings)
    rule = QWEN_PROCESSORS.get(processor_name)
    return PilQwenVideoProcessor().configure(rule, image_processor, settings) if rule else None
