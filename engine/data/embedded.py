"""Images embedded in dataset rows, which LLaMA-Factory reads as it reads image files: raw bytes, ``{"bytes": ...,
"path": ...}`` dicts (how ``datasets``' Image feature stores them, in parquet and Arrow files), PIL images (what
``datasets`` decodes that feature to, e.g. for a hub dataset) and base64 data URLs. Each is kept as a data URL: text,
so a row's images stay one column of strings whatever their source, and the media loader opens it as it opens a file.
"""

from __future__ import annotations

import base64
import io
from typing import Any

PNG_MODES = frozenset({"1", "L", "LA", "I", "I;16", "P", "RGB", "RGBA"})
"""PIL modes PNG stores as they are (a decoded image in another mode, CMYK say, is kept as TIFF: lossless too)."""


def is_data_url(item: Any) -> bool:
    return isinstance(item, str) and item.startswith("data:")


def embedded_image(item: Any) -> str | None:
    """The data URL of an image embedded in a row, or None when ``item`` is a path (or a dict naming only one)."""
    if is_data_url(item):
        return item
    if isinstance(item, (bytes, bytearray)):
        data = bytes(item)
    elif isinstance(item, dict):
        data = item.get("bytes")
        if not isinstance(data, (bytes, bytearray)):
            return None
    elif hasattr(item, "save") and hasattr(item, "mode") and hasattr(item, "size"):  # a PIL image
        buffer = io.BytesIO()
        item.save(buffer, format="PNG" if item.mode in PNG_MODES else "TIFF")
        data = buffer.getvalue()
    else:
        return None
    return "data:image;base64," + base64.b64encode(data).decode("ascii")


def media_name(item: Any) -> str:
    """A short name for a media entry in messages and previews (a data URL's text is not one)."""
    from pathlib import Path

    return "(embedded image)" if is_data_url(item) else Path(str(item)).name
