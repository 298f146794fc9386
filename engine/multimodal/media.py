"""Media readers: images with Pillow, video and audio with PyAV (``av``), and the frame-sampling rules.

- Images are opened, converted to RGB and resized (aspect ratio kept) into ``[min_pixels, max_pixels]`` (or, for a
  family whose processor sizes them itself, loaded at their own size: :func:`load_image_as_is`).
- Video frames are sampled at ``video_fps`` (at most ``video_maxlen`` frames, evenly spread over the stream, at
  least one); the sampled indices are kept, and for Gemma 4 and Qwen3-VL rescaled to ``index / original_fps *
  video_fps`` so the processor's timestamps match the frames used (its own re-sampling is switched off). Frames
  become RGB as PyAV 16 makes them, whatever PyAV is installed (:func:`frame_image`).
- Audio is decoded to float samples, mixed to mono by the channels' mean and resampled to the processor's sampling
  rate by band-limited sinc interpolation, as LLaMA-Factory (torchaudio) does.

Remote media (``http://``, ``https://``) are never fetched: training and chat read local files or data URLs.
"""

from __future__ import annotations

import base64
import binascii
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.multimodal.errors import MediaError

REMOTE_PREFIXES = ("http://", "https://", "ftp://", "s3://", "gs://")


def is_remote(item: Any) -> bool:
    """Whether a media reference is a remote URL (never fetched here)."""
    return isinstance(item, str) and item.strip().lower().startswith(REMOTE_PREFIXES)


def decode_data_url(url: str) -> tuple[str, bytes]:
    """(media type, bytes) of a ``data:<type>;base64,<payload>`` URL.

    Raises:
        MediaError: when the text is not a base64 data URL.
    """
    head, sep, payload = url.partition(",")
    if not sep or not head.startswith("data:") or not head.endswith(";base64"):
        raise MediaError("Media must be sent as a base64 data URL (`data:image/png;base64,...`); local paths and "
                         "remote URLs are not read.")
    try:
        return head[5:-7], base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as err:
        raise MediaError(f"The data URL's base64 payload is damaged ({err}); encode the file again.") from None


def _open(source: Any) -> Any:
    """A path or a file-like object for PIL/PyAV (bytes are wrapped)."""
    if isinstance(source, (bytes, bytearray)):
        return io.BytesIO(source)
    if isinstance(source, str) and source.startswith("data:"):  # an image embedded in a dataset row
        return io.BytesIO(decode_data_url(source)[1])
    if isinstance(source, str) and is_remote(source):
        raise MediaError(f"{source} is a remote URL; downloads are off here. Save the file and give its path.")
    if isinstance(source, (str, Path)) and _special_file(source):  # a pipe's open waits for a writer forever
        raise MediaError(f"{source} {NOT_REGULAR}; give the media file itself.")
    return source


def _special_file(path: str | Path) -> bool:
    """Whether ``path`` (links followed) is a pipe, device or socket: neither a regular file nor a folder."""
    import os
    import stat

    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):  # missing, a name too long, a NUL: the opener says so
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


def resize_into(image: Any, max_pixels: int, min_pixels: int) -> Any:
    """``image`` as RGB, scaled (aspect kept) down to ``max_pixels`` or up to ``min_pixels``."""
    width, height = image.size
    if width * height > max_pixels:
        factor = math.sqrt(max_pixels / (width * height))
        image = image.resize((max(1, int(width * factor)), max(1, int(height * factor))))
    width, height = image.size
    if width * height < min_pixels:
        factor = math.sqrt(min_pixels / (width * height))
        image = image.resize((max(1, int(width * factor)), max(1, int(height * factor))))
    return image if image.mode == "RGB" else image.convert("RGB")


def open_image(source: Any) -> Any:
    """The PIL image of a path, bytes or PIL image, decoded as it is (mode and size unchanged).

    Raises:
        MediaError: for a missing or unreadable file.
    """
    from PIL import Image, UnidentifiedImageError

    if isinstance(source, Image.Image):
        return source
    try:
        image = Image.open(_open(source))
        image.load()
    except FileNotFoundError:
        raise MediaError(f"Image file not found: {source}") from None
    except UnidentifiedImageError:  # its text names the file, or a BytesIO object's address for bytes
        raise MediaError(f"Image {media_label(source)} is not an image Pillow reads (empty, damaged, or another kind of "
                         "file); replace the file.") from None
    except OSError as err:
        raise MediaError(f"Image {media_label(source)} cannot be read ({err}); replace the file.") from None
    except Image.DecompressionBombError as err:  # not an OSError: over Pillow's pixel limit
        raise MediaError(f"Image {media_label(source)} is too large to decode ({err}); use a smaller image.") from None
    return image


def qwen_sides(image: Any) -> Any:
    """LLaMA-Factory's Qwen2-VL rule after the pixel bounds (its Qwen2-VL, Qwen3-VL, GLM-4V and Qwen-Omni plugins,
    for images and video frames alike): each side at least 28 pixels, and an aspect ratio above 200 brought to 180
    (the processors refuse one above 200)."""
    if min(image.width, image.height) < 28:
        image = image.resize((max(image.width, 28), max(image.height, 28)))
    if image.width / image.height > 200:
        image = image.resize((image.height * 180, image.height))
    if image.height / image.width > 200:
        image = image.resize((image.width, image.width * 180))
    return image


def load_image(source: Any, max_pixels: int = 768 * 768, min_pixels: int = 32 * 32) -> Any:
    """An RGB PIL image from a path, bytes or PIL image, resized into the pixel bounds.

    Raises:
        MediaError: for a missing or unreadable file.
    """
    return resize_into(open_image(source), max_pixels, min_pixels)


def load_image_as_is(source: Any) -> Any:
    """An RGB PIL image from a path, bytes or PIL image at its own size, as transformers' processors load a file
    (a file's EXIF orientation applied; a PIL image taken as given)."""
    from PIL import Image, ImageOps

    image = open_image(source)
    if not isinstance(source, Image.Image):
        image = ImageOps.exif_transpose(image)
    return image if image.mode == "RGB" else image.convert("RGB")


def media_label(source: Any) -> str:
    """How a medium is named in messages: its path, or what it is when it has none."""
    if isinstance(source, (bytes, bytearray)):
        return "(uploaded bytes)"
    return "(an image embedded in the data)" if isinstance(source, str) and source.startswith("data:") else str(source)


def sample_indices(total_frames: int, duration: float | None, video_fps: float, video_maxlen: int) -> list[int]:
    """Frame indices sampled at ``video_fps``: ``floor(duration * fps)`` frames (at least 1, at most
    ``video_maxlen`` and the frame count), spread evenly from the first frame to the last."""
    if total_frames <= 0:  # a stream without a frame count: the first video_maxlen frames
        return list(range(video_maxlen))
    import numpy as np

    wanted = max(1, math.floor((duration or 0.0) * video_fps))
    count = min(total_frames, video_maxlen, wanted)
    return [int(i) for i in np.linspace(0, total_frames - 1, count).astype(np.int32)]


@dataclass
class VideoClip:
    """Sampled frames of one video and where they came from."""

    frames: list[Any]
    indices: list[int]
    original_fps: float
    duration: float
    total_frames: int
    scaled_indices: list[float] = field(default_factory=list)
    sampled_fps: float = 0.0
    """Sampled frames per second of the stream's duration (LLaMA-Factory's ``fps_per_video``; Qwen2.5-VL's time
    scale), or ``video_fps`` when the stream states no duration."""

    def metadata(self, video_fps: float) -> dict[str, Any]:
        """The video metadata the processor gets, with the sampled (rescaled) indices and re-sampling off."""
        return {"fps": video_fps, "duration": self.duration, "total_num_frames": len(self.frames),
                "frames_indices": self.scaled_indices}


def timestamps_mmss(scaled_indices: list[float], video_fps: float) -> list[str]:
    """Gemma 4's ``MM:SS`` frame timestamps for rescaled indices at ``video_fps`` (what its processor writes)."""
    return [f"{int(t // 60):02d}:{int(t % 60):02d}" for t in (index / video_fps for index in scaled_indices)]


def frame_image(frame: Any) -> Any:
    """A decoded video frame as an RGB PIL image, converted as PyAV 16 and earlier convert it (LLaMA-Factory 0.9.5
    pins ``av<=16`` and reads frames with ``frame.to_image()``): a YUV frame through the BT.601 matrix whatever
    colour space it is tagged with, in the range its pixel format implies (full for ``yuvj*``, limited otherwise,
    whatever range it is tagged with); RGB, palette and grey frames as they are.

    PyAV 17 and later convert with the frame's own tags, so a BT.709 video (most H.264 and VP9 files today) got
    other colours (LLaMA-Factory's demo videos: a level brighter on average, up to 19 levels on strong colours; the
    processed Qwen2-VL pixel arrays' sums 4-10% off). Naming the source's matrix and range gives the old conversion
    on every PyAV version (PyAV 16 and 18 give the same bytes, 8-bit YUV of every kind tried). One difference stays:
    frames of more than 8 bits per channel (``yuv420p10le``) go through another swscale path in PyAV 18 (a test video:
    the same mean, pixels up to 41 levels apart); no reformat option brings back PyAV 16's.
    """
    from av.video.reformatter import ColorRange, Colorspace

    fmt = frame.format
    if fmt.is_rgb or fmt.has_palette or getattr(fmt, "is_bayer", False) or fmt.name.startswith(("gray", "ya")):
        return frame.to_image()
    full = fmt.name.startswith("yuvj")
    return frame.to_image(src_colorspace=Colorspace.ITU601,
                          src_color_range=ColorRange.JPEG if full else ColorRange.MPEG)


def frame_pixels_problem(width: int, height: int) -> str | None:
    """Why video frames of ``width`` x ``height`` are refused before any is decoded (None when they are not): more
    pixels than an image may have (Pillow's decompression-bomb limit, twice ``Image.MAX_IMAGE_PIXELS``, which
    images are held to). FFmpeg's own limit is higher (about 16,000 x 16,000), and each frame becomes an RGB picture
    of 3 bytes a pixel before it is scaled down, so a small file whose frames declare such a size (most of each
    frame left to the decoder to fill) took gigabytes per frame."""
    from PIL import Image

    if not Image.MAX_IMAGE_PIXELS or width * height <= 2 * Image.MAX_IMAGE_PIXELS:
        return None
    return (f"its frames are {width}x{height} pixels ({width * height:,}), more than the "
            f"{2 * Image.MAX_IMAGE_PIXELS:,} an image may have; scale it down (e.g. `ffmpeg -i IN -vf scale=1280:-2 "
            "OUT`) or replace it")


def shorter_side_problem(processor: Any, width: int, height: int) -> str | None:
    """Why a ``width`` x ``height`` picture is refused before ``processor`` (an image or video processor) takes it
    (None when it is not): the processor scales its shorter side up to a fixed length, the longer side in proportion
    (CLIP's rule: LLaVA, Video-LLaVA; ``size: {shortest_edge: N}`` with no longest edge nor grid), to more pixels
    than an image may have. A 1 x 3,000 PNG of a few hundred bytes became 336 x 1,008,000 pixels in LLaVA's
    processor (3.5 GB, 23 s) before its centre crop kept 336 x 336 of them; 1 x 100,000 would take about 120 GB
    (LLaMA-Factory hands the processor the same picture). Qwen-style sizes, which name a longest edge too, bound the
    pixels themselves."""
    from PIL import Image

    size = getattr(processor, "size", None)
    size = size if isinstance(size, dict) else vars(size) if size is not None and hasattr(size, "__dict__") else {}
    edge = size.get("shortest_edge")
    if not isinstance(edge, int) or size.get("longest_edge") or size.get("height") or not Image.MAX_IMAGE_PIXELS \
            or getattr(processor, "do_resize", True) is False or min(width, height) <= 0 \
            or getattr(processor, "image_grid_pinpoints", None):  # LLaVA-NeXT scales into its grid first
        return None
    limit = 2 * Image.MAX_IMAGE_PIXELS
    short, long = min(width, height), max(width, height)
    scaled = edge * edge * long / short
    if scaled <= limit:
        return None
    return (f"is {width}x{height} pixels: this model's processor scales its shorter side to {edge}, which makes about "
            f"{scaled:,.0f} pixels, more than the {limit:,} an image may have; crop or pad it so that its longer side "
            f"is at most {limit // (edge * edge):,} times its shorter")


def read_video(source: Any, video_fps: float = 2.0, video_maxlen: int = 128, max_pixels: int = 256 * 256,
               min_pixels: int = 16 * 16) -> VideoClip:
    """Decode a video with PyAV and keep the frames sampled by :func:`sample_indices`.

    A video given as a list of its frames (image paths or embedded images: LLaMA-Factory's "processed video frames")
    takes every frame as it is, none sampled and ``video_maxlen`` not applied, at ``video_fps`` frames a second, as
    LLaMA-Factory takes it.

    Raises:
        MediaError: for a missing file, a file without a video stream, or one PyAV cannot decode.
    """
    if isinstance(source, list):
        frames = [load_image(frame, max_pixels, min_pixels) for frame in source]
        if not frames:
            raise MediaError("A video given as a list of frames has none; give its file or its frames' image files.")
        indices = list(range(len(frames)))
        return VideoClip(frames, indices, video_fps, len(frames) / video_fps, len(frames), [float(i) for i in indices],
                         video_fps)
    import av

    opened = _open(source)  # its own message for a data URL, a remote URL, a pipe or a device
    try:
        container = av.open(opened, "r")
    except FileNotFoundError:
        raise MediaError(f"Video file not found: {source}") from None
    except (av.error.FFmpegError, OSError, ValueError) as err:
        raise MediaError(f"Video {media_label(source)} cannot be read ({err}); replace the file.") from None
    with container:
        stream = next((s for s in container.streams if s.type == "video"), None)
        if stream is None:
            raise MediaError(f"{media_label(source)} has no video stream; give a video file.")
        too_large = frame_pixels_problem(stream.width or 0, stream.height or 0)
        if too_large:  # before anything is decoded
            raise MediaError(f"Video {media_label(source)} is too large to decode: {too_large}.")
        stream_duration = float(stream.duration * stream.time_base) if stream.duration else None
        duration = stream_duration if stream_duration else (
            float(container.duration) / 1e6 if container.duration else 0.0)
        original_fps = float(stream.average_rate or 0) or 24.0
        total = stream.frames or int(round(duration * original_fps))
        wanted = sample_indices(total, duration, video_fps, video_maxlen)
        chosen = set(wanted)
        frames, indices = [], []
        try:
            for index, frame in enumerate(container.decode(stream)):
                too_large = frame_pixels_problem(frame.width, frame.height)  # a size changed mid-stream
                if too_large:
                    raise MediaError(f"Video {media_label(source)} is too large to decode: {too_large}.")
                if index in chosen:
                    frames.append(resize_into(frame_image(frame), max_pixels, min_pixels))
                    indices.append(index)
                if index >= wanted[-1]:
                    break
        except (av.error.FFmpegError, OSError) as err:
            raise MediaError(f"Video {media_label(source)} cannot be decoded ({err}); replace the file.") from None
    if not frames:
        raise MediaError(f"Video {media_label(source)} has no decodable frame; replace the file.")
    scaled = [index / original_fps * video_fps for index in indices]
    sampled_fps = len(indices) / stream_duration if stream_duration else video_fps
    return VideoClip(frames, indices, original_fps, duration or len(frames) / video_fps, total, scaled, sampled_fps)


MAX_AUDIO_VALUES = 30 * 60 * 48_000 * 2
"""The most sample values (samples times channels) an audio file may decode to: 30 minutes of 48 kHz stereo, about
690 MB as float32. Silence compresses about 5,000-fold (a minute of 192 kHz stereo FLAC is 19 KB), so without a
bound a small file in a dataset row or a chat request decoded to tens of gigabytes and the process was killed."""


def read_audio(source: Any, sampling_rate: int = 16000) -> Any:
    """Mono float32 samples of an audio file (any format FFmpeg reads) at ``sampling_rate``, as LLaMA-Factory reads
    audio: float samples of every channel, their mean, then torchaudio's band-limited resampling (see
    :func:`resample`).

    Raises:
        MediaError: for a missing file, a file without an audio stream, or one PyAV cannot decode.
    """
    import numpy as np

    if isinstance(source, np.ndarray):  # samples already at ``sampling_rate`` (the stand-in clip of a multi-rank run)
        return source.astype(np.float32).reshape(-1)
    import av

    opened = _open(source)  # its own message for a data URL, a remote URL, a pipe or a device
    try:
        container = av.open(opened, "r")
    except FileNotFoundError:
        raise MediaError(f"Audio file not found: {source}") from None
    except (av.error.FFmpegError, OSError, ValueError) as err:
        raise MediaError(f"Audio {media_label(source)} cannot be read ({err}); replace the file.") from None
    with container:
        stream = next((s for s in container.streams if s.type == "audio"), None)
        if stream is None:
            raise MediaError(f"{media_label(source)} has no audio stream; give an audio file.")
        to_float = av.AudioResampler(format="fltp")  # planar float32; the stream's own channels and rate
        chunks, rate, values = [], 0, 0
        try:
            for frame in container.decode(stream):
                for out in to_float.resample(frame):
                    chunks.append(out.to_ndarray())
                    rate = out.sample_rate
                    values += chunks[-1].size
                if values > MAX_AUDIO_VALUES:
                    channels = chunks[-1].shape[0]
                    seconds = MAX_AUDIO_VALUES / channels / max(rate, 1)
                    raise MediaError(f"Audio {media_label(source)} is longer than {seconds:,.0f} seconds ({channels} "
                                     f"{'channel' if channels == 1 else 'channels'} at {rate:,} Hz), more than is read here; cut it into shorter "
                                     "clips.")
            chunks += [out.to_ndarray() for out in to_float.resample(None)]
        except (av.error.FFmpegError, OSError) as err:
            raise MediaError(f"Audio {media_label(source)} cannot be decoded ({err}); replace the file.") from None
    if not chunks or not rate:
        raise MediaError(f"Audio {media_label(source)} holds no samples; replace the file.")
    import torch

    wave = torch.from_numpy(np.concatenate(chunks, axis=1).astype(np.float32, copy=False))
    if wave.shape[0] > 1:
        wave = wave.mean(dim=0, keepdim=True)
    problem = resample_problem(int(rate), int(sampling_rate), wave.shape[-1])
    if problem:
        raise MediaError(f"Audio {media_label(source)} {problem}.")
    return resample(wave[:1], int(rate), int(sampling_rate)).squeeze(0).numpy()


MAX_RESAMPLE_FILTER_VALUES = 2**26
"""The largest filter bank :func:`resample` builds (its values; several float32 copies are held at once). A rate pair
without a large common divisor needs one of about ``new x old`` values: a second of 8,001 Hz audio brought to 16,000 Hz
took 2.4 GB and 6 s, one at 48,001 Hz would take about 16 GB (torchaudio, which LLaMA-Factory uses, builds the same
bank). Every rate in use (8, 11.025, 16, 22.05, 24, 32, 44.1, 48, 96, 192 kHz) to any other needs a few thousand."""


def resample_problem(orig_rate: int, new_rate: int, length: int, zero_crossings: int = 6,
                     rolloff: float = 0.99) -> str | None:
    """Why ``length`` samples at ``orig_rate`` are not brought to ``new_rate`` (None when they are): the filter bank
    :func:`resample` would build, or the samples it would make, are past their bounds."""
    if orig_rate == new_rate:
        return None
    common = math.gcd(orig_rate, new_rate)
    o, n = orig_rate // common, new_rate // common
    reach = math.ceil(zero_crossings * o / (min(o, n) * rolloff))
    fix = f"convert it to {new_rate:,} Hz first (e.g. `ffmpeg -i IN -ar {new_rate} OUT`)"
    if n * (2 * reach + o) > MAX_RESAMPLE_FILTER_VALUES:
        return (f"is sampled at {orig_rate:,} Hz, which shares no large divisor with the {new_rate:,} Hz it is read at: "
                f"resampling it needs a filter of {n * (2 * reach + o):,} values (about "
                f"{n * (2 * reach + o) * 4 / 2**30:,.1f} GB, held several times); {fix}")
    if length * n / o > MAX_AUDIO_VALUES:
        return (f"would become {math.ceil(length * n / o):,} samples at {new_rate:,} Hz, more than the "
                f"{MAX_AUDIO_VALUES:,} read here; cut it into shorter clips, or lower audio_sampling_rate")
    return None


def resample(wave: Any, orig_rate: int, new_rate: int, zero_crossings: int = 6, rolloff: float = 0.99) -> Any:
    """``wave`` (a float tensor, time last) at ``new_rate``: band-limited sinc interpolation with a Hann window,
    the method and defaults of ``torchaudio.functional.resample`` (which LLaMA-Factory uses), computed in the
    wave's dtype so that the samples are the same.

    With both rates divided by their gcd into ``o`` and ``n``, output sample ``j`` lies at ``j / n`` input periods of
    ``o`` samples; each of the ``n`` phases has its own filter, a sinc cut off at ``rolloff`` times the lower rate's
    Nyquist frequency and windowed to ``zero_crossings`` of its zeros on each side, and the phases' filters run as
    one strided convolution over the input.
    """
    import torch

    if orig_rate == new_rate:
        return wave
    common = math.gcd(int(orig_rate), int(new_rate))
    o, n = int(orig_rate) // common, int(new_rate) // common
    cutoff = min(o, n) * rolloff
    reach = math.ceil(zero_crossings * o / cutoff)  # input samples the filter reaches on either side
    dtype = wave.dtype
    taps = torch.arange(-reach, reach + o, dtype=dtype)[None, None] / o
    phase = torch.arange(0, -n, -1, dtype=dtype)[:, None, None] / n + taps
    phase *= cutoff
    phase = phase.clamp_(-zero_crossings, zero_crossings)
    window = torch.cos(phase * math.pi / zero_crossings / 2) ** 2
    phase *= math.pi
    filters = torch.where(phase == 0, torch.tensor(1.0).to(phase), phase.sin() / phase)
    filters *= window * (cutoff / o)
    shape = wave.shape
    flat = wave.reshape(-1, shape[-1])
    length = flat.shape[-1]
    padded = torch.nn.functional.pad(flat, (reach, reach + o))
    out = torch.nn.functional.conv1d(padded[:, None], filters, stride=o).transpose(1, 2).reshape(flat.shape[0], -1)
    out = out[..., :int(torch.ceil(torch.as_tensor(n * length / o)))]
    return out.reshape(*shape[:-1], out.shape[-1])


NOT_REGULAR = "is not a regular file (a pipe, device or socket)"
DEAD_LINK = "is a link that leads to no file (its target is gone, or the links loop)"


def absent(path: str | Path) -> str:
    """Why a path that does not exist as a file is not one: missing, or a link that leads nowhere."""
    return DEAD_LINK if Path(path).is_symlink() else "is missing"


def _jpeg_ends(fp: Any) -> bool:
    """Whether a JPEG file ends with its end-of-image marker (a file cut short does not), read from its last bytes;
    one that does not (cut short, or with bytes after the marker) is decoded to tell."""
    fp.seek(0, 2)
    fp.seek(max(0, fp.tell() - 2))
    return fp.read(2) == b"\xff\xd9"


def probe(kind: str, path: str) -> str | None:
    """Why a local media file cannot be used (missing, unreadable), or None when it opens."""
    if is_remote(path):
        return "is a remote URL and downloads are off; save the file and give its path"
    embedded = path.startswith("data:")  # an image embedded in the row (engine.data.embedded)
    if embedded:
        try:
            path = _open(path)
        except MediaError as err:
            return f"cannot be read ({err})"
    elif Path(path).is_dir():
        return "is a folder, not a file"
    elif not Path(path).is_file():
        return NOT_REGULAR if Path(path).exists() else absent(path)
    try:
        if kind == "images":
            from PIL import Image

            with Image.open(path) as image:
                if image.format == "PNG":
                    image.verify()  # every chunk and its checksum read, nothing decompressed
                elif image.format != "JPEG" or not _jpeg_ends(image.fp):
                    # Pillow verifies PNG alone: a JPEG (GIF, WebP, ...) cut short passed and failed in training,
                    # after the model had loaded. A JPEG decodes at 1/8 scale, every byte still read
                    image.draft("RGB", (1, 1))
                    image.load()
        else:
            import av

            with av.open(path, "r") as container:
                wanted = "video" if kind == "videos" else "audio"
                streams = [s for s in container.streams if s.type == wanted]
                if not streams:
                    return f"has no {wanted} stream"
                too_large = frame_pixels_problem(streams[0].width or 0, streams[0].height or 0) if kind == "videos" \
                    else None
                if too_large:  # before the first frame is decoded
                    return f"is too large to decode: {too_large}"
                # the first frame decodes: PyAV opens random bytes as an `image2` "video" stream, and a damaged
                # file can have a valid header; training would fail on it only after the model has loaded
                if next(container.decode(streams[0]), None) is None:
                    return f"has no {wanted} frame that decodes"
                if _ends_early(container, streams[0]):
                    return "is cut short (truncated)"
    except Exception as err:  # PIL and PyAV raise many types for damaged files
        return "is cut short (truncated)" if "truncated" in str(err).lower() else f"cannot be read ({type(err).__name__})"
    return None


MAX_TAIL_PACKETS = 10_000
"""Most packets :func:`_ends_early` reads after the last keyframe (a keyframe every few seconds is usual)."""
INDEXED_FORMATS = ("mov", "mp4")
"""Containers whose index lists every packet (MP4/MOV), so that none after the last keyframe means a file cut short."""


def _ends_early(container: Any, stream: Any) -> bool:
    """Whether a media file that opened and decoded its first frame ends before its index or header says: a
    streamable MP4 (faststart, index first, or fragmented) cut short passed the probe and failed in training,
    after the model had loaded. Reads from the last keyframe to the end (a seek, not the whole file): a packet
    cut off is flagged corrupt, and in an MP4 a last keyframe past the file's end gives no packet at all."""
    from itertools import islice

    if not stream.duration:  # no stated length to seek to (Matroska often): nothing cheap to compare
        return False
    try:
        container.seek((stream.start_time or 0) + stream.duration, stream=stream, backward=True)
    except Exception:  # a container that cannot seek: the first frame decoded, which is all that can be told cheaply
        return False
    try:
        packets = [p for p in islice(container.demux(stream), MAX_TAIL_PACKETS) if p.size]
    except Exception:  # the demuxer met the end inside a packet
        return True
    if any(p.is_corrupt for p in packets):
        return True
    return not packets and any(name in INDEXED_FORMATS for name in container.format.name.split(","))
