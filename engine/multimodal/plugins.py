"""One media plugin per model family, from one dispatch dict (:data:`PLUGINS`).

A plugin turns a row's ``<image>``/``<video>``/``<audio>`` placeholders into the soft-token text the family's
processor expects, and builds the processor inputs (pixel values, grids, audio features) once, at dataset-map
time. The soft-token counts come from the processor's own ``replace_*_token`` rules on the processed media, so the
expansion is exactly what transformers' processor writes; a plugin adds what LLaMA-Factory puts around them
(Qwen's ``<|vision_start|>``/``<|vision_end|>``), its frame-sampling rule, and the name of the token-type column
the model takes (``mm_token_type_ids``; Gemma 3 calls it ``token_type_ids``).
"""

from __future__ import annotations

import io
import logging
from dataclasses import dataclass
from typing import Any

from engine.multimodal import media
from engine.multimodal import plugin_ernie as ernie
from engine.multimodal import plugin_minicpm as minicpm
from engine.multimodal.cross_attention import CrossAttention
from engine.multimodal.errors import MediaError
from engine.multimodal.processor import TORCHVISION_FIX, MediaOptions, video_ready
from engine.wording import counted

logger = logging.getLogger(__name__)

PLACEHOLDERS = {"images": "<image>", "videos": "<video>", "audios": "<audio>"}
KIND_WORD = {"images": "image", "videos": "video", "audios": "audio"}
JOIN_LAST = "join_last_axis"
"""A row's list of its inputs that a batch (or a packed row) joins along their last axis instead of the first
(MiniCPM-V 4.6's NaViT-packed ``pixel_values`` (1, 3, patch, length): one sequence for all the batch's images)."""


@dataclass(frozen=True)
class MediaPlugin:
    """How one family's models take media.

    Attributes:
        name: Plugin name (LLaMA-Factory's ``mm_plugin`` name for the family).
        modalities: Media kinds the family takes: ``images``, ``videos``, ``audios``.
        model_types: ``config.json`` model types served by this plugin.
        image_wrap: Text put before and after each image's soft tokens.
        video_wrap: Text put before and after each video's soft tokens.
        video_metadata: Pass the sampled frame indices in the video metadata (processor re-sampling off).
        even_frames: Repeat the last frame so a video has an even frame count (a temporal patch of 2).
        type_ids_key: The model's token-type input (None: the model takes none).
        pil_video: Video works without torchvision (:mod:`engine.multimodal.video_pil`).
        drop_keys: Processor outputs that only served to count tokens and must not reach the model.
        time_scale_key: The model input taking each video's seconds per temporal patch (Qwen-Omni's
            ``video_second_per_grid``; None: Qwen2.5-VL's ``second_per_grid_ts`` where the processor lists it).
        qwen_sides: Images and video frames get LLaMA-Factory's Qwen2-VL side rule (:func:`media.qwen_sides`).
        why_not: Why media kinds the family's models have are refused here, said with the refusal (MiniCPM-V 4.6's
            video).
    """

    name: str
    modalities: tuple[str, ...]
    model_types: tuple[str, ...]
    image_wrap: tuple[str, str] = ("", "")
    video_wrap: tuple[str, str] = ("", "")
    video_metadata: bool = False
    even_frames: bool = False
    type_ids_key: str | None = "mm_token_type_ids"
    pil_video: bool = False
    drop_keys: tuple[str, ...] = ("num_soft_tokens_per_image", "num_soft_tokens_per_video", "video_metadata",
                                  "num_crops")
    time_scale_key: str | None = None
    qwen_sides: bool = False
    why_not: str = ""

    text_type_id = 0  # not a field: the token type of text tokens (PaliGemma: 1, as LLaMA-Factory gives them)

    # -------------------------------------------------------------------------------------------- checks
    def unsupported(self, kinds: list[str]) -> list[str]:
        """The media kinds among ``kinds`` this family cannot take."""
        return [kind for kind in kinds if kind not in self.modalities]

    # ---------------------------------------------------------------------------------------- processing
    def process(self, processor: Any, messages: list[dict[str, Any]], images: list[Any], videos: list[Any],
                audios: list[Any], opts: MediaOptions) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        """(messages with expanded placeholders, model inputs as numpy arrays) for one row.

        Raises:
            MediaError: placeholder counts that differ from the media, a modality the family cannot take,
                unreadable media, or video without torchvision.
        """
        self.check_media(messages, images, videos, audios)
        replacements, features = self.media_texts(processor, images, videos, audios, opts)
        return expand_placeholders(messages, replacements), self._arrays(features)

    def media_texts(self, processor: Any, images: list[Any], videos: list[Any], audios: list[Any],
                    opts: MediaOptions) -> tuple[dict[str, list[str]], dict[str, Any]]:
        """(each kind's placeholder texts in order, the processed features of all the row's media)."""
        features: dict[str, Any] = {}
        texts: dict[str, list[str]] = {kind: [] for kind in PLACEHOLDERS}
        for kind, items, read, text in (("images", images, self._images, self.image_text),
                                        ("videos", videos, self._videos, self.video_text),
                                        ("audios", audios, self._audios, self.audio_text)):
            if items:
                out = read(processor, items, opts)
                texts[kind] = [text(processor, out, i) for i in range(len(items))]
                features.update(out)
        return texts, features

    def check_media(self, messages: list[dict[str, Any]], images: list[Any], videos: list[Any],
                    audios: list[Any]) -> None:
        """Refuse placeholder counts that differ from the media, and media kinds the family cannot take.

        Raises:
            MediaError: naming the fix.
        """
        given = {"images": images, "videos": videos, "audios": audios}
        counts = {kind: sum(str(m.get("content") or "").count(tag) for m in messages) for kind, tag in PLACEHOLDERS.items()}
        for kind, items in given.items():
            if counts[kind] != len(items):
                raise MediaError(f"{counted(counts[kind], PLACEHOLDERS[kind] + ' placeholder')} but "
                                 f"{counted(len(items), KIND_WORD[kind] + ' file')}; put one {PLACEHOLDERS[kind]} in the "
                                 "text per file.")
        refused = self.unsupported([kind for kind, items in given.items() if items])
        if refused:
            why = f" ({self.why_not})" if self.why_not else ""
            raise MediaError(f"This model ({self.name}) takes {', '.join(self.modalities)}, not "
                             f"{', '.join(refused)}{why}; choose a model that does or drop those columns.")

    def batch_flags(self, opts: MediaOptions, processor: Any = None) -> dict[str, Any]:
        """Keyword arguments every forward of the model gets beside the batch (none for most families)."""
        return {}

    def image_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        """The text put at image ``index``'s placeholder: its soft tokens, wrapped."""
        return self.image_wrap[0] + processor.replace_image_token(features, index) + self.image_wrap[1]

    def video_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        """The text put at video ``index``'s placeholder: its soft tokens, wrapped."""
        return self.video_wrap[0] + processor.replace_video_token(features, index) + self.video_wrap[1]

    def audio_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        """The soft-token text of audio ``index`` of the processed ``features``."""
        return processor.replace_audio_token(features, index)

    def prefix_ids(self, processor: Any, images: int) -> list[int]:
        """Token ids put before the whole text of a row with ``images`` images (none: the soft tokens sit at the
        placeholders)."""
        return []

    def cross_attention(self, processor: Any) -> CrossAttention | None:
        """What a cross-attention model's batches need for their mask (None: the family has no cross-attention)."""
        return None

    def _images(self, processor: Any, images: list[Any], opts: MediaOptions) -> dict[str, Any]:
        loaded = [media.load_image(image, opts.image_max_pixels, opts.image_min_pixels) for image in images]
        if self.qwen_sides:
            loaded = [media.qwen_sides(image) for image in loaded]
        for source, image in zip(images, loaded):
            problem = media.shorter_side_problem(processor.image_processor, image.width, image.height)
            if problem:  # before the processor builds it
                raise MediaError(f"Image {media.media_label(source)} {problem}.")
        return dict(processor.image_processor(loaded, return_tensors="pt"))

    def read_videos(self, videos: list[Any], opts: MediaOptions) -> list[media.VideoClip]:
        """Decoded, sampled clips (an even frame count where the family needs one)."""
        clips = [media.read_video(video, opts.video_fps, opts.video_maxlen, opts.video_max_pixels,
                                  opts.video_min_pixels) for video in videos]
        if self.qwen_sides:
            for clip in clips:
                clip.frames[:] = [media.qwen_sides(frame) for frame in clip.frames]
        if self.even_frames:
            for clip in clips:
                if len(clip.frames) % 2:
                    clip.frames.append(clip.frames[-1])
                    clip.indices.append(clip.indices[-1])
                    clip.scaled_indices.append(clip.scaled_indices[-1])
        return clips

    def _videos(self, processor: Any, videos: list[Any], opts: MediaOptions) -> dict[str, Any]:
        if not video_ready(processor):
            raise MediaError(f"This model's {TORCHVISION_FIX}.")
        clips = self.read_videos(videos, opts)
        sizer = getattr(processor, "video_processor", None) or processor.image_processor
        for source, clip in zip(videos, clips):
            problem = media.shorter_side_problem(sizer, clip.frames[0].width, clip.frames[0].height)
            if problem:  # before the processor builds them
                raise MediaError(f"Video {media.media_label(source)}'s frames: each {problem}.")
        kwargs: dict[str, Any] = {"return_tensors": "pt"}
        if self.video_metadata:
            kwargs.update(video_metadata=[clip.metadata(opts.video_fps) for clip in clips], do_sample_frames=False,
                          return_metadata=True)
        out = dict(processor.video_processor(videos=[clip.frames for clip in clips], **kwargs))
        listed = "second_per_grid_ts" in (getattr(processor, "model_input_names", None) or [])
        key = self.time_scale_key or ("second_per_grid_ts" if listed else None)
        if key:  # seconds per temporal patch of each video (Qwen2.5-VL, Qwen-Omni)
            import torch

            temporal = (getattr(processor.video_processor, "temporal_patch_size", None)
                        or getattr(processor.image_processor, "temporal_patch_size", 2))
            out[key] = torch.tensor([temporal / (clip.sampled_fps or opts.video_fps) for clip in clips],
                                    dtype=torch.float32)
        return out

    def _audios(self, processor: Any, audios: list[Any], opts: MediaOptions) -> dict[str, Any]:
        extractor = getattr(processor, "feature_extractor", None) or getattr(processor, "audio_processor", None)
        if extractor is None:
            raise MediaError(f"This model ({self.name}) has no audio feature extractor; it cannot take audio.")
        rate = int(getattr(extractor, "sampling_rate", None) or opts.audio_sampling_rate)
        waves = [media.read_audio(audio, rate) for audio in audios]
        return dict(extractor(waves, sampling_rate=rate, return_tensors="pt"))

    def _arrays(self, features: dict[str, Any]) -> dict[str, Any]:
        import numpy as np
        import torch

        arrays = {}
        for key, value in features.items():
            if key in self.drop_keys or value is None:
                continue
            if isinstance(value, torch.Tensor):
                value = value.float() if value.is_floating_point() else value
                arrays[key] = value.numpy()
            elif isinstance(value, np.ndarray):
                arrays[key] = value
        return arrays

    def type_ids(self, processor: Any, input_ids: list[int]) -> list[int]:
        """Per-token modality ids (0 text, 1 image, 2 video, 3 audio) as the processor defines them."""
        return processor.create_mm_token_type_ids([input_ids])[0]

    def extra_type_ids(self, processor: Any) -> dict[str, dict[int, int]]:
        """Further token-type inputs of the model, built on each batch's ids: input name -> (token id -> type; other
        tokens 0). None for most families; ERNIE-4.5-VL's ``moe_mm_token_type_ids``."""
        return {}


class Qwen2AudioPlugin(MediaPlugin):
    """Qwen2-Audio: LLaMA-Factory's audio inputs (Whisper features padded to the full 30 s window, with their mask
    as ``feature_attention_mask``) and its soft-token count, the audio encoder's output length of the mask's
    frames, between the processor's ``<|audio_bos|>`` and ``<|audio_eos|>``."""

    def _audios(self, processor: Any, audios: list[Any], opts: MediaOptions) -> dict[str, Any]:
        out = whisper_window(processor, audios, int(getattr(processor, "audio_sampling_rate", None)
                                                    or opts.audio_sampling_rate))
        out["num_audio_tokens"] = qwen2_audio_tokens(out["feature_attention_mask"].sum(-1))
        return out

    def audio_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        return processor.audio_bos_token + processor.replace_audio_token(features, index) + processor.audio_eos_token


class PaliGemmaPlugin(MediaPlugin):
    """PaliGemma, as LLaMA-Factory feeds it: the placeholders are removed and each image's ``image_seq_length``
    tokens go before the whole text (BOS included), outside the loss; token types are 0 for the image tokens and 1
    for the text (LLaMA-Factory's, which keep the text causal)."""

    text_type_id = 1

    def image_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        return ""

    def prefix_ids(self, processor: Any, images: int) -> list[int]:
        return [processor.image_token_id] * (processor.image_seq_length * images)

    def type_ids(self, processor: Any, input_ids: list[int]) -> list[int]:
        return [0 if token == processor.image_token_id else 1 for token in input_ids]


class MllamaPlugin(MediaPlugin):
    """Llama 3.2 Vision (``mllama``), as LLaMA-Factory feeds it: each ``<image>`` becomes one ``<|image|>`` token (no
    soft tokens: the text cross-attends to the image tiles); a row's images are processed together (``pixel_values``
    (1, images, tiles, 3, H, W), ``aspect_ratio_ids``, ``aspect_ratio_mask``), and each batch gets its
    ``cross_attention_mask`` from the rows' ids (:mod:`engine.multimodal.cross_attention`)."""

    def cross_attention(self, processor: Any) -> CrossAttention | None:
        return CrossAttention(image_token_id=int(processor.image_token_id),
                              max_tiles=int(processor.image_processor.max_image_tiles))


class MiniCPMV46Plugin(MediaPlugin):
    """MiniCPM-V 4.6 images as LLaMA-Factory's ``minicpm_v_4_6`` plugin gives them (:mod:`engine.multimodal.
    plugin_minicpm`): unscaled images, its placeholder layout, ``downsample_mode`` at every forward, NaViT-packed
    pixel values joined along their last axis; video refused with the reason."""

    def check_media(self, messages: list[dict[str, Any]], images: list[Any], videos: list[Any],
                    audios: list[Any]) -> None:
        minicpm.check_rows(images, videos)
        super().check_media(messages, images, videos, audios)

    def batch_flags(self, opts: MediaOptions, processor: Any = None) -> dict[str, Any]:
        return {"downsample_mode": minicpm.downsample_mode(processor)} if processor is not None else {}

    def _images(self, processor: Any, images: list[Any], opts: MediaOptions) -> dict[str, Any]:
        return minicpm.process_images(processor, images, opts)

    def image_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        return minicpm.image_text(processor, features, index)

    def _arrays(self, features: dict[str, Any]) -> dict[str, Any]:
        import numpy as np

        arrays = super()._arrays(features)
        if "pixel_values" in arrays:
            arrays[JOIN_LAST] = np.array(["pixel_values"])
        return arrays


@dataclass(frozen=True)
class QwenOmniPlugin(MediaPlugin):
    """Qwen2.5-Omni / Qwen3-Omni (their thinker), as LLaMA-Factory's ``qwen2_omni`` plugin feeds it.

    Images and videos are Qwen2-VL's (grid tokens between the vision bos/eos tokens; videos get
    ``video_second_per_grid``, the temporal patch over the sampled frame rate); audio is Whisper features padded to
    the 30 s window with their mask as ``feature_attention_mask``, its token count LLaMA-Factory's formula of the
    mask's frames (Qwen2.5-Omni: two stride-2 steps; Qwen3-Omni: per 100-frame window, 13 tokens a full one), between
    the audio bos/eos tokens. With ``use_audio_in_video`` each ``<video>`` takes the next ``<audio>`` of its message
    as its sound track: one block ``vision_bos audio_bos (video chunk, audio chunk)... audio_eos vision_eos`` in
    2-second chunks of rotary time (``position_id_per_seconds``), the ``<audio>`` removed, and the model told
    ``use_audio_in_video`` at each forward (its 3D rotary positions then interleave the two).
    """

    audio_wrap: tuple[str, str] = ("", "")
    qwen3_audio: bool = False
    # LLaMA-Factory reads the processor's ``position_id_per_seconds``, which its transformers (5.6) processors do not
    # have, so 25 for both families (transformers 5.25's Qwen3-Omni processor says 13)
    position_id_per_seconds: int = 25

    def video_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        merge = processor.image_processor.merge_size
        count = int(features["video_grid_thw"][index].prod()) // merge ** 2
        return self.video_wrap[0] + processor.video_token * count + self.video_wrap[1]

    def audio_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        count = int(features["num_audio_tokens"][index])
        return self.audio_wrap[0] + processor.audio_token * count + self.audio_wrap[1]

    def audio_tokens(self, frames: Any) -> list[int]:
        """Soft tokens of each audio from its feature frames (the mask's sums), by LLaMA-Factory's formula."""
        if not self.qwen3_audio:
            return qwen2_audio_tokens(frames)
        leave = frames % 100
        features = (leave - 1) // 2 + 1
        return [int(count) for count in ((features - 1) // 2 + 1 - 1) // 2 + 1 + (frames // 100) * 13]

    def batch_flags(self, opts: MediaOptions, processor: Any = None) -> dict[str, Any]:
        return {"use_audio_in_video": True} if opts.use_audio_in_video else {}

    def process(self, processor: Any, messages: list[dict[str, Any]], images: list[Any], videos: list[Any],
                audios: list[Any], opts: MediaOptions) -> tuple[list[dict[str, Any]], dict[str, Any]]:
        self.check_media(messages, images, videos, audios)
        paired = bool(opts.use_audio_in_video and videos and audios)
        if paired and len(videos) != len(audios):
            raise MediaError(f"{counted(len(videos), 'video')} but {counted(len(audios), 'audio file')}: with `use_audio_in_video` each "
                             "video takes one audio file, its sound track; give one per video or turn it off.")
        texts, features = self.media_texts(processor, images, videos, audios, opts)
        if not paired:
            return expand_placeholders(messages, texts), self._arrays(features)
        blocks = [self.video_with_audio_text(processor, features, i) for i in range(len(videos))]
        return pair_video_audio(expand_placeholders(messages, {"images": texts["images"]}), blocks), \
            self._arrays(features)

    def video_with_audio_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        """Video ``index`` with audio ``index`` as its sound track: their tokens in 2-second chunks of rotary time,
        video first in each chunk, as LLaMA-Factory lays them out."""
        import torch

        per_second = self.position_id_per_seconds
        merge = processor.image_processor.merge_size
        grid_t, grid_h, grid_w = (int(v) for v in features["video_grid_thw"][index])
        video_time = (torch.arange(grid_t).view(-1, 1, 1).expand(-1, grid_h // merge, grid_w // merge).flatten()
                      * features["video_second_per_grid"][index] * per_second).long()
        audio_time = torch.arange(int(features["num_audio_tokens"][index]))
        per_chunk = per_second * 2
        video_chunks = processor.get_chunked_index(video_time, per_chunk)
        audio_chunks = processor.get_chunked_index(audio_time, per_chunk)
        text = self.video_wrap[0] + self.audio_wrap[0]
        for j in range(max(len(video_chunks), len(audio_chunks))):
            if j < len(video_chunks):
                text += processor.video_token * int(video_chunks[j][1] - video_chunks[j][0])
            if j < len(audio_chunks):
                text += processor.audio_token * int(audio_chunks[j][1] - audio_chunks[j][0])
        return text + self.audio_wrap[1] + self.video_wrap[1]

    def _audios(self, processor: Any, audios: list[Any], opts: MediaOptions) -> dict[str, Any]:
        out = whisper_window(processor, audios, int(opts.audio_sampling_rate))
        out["num_audio_tokens"] = self.audio_tokens(out["feature_attention_mask"].sum(-1))
        return out


class ErnieVLPlugin(MediaPlugin):
    """ERNIE-4.5-VL images as LLaMA-Factory writes them, with the processor's MoE routing column
    (:mod:`engine.multimodal.plugin_ernie`); video is refused with the reason."""

    def image_text(self, processor: Any, features: dict[str, Any], index: int) -> str:
        ernie.check_tokens(processor)
        return ernie.image_text(processor, features, index)

    def extra_type_ids(self, processor: Any) -> dict[str, dict[int, int]]:
        return {"moe_mm_token_type_ids": ernie.moe_token_types(processor)}


def whisper_window(processor: Any, audios: list[Any], rate: int) -> dict[str, Any]:
    """The Qwen audio families' inputs as LLaMA-Factory builds them: Whisper features of the full 30 s window, their
    frame mask as ``feature_attention_mask``."""
    waves = [media.read_audio(audio, rate) for audio in audios]
    out = dict(processor.feature_extractor(waves, sampling_rate=rate, return_attention_mask=True,
                                           padding="max_length", return_tensors="pt"))
    out["feature_attention_mask"] = out.pop("attention_mask")
    return out


def qwen2_audio_tokens(frames: Any) -> list[int]:
    """Soft tokens of each Qwen2-Audio / Qwen2.5-Omni audio: its encoder's output length of the mask's frames."""
    return [int(count) for count in ((frames - 1) // 2 + 1 - 2) // 2 + 1]


def pair_video_audio(messages: list[dict[str, Any]], blocks: list[str]) -> list[dict[str, Any]]:
    """Messages with the n-th ``<video>`` replaced by ``blocks[n]`` and an ``<audio>`` removed for each, as
    LLaMA-Factory does with ``use_audio_in_video``: each ``<video>`` must have an ``<audio>`` after it in its message.

    Raises:
        MediaError: a ``<video>`` with no ``<audio>`` after it in its message.
    """
    video, audio = PLACEHOLDERS["videos"], PLACEHOLDERS["audios"]
    out, index = [], 0
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and video in content:
            while video in content:
                at = content.find(video)
                if content.find(audio, at) == -1:
                    raise MediaError(f"With `use_audio_in_video` each {video} must be followed by its {audio} in the "
                                     f"same message (e.g. `{video}{audio}What happens?`).")
                content = content.replace(video, blocks[index], 1).replace(audio, "", 1)
                index += 1
            message = {**message, "content": content}
        out.append(message)
    return out


def soft_token_ids(processor: Any) -> set[int]:
    """Ids of the tokens that stand for media features."""
    ids: set[int] = set()
    for name in ("image_token_ids", "video_token_ids", "audio_token_ids"):
        try:
            values = getattr(processor, name, None) or []
        except (AttributeError, TypeError):
            values = []
        ids.update(int(v) for v in values if v is not None)
    for name in ("image_token_id", "video_token_id", "audio_token_id"):
        value = getattr(processor, name, None)
        if isinstance(value, int):
            ids.add(value)
    return ids


def expand_placeholders(messages: list[dict[str, Any]], replacements: dict[str, list[str]]) -> list[dict[str, Any]]:
    """Messages with the n-th ``<image>`` (``<video>``, ``<audio>``) replaced by the n-th replacement text."""
    iters = {PLACEHOLDERS[kind]: iter(values) for kind, values in replacements.items()}
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and any(tag in content for tag in iters):
            pieces, rest = [], content
            while True:
                hits = [(rest.find(tag), tag) for tag in iters if tag in rest]
                if not hits:
                    break
                position, tag = min(hits)
                pieces += [rest[:position], next(iters[tag])]
                rest = rest[position + len(tag):]
            message = {**message, "content": "".join(pieces) + rest}
        out.append(message)
    return out


def pack_arrays(arrays: dict[str, Any]) -> bytes:
    """Model inputs as one ``.npz`` blob (no pickle), stored with the tokenized row."""
    import numpy as np

    if not arrays:
        return b""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def unpack_arrays(blob: bytes | None) -> dict[str, Any]:
    """The arrays of :func:`pack_arrays`."""
    import numpy as np

    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as data:
        return {key: data[key] for key in data.files}


_QWEN_WRAP = ("<|vision_start|>", "<|vision_end|>")

PLUGINS: dict[str, MediaPlugin] = {
    "qwen2_vl": MediaPlugin("qwen2_vl", ("images", "videos"), ("qwen2_vl", "qwen2_5_vl"), image_wrap=_QWEN_WRAP,
                            video_wrap=_QWEN_WRAP, video_metadata=True, even_frames=True, pil_video=True,
                            qwen_sides=True),
    "qwen3_vl": MediaPlugin("qwen3_vl", ("images", "videos"), ("qwen3_vl", "qwen3_vl_moe", "qwen3_5", "qwen3_5_moe"),
                            image_wrap=_QWEN_WRAP,
                            video_metadata=True, even_frames=True, pil_video=True, qwen_sides=True),
    # GLM-4.1V / 4.5V images (their timestamped video layout is not built here: video rows are refused)
    "glm4v": MediaPlugin("glm4v", ("images",), ("glm4v", "glm4v_moe"),
                         image_wrap=("<|begin_of_image|>", "<|end_of_image|>"), qwen_sides=True),
    "gemma3": MediaPlugin("gemma3", ("images",), ("gemma3",), type_ids_key="token_type_ids"),
    "gemma4": MediaPlugin("gemma4", ("images", "videos", "audios"), ("gemma4",), video_metadata=True, pil_video=True),
    "llava": MediaPlugin("llava", ("images",), ("llava",), type_ids_key=None),
    # LLaVA-NeXT: each image's tokens count its base view and its any-resolution grid (``image_sizes``); rows
    # with different grid sizes are zero-padded on the patch axis, which the model cuts by ``image_sizes``
    "llava_next": MediaPlugin("llava_next", ("images",), ("llava_next",), type_ids_key=None),
    # InternVL 3 / 3.5 images: <img>, the tiles' <IMG_CONTEXT> tokens, </img> (LLaMA-Factory's video layout, frames
    # through the image processor, is not built here: video rows are refused)
    "intern_vl": MediaPlugin("intern_vl", ("images",), ("internvl",), type_ids_key=None,
                             drop_keys=(*MediaPlugin.drop_keys, "num_patches")),
    # Pixtral / Mistral Small 3.x / Ministral 3: a row of [IMG] tokens per patch row, each row closed by
    # [IMG_BREAK] and the last by [IMG_END] (the processor's rule on the image processor's sizes, as LLaMA-Factory
    # computes it); images of different sizes are zero-padded, which the vision tower cuts by ``image_sizes``.
    # Pixtral 12B is a LLaVA model (model type llava), served by the llava plugin the same way
    "pixtral": MediaPlugin("pixtral", ("images",), ("mistral3",), type_ids_key=None),
    # LLaVA-NeXT-Video (images as LLaVA-NeXT's any-resolution grids) and Video-LLaVA: the processors' own counts are
    # LLaMA-Factory's; their video goes through transformers' torchvision video processors
    "llava_next_video": MediaPlugin("llava_next_video", ("images", "videos"), ("llava_next_video",), type_ids_key=None),
    "video_llava": MediaPlugin("video_llava", ("images", "videos"), ("video_llava",), type_ids_key=None),
    "paligemma": PaliGemmaPlugin("paligemma", ("images",), ("paligemma",), type_ids_key="token_type_ids"),
    "mllama": MllamaPlugin("mllama", ("images",), ("mllama",), type_ids_key=None),
    # MiniCPM-V 4.6 images (video refused: LLaMA-Factory's plugin fails on video rows, and its video processor needs
    # torchvision)
    "minicpm_v_4_6": MiniCPMV46Plugin("minicpm_v_4_6", ("images",), ("minicpmv4_6",), type_ids_key=None,
                                      why_not=minicpm.VIDEO_REFUSED),
    "qwen2_audio": Qwen2AudioPlugin("qwen2_audio", ("audios",), ("qwen2_audio",), type_ids_key=None),
    # the omni models' thinker; LLaMA-Factory's mm_plugin tokens of the qwen2_omni / qwen3_omni templates
    "qwen2_omni": QwenOmniPlugin("qwen2_omni", ("images", "videos", "audios"), ("qwen2_5_omni", "qwen2_5_omni_thinker"),
                                 image_wrap=("<|vision_bos|>", "<|vision_eos|>"),
                                 video_wrap=("<|vision_bos|>", "<|vision_eos|>"), even_frames=True, pil_video=True,
                                 type_ids_key=None, audio_wrap=("<|audio_bos|>", "<|audio_eos|>"),
                                 time_scale_key="video_second_per_grid", qwen_sides=True),
    "qwen3_omni": QwenOmniPlugin("qwen3_omni", ("images", "videos", "audios"),
                                 ("qwen3_omni_moe", "qwen3_omni_moe_thinker"), image_wrap=_QWEN_WRAP,
                                 video_wrap=_QWEN_WRAP, even_frames=True, pil_video=True, type_ids_key=None,
                                 audio_wrap=("<|audio_start|>", "<|audio_end|>"), qwen3_audio=True,
                                 time_scale_key="video_second_per_grid", qwen_sides=True),
    "ernie_vl": ErnieVLPlugin("ernie_vl", ("images",), ("ernie4_5_vl_moe",), why_not=ernie.VIDEO_REFUSED),
}
"""Plugin name -> plugin; the one dispatch table of the multimodal room."""


def plugin_for(model_type: str | None, template: str | None = None) -> MediaPlugin | None:
    """The plugin serving a model type (or, failing that, a template of the same name); None when none does."""
    for plugin in PLUGINS.values():
        if model_type and model_type in plugin.model_types:
            return plugin
    key = (template or "").removesuffix("n") if template in ("gemma4n",) else (template or "")
    return PLUGINS.get(key)


def model_modalities(plugin: MediaPlugin, config: dict[str, Any] | Any) -> tuple[str, ...]:
    """The media a given model takes: its plugin's, less audio when the config has no audio encoder."""
    get = config.get if isinstance(config, dict) else lambda key, default=None: getattr(config, key, default)
    kinds = plugin.modalities
    if "audios" in kinds and not get("audio_config", None):
        kinds = tuple(kind for kind in kinds if kind != "audios")
    return kinds
