"""Media in the Chat tab: uploads checked, turned into OpenAI content parts (base64 data URLs), and shown back.

The chat worker never reads a path named by the page: the board reads the uploaded file (only from gradio's upload
folder, only up to the board's upload cap) and sends its bytes as a data URL. A model that takes no images (or no
video, no audio) gets no such upload: the page says which media the loaded model takes.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any

KINDS = ("image", "video", "audio")
PART_TYPES = {"image": "image_url", "video": "video_url"}
DISPLAY_KEY = "lf_path"  # where a part keeps its uploaded file for the chatbot; stripped before it is sent


class UploadRefused(ValueError):
    """An upload the chat cannot take; ``key`` and ``params`` make the translated message."""

    def __init__(self, key: str, **params: Any):
        super().__init__(key)
        self.key, self.params = key, params


def upload_kind(path: str | Path) -> str | None:
    """``image``, ``video`` or ``audio`` by the file's type, or None for anything else."""
    kind = (mimetypes.guess_type(str(path))[0] or "").split("/")[0]
    return kind if kind in KINDS else None


def model_media(board: Any, run_id: str) -> tuple[str, ...]:
    """The media the model of a chat run takes (read from the run's config.yaml), () for a text-only model."""
    from app.catalog import EngineMissing, _engine_attr
    from app.history import RunConfigError, load_run_config

    try:  # read as History reads a run's config: bounded in size, a regular file only
        config = load_run_config(board.jobs.runs_dir / run_id / "config.yaml")
        media = _engine_attr(("engine.models.registry",), "model_media")
        return tuple(media(config.get("model_name_or_path")) or ())
    except (RunConfigError, EngineMissing, AttributeError):
        return ()
    except Exception:  # a broken model folder must not break sending text
        return ()


def checked_uploads(files: list[Any] | None, takes: tuple[str, ...], limit_mb: int,
                    upload_root: str | Path) -> list[tuple[str, Path]]:
    """(kind, path) of each upload, after the checks.

    Raises:
        UploadRefused: a file outside gradio's upload folder (a client naming a server path), one that is
            missing, above the upload cap, of an unknown type, or of a kind the loaded model does not take.
    """
    root = Path(upload_root).resolve()
    out = []
    for item in files or []:
        raw = item.get("path") if isinstance(item, dict) else getattr(item, "path", item)
        path = Path(str(raw)).resolve()
        if not path.is_relative_to(root) or not path.is_file():
            raise UploadRefused("chat_upload_not_allowed", name=Path(str(raw)).name)
        size_mb = path.stat().st_size / 1024 / 1024
        if size_mb > limit_mb:
            raise UploadRefused("chat_upload_too_large", name=path.name, size=round(size_mb, 1), limit=limit_mb)
        kind = upload_kind(path)
        if kind is None:
            raise UploadRefused("chat_upload_unknown_type", name=path.name)
        if kind not in takes:
            raise UploadRefused("chat_media_refused", kind=kind, takes=tuple(takes))
        out.append((kind, path))
    return out


def _data_url(path: Path) -> str:
    mime = mimetypes.guess_type(str(path))[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def media_part(kind: str, path: Path) -> dict[str, Any]:
    """One upload as an OpenAI content part (its bytes inline), with the file the chatbot shows it from."""
    if kind == "audio":
        return {"type": "input_audio", DISPLAY_KEY: str(path),
                "input_audio": {"data": base64.b64encode(path.read_bytes()).decode("ascii"),
                                "format": path.suffix.lstrip(".").lower() or "wav"}}
    return {"type": PART_TYPES[kind], DISPLAY_KEY: str(path), PART_TYPES[kind]: {"url": _data_url(path)}}


def part_kind(part: dict[str, Any]) -> str | None:
    """``image``, ``video`` or ``audio`` of a media content part (None for text or anything else)."""
    if part.get("type") == "input_audio":
        return "audio"
    return next((kind for kind, name in PART_TYPES.items() if part.get("type") == name), None)


def user_content(text: str, uploads: list[tuple[str, Path]]) -> str | list[dict[str, Any]]:
    """A user message's content: the text alone, or OpenAI parts (media first, as data URLs, then the text)."""
    if not uploads:
        return text
    parts = [media_part(kind, path) for kind, path in uploads]
    if text.strip():
        parts.append({"type": "text", "text": text})
    return parts


def for_server(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages as sent to a chat worker: the board's display paths taken out of the content parts."""
    out = []
    for message in messages:
        content = message.get("content")
        if isinstance(content, list):
            content = [{k: v for k, v in part.items() if k != DISPLAY_KEY} for part in content]
            message = {**message, "content": content}
        out.append(message)
    return out


def shown(message: dict[str, Any]) -> list[dict[str, Any]]:
    """A user message with media as chatbot messages: each file (shown by the chatbot), then the text."""
    content = message.get("content")
    if not isinstance(content, list):
        return [{"role": message["role"], "content": content or ""}]
    out = []
    for part in content:
        if part.get("type") == "text":
            out.append({"role": message["role"], "content": part.get("text", "")})
        elif part.get(DISPLAY_KEY):
            out.append({"role": message["role"], "content": {"path": part[DISPLAY_KEY]}})
    return out
