"""What the board's dataset preview shows for a row with media: thumbnails, video frame counts, soft-token counts.

Soft tokens are counted through the model family's own plugin (:meth:`MediaPlugin.process`, the processor's
``replace_*_token`` rules), so the numbers are the ones training uses. Thumbnails are small PNG data URLs made
here, so the page never gets (or asks for) a path on the server.
"""

from __future__ import annotations

import base64
import io
import logging
from pathlib import Path
from typing import Any

from engine.data.embedded import media_name
from engine.multimodal.errors import MediaError

logger = logging.getLogger(__name__)

THUMB_SIZE = 96
KIND_TOKEN_ATTR = {"images": "image_token_id", "videos": "video_token_id", "audios": "audio_token_id"}


def thumbnail(source: Any, size: int = THUMB_SIZE) -> str:
    """A PNG data URL of the image scaled to fit ``size`` x ``size`` (MediaError when it cannot be read)."""
    from PIL import Image, UnidentifiedImageError

    from engine.multimodal.media import _open

    try:
        with Image.open(_open(source)) as image:
            image = image.convert("RGB")
            image.thumbnail((size, size))
            buffer = io.BytesIO()
            image.save(buffer, format="PNG")
    except (OSError, UnidentifiedImageError) as err:
        raise MediaError(f"Image {media_name(source)} cannot be read ({err}).") from None
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode("ascii")


def _frame_count(plugin: Any, source: Any, options: Any) -> int:
    from engine.multimodal.media import read_video

    if plugin is not None:
        return len(plugin.read_videos([source], options)[0].frames)
    return len(read_video(source, options.video_fps, options.video_maxlen, options.video_max_pixels,
                          options.video_min_pixels).frames)


def soft_token_counts(context: Any, example: dict[str, Any]) -> dict[str, int]:
    """Soft tokens per media kind the model sees for this row (``{"images": 4, ...}``), through its plugin.

    Raises:
        MediaError: when the row's media cannot be used with this model (the plugin's message).
    """
    messages, _ = context.plugin.process(context.processor, example["messages"], example.get("images") or [],
                                         example.get("videos") or [], example.get("audios") or [], context.options)
    tokenizer = getattr(context.processor, "tokenizer", None)
    text = "".join(str(m.get("content") or "") for m in messages)
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    counts = {}
    for kind, attr in KIND_TOKEN_ATTR.items():
        token = getattr(context.processor, attr, None)
        if example.get(kind) and isinstance(token, int):
            counts[kind] = sum(1 for i in ids if i == token)
    return counts


def media_preview(example: dict[str, Any], context: Any = None, options: Any = None) -> dict[str, Any] | None:
    """The media part of one previewed row, or None for a row without media.

    Returns:
        ``images``: ``[{"name", "thumb"}]`` (``thumb`` a data URL, or ``error``); ``videos``: ``[{"name",
        "frames"}]`` (frames the model gets at ``video_fps``/``video_maxlen``, or ``error``); ``audios``:
        ``[{"name"}]``; ``soft_tokens``: ``{kind: count}`` for a vision-language model, None for a text-only one;
        ``error``: why the model cannot take this row (the plugin's message), if it cannot.
    """
    from engine.multimodal.processor import MediaOptions

    if not any(example.get(kind) for kind in KIND_TOKEN_ATTR):
        return None
    from engine.multimodal import UnservedMedia

    unserved = context.reason if isinstance(context, UnservedMedia) else None  # previewed without soft tokens
    context = None if unserved else context
    options = options or (context.options if context is not None else MediaOptions())
    out: dict[str, Any] = {"images": [], "videos": [], "audios": [], "soft_tokens": None}
    for source in example.get("images") or []:
        item: dict[str, Any] = {"name": media_name(source)}
        try:
            item["thumb"] = thumbnail(source)
        except MediaError as err:
            item["error"] = str(err)
        out["images"].append(item)
    for source in example.get("videos") or []:
        # a video given as its frames' images is named by its first and last frames
        item = {"name": (f"{media_name(source[0])} … {media_name(source[-1])}" if isinstance(source, list) and source
                         else Path(str(source)).name)}
        try:
            item["frames"] = _frame_count(context.plugin if context is not None else None, source, options)
        except (MediaError, ImportError) as err:
            item["error"] = str(err)
        out["videos"].append(item)
    out["audios"] = [{"name": Path(str(source)).name} for source in example.get("audios") or []]
    if context is not None:
        try:
            out["soft_tokens"] = soft_token_counts(context, example)
        except MediaError as err:
            out["error"] = str(err)
    if unserved:
        out["error"] = unserved
    return out
