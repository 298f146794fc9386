"""Chatting with media: placeholders, processed inputs for ``generate``, and media parts of OpenAI requests.

``media`` is ``{"images": [...], "videos": [...], "audios": [...]}`` of file paths (the CLI's ``--image``) or
bytes (decoded data URLs from the API). A conversation whose text has fewer placeholders than files gets the
missing ones in front of its last user message, as LLaMA-Factory's chat does.
"""

from __future__ import annotations

from typing import Any

from engine.multimodal.errors import MediaError
from engine.multimodal.plugins import PLACEHOLDERS

KINDS = tuple(PLACEHOLDERS)


def with_placeholders(messages: list[dict[str, Any]], media: dict[str, list[Any]]) -> list[dict[str, Any]]:
    """Messages where every media file has its placeholder (missing ones prepended to the last user turn, images
    first, then videos, then audio: ``<video><audio>`` as Qwen-Omni's ``use_audio_in_video`` pairs them)."""
    messages = [dict(m) for m in messages]
    users = [i for i, m in enumerate(messages) if m["role"] == "user"]
    for kind in reversed(KINDS):
        tag = PLACEHOLDERS[kind]
        missing = len(media.get(kind) or []) - sum(str(m.get("content") or "").count(tag) for m in messages)
        if missing > 0:
            if not users:
                raise MediaError("Media need a user message to go with.")
            last = messages[users[-1]]
            last["content"] = tag * missing + str(last.get("content") or "")
    return messages


def refuse_before_loading(cfg: Any, media: dict[str, list[Any]]) -> None:
    """What a chat with these media files would refuse once the model is loaded, said before it loads: a file that
    is missing, a folder, a pipe or device (opening a pipe waited for a writer forever), one that does not decode
    (a JPEG cut short, a video without a video stream), and media for a text-only model (read from its config.json
    alone).

    Raises:
        MediaError: naming the file or the model, and the fix.
    """
    from pathlib import Path

    from engine.multimodal.media import probe

    names = {"images": "Image", "videos": "Video", "audios": "Audio"}
    for kind, files in media.items():
        for source in files or []:
            if not isinstance(source, (str, Path)):
                continue  # bytes from the API are read as they come
            path = Path(source).expanduser()
            if not path.exists():
                raise MediaError(f"{names.get(kind, 'Media')} file not found: {source}")
            if path.is_dir():
                raise MediaError(f"{names.get(kind, 'Media')} {source} is a folder; give the file inside it.")
    from engine.models.loader import resolve_model_path
    from engine.models.registry import read_local_config
    from engine.multimodal.checks import model_media
    from engine.multimodal.processor import media_config

    path = resolve_model_path(cfg.model.model_name_or_path, cfg.model.cache_dir, cfg.model.model_revision)
    config = read_local_config(path)
    if config is not None and not any(media_config(config).get(key) for key in ("vision_config", "audio_config")):
        raise MediaError(text_only_message(cfg))
    takes = model_media(cfg)  # None when not known without loading: every file is probed
    for kind, files in media.items():
        if takes is not None and kind not in takes:
            continue  # the loaded model refuses the kind, in its own words
        for source in files or []:
            reason = probe(kind, str(Path(source).expanduser())) if isinstance(source, (str, Path)) else None
            if reason:
                raise MediaError(f"{names.get(kind, 'Media')} {source} {reason}; replace the file.")


def text_only_message(cfg: Any) -> str:
    return (f"`{cfg.model.model_name_or_path}` is a text-only model; it cannot take images, video or audio. Choose a "
            "vision-language model (e.g. `demo-vlm`).")


def media_prompt(chat_model: Any, messages: list[dict[str, Any]], media: dict[str, list[Any]], system: Any,
                 tools: Any) -> tuple[list[int], dict[str, Any]]:
    """(prompt ids, extra ``generate`` inputs) for a conversation with media.

    Raises:
        MediaError: when the model takes no media (or not this kind), or a file cannot be read.
    """
    import torch

    from engine.multimodal.collator import batch_media, extra_typed, to_tensors

    context = getattr(chat_model, "media", None)
    if context is None:
        raise MediaError(text_only_message(chat_model.cfg))
    from engine.multimodal import refuse_unserved

    refuse_unserved(context)
    messages = with_placeholders(messages, media)
    expanded, arrays = context.plugin.process(context.processor, messages, list(media.get("images") or []),
                                              list(media.get("videos") or []), list(media.get("audios") or []),
                                              context.options)
    prefix = context.plugin.prefix_ids(context.processor, len(media.get("images") or []))  # PaliGemma's image tokens
    prompt_ids = prefix + chat_model.encode(expanded, system, tools)
    extra: dict[str, Any] = {}
    if arrays:
        dtype = next(chat_model.model.parameters()).dtype
        cross = context.plugin.cross_attention(context.processor)  # Llama 3.2 Vision: the prompt's cross-attention mask
        for key, value in to_tensors(batch_media([arrays], cross, [prompt_ids], len(prompt_ids))).items():
            value = value.to(chat_model.device)
            extra[key] = value.to(dtype) if value.is_floating_point() else value
    extra.update(context.plugin.batch_flags(context.options, context.processor))
    if context.plugin.type_ids_key:
        ids = context.plugin.type_ids(context.processor, prompt_ids)
        extra[context.plugin.type_ids_key] = torch.tensor([ids], dtype=torch.long, device=chat_model.device)
    tables = context.plugin.extra_type_ids(context.processor)  # ERNIE-4.5-VL's moe_mm_token_type_ids
    extra.update(extra_typed(tables, torch.tensor([prompt_ids], dtype=torch.long, device=chat_model.device)))
    return prompt_ids, extra


def openai_part(part: dict[str, Any], index: int, media: dict[str, list[Any]]) -> str:
    """The placeholder for one media part of an OpenAI message (``image_url``, ``input_audio``), its bytes
    added to ``media``. Only base64 data URLs are taken: a client never names a path this server reads, and
    remote URLs are refused (downloads are off).

    Raises:
        MediaError: for a remote URL, a local path, or a damaged payload.
    """
    import base64
    import binascii

    from engine.multimodal.media import decode_data_url, is_remote

    kind = part.get("type")
    if kind in ("image_url", "video_url"):
        value = part.get(kind)
        url = value.get("url") if isinstance(value, dict) else value
        if not isinstance(url, str) or not url:
            raise MediaError(f"messages[{index}]: `{kind}` needs a `url`.")
        if is_remote(url):
            raise MediaError(f"messages[{index}]: remote URLs are not fetched (downloads are off); send the file as a "
                             "base64 data URL (`data:image/png;base64,...`).")
        media.setdefault("images" if kind == "image_url" else "videos", []).append(decode_data_url(url)[1])
        return PLACEHOLDERS["images" if kind == "image_url" else "videos"]
    if kind == "input_audio":
        value = part.get("input_audio") or {}
        data = value.get("data") if isinstance(value, dict) else None
        if not isinstance(data, str) or not data:
            raise MediaError(f"messages[{index}]: `input_audio` needs base64 `data`.")
        try:
            payload = base64.b64decode(data.split(",", 1)[1] if data.startswith("data:") else data, validate=True)
        except (binascii.Error, ValueError):
            raise MediaError(f"messages[{index}]: `input_audio.data` is not valid base64.") from None
        media.setdefault("audios", []).append(payload)
        return PLACEHOLDERS["audios"]
    raise MediaError(f"messages[{index}]: content part of type {kind!r} is not supported; send text, image_url or "
                     "input_audio.")
