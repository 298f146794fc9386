"""The media files a dataset row names (images, videos, audios), as paths the loader can open.

Relative paths resolve against ``media_dir`` (default ``dataset_dir``) as LLaMA-Factory resolves them; embedded images
(bytes, PIL images, data URLs) are read as images. A row whose media cannot be used raises
:class:`engine.data.errors.RowError`, which the converter reports with the row.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.data.embedded import embedded_image, is_data_url
from engine.data.errors import RowError
from engine.data.registry import DatasetSpec


def media_path(item: str, spec: DatasetSpec) -> Path:
    """Where a media entry of a row points: relative paths resolve against ``media_dir`` (default ``dataset_dir``);
    as in LLaMA-Factory, a relative path found there wins, else the path as given (relative to the current folder)
    when that file exists."""
    path = Path(item).expanduser()
    if path.is_absolute():
        return path
    base = spec.media_dir if spec.media_dir is not None else spec.dataset_dir
    resolved = Path(base) / path
    if not resolved.exists() and path.exists():
        return path.absolute()
    return resolved


def row_media(row: dict[str, Any], column: str | None, spec: DatasetSpec, kind: str) -> list[Any]:
    """Absolute paths of the row's media files of one kind (see :func:`media_path`); a video given as the list of its
    frames (image files or embedded images, LLaMA-Factory's "processed video frames") is kept as that list."""
    value = row.get(column) if column else None
    if value is None or value == "":
        return []
    items = value if isinstance(value, list) else [value]
    paths: list[Any] = []
    for item in items:
        if kind == "images" and (embedded := embedded_image(item)) is not None:  # bytes, PIL, data URL: as LF
            paths.append(embedded)
        elif kind == "videos" and isinstance(item, list):
            if not item:
                raise RowError("a video is an empty list of frames; give its file or its frames' image files")
            paths.append([embedded_image(frame) or _file(frame, spec, "images") for frame in item])
        else:
            paths.append(_file(item, spec, kind))
    return paths


def _file(item: Any, spec: DatasetSpec, kind: str) -> str:
    """The absolute path of one media entry of ``kind`` (a path, or a dict naming one)."""
    if isinstance(item, dict):
        item = item.get("path") or item.get("url")
    if not isinstance(item, str) or not item:
        raise RowError(f"{kind} must be file paths (embedded {kind} are read for images only; save the files and give "
                       "their paths)")
    if is_data_url(item):
        raise RowError(f"{kind} entry is a data URL; data URLs are read for images only: save the file and give its "
                       "path")
    if "://" in item:
        raise RowError(f"{kind} entry {item!r} is a URL; download the file and use its path")
    path = media_path(item, spec)
    if not path.exists():
        where = "media_dir" if spec.media_dir is not None else "dataset_dir (or set media_dir)"
        raise RowError(f"{kind[:-1]} file not found: {path} (relative paths are resolved against {where})")
    return str(path)
