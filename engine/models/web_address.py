"""A web address typed where a model belongs: said plainly, with the hub id when the address shows one.

``model_name_or_path`` takes a hub id (``owner/name``), a local folder or ``demo``; a URL is none of these (as a path
it names no folder, and it is no hub id), so the message says what to give instead.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.\-]*://")
_HUB_HOSTS = ("huggingface.co", "hf.co", "modelscope.cn", "modelers.cn", "hf-mirror.com")
_NOT_REPOS = ("datasets", "spaces", "docs", "blog", "papers", "organizations")


def web_address_problem(name: str, key: str = "model_name_or_path") -> str | None:
    """What is wrong when ``name`` is a web address (``https://...``), or None when it is not one."""
    text = str(name or "").strip()
    if not _SCHEME.match(text):
        return None
    hint = ""
    try:
        parsed = urlsplit(text)
        host = (parsed.hostname or "").removeprefix("www.")
    except ValueError:
        host, parsed = "", None
    if parsed is not None and host in _HUB_HOSTS:
        parts = [part for part in parsed.path.split("/") if part]
        if parts and parts[0] == "models":  # modelscope.cn/models/owner/name
            parts = parts[1:]
        if len(parts) >= 2 and parts[0] not in _NOT_REPOS:
            hint = f"; this address's hub id is `{parts[0]}/{parts[1]}`"
    example = "" if hint else ", such as `Qwen/Qwen3-0.6B`"
    return (f"`{key}: {text}` is a web address, not a model. Give a hub id (owner/name{example}{hint}) or a local "
            "model folder (or `demo`).")
