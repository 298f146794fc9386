"""The keys of a dataset_info.json entry, and of its ``columns`` and ``tags``. A misspelt one (``formating``,
``columns.promt``) is ignored, as LLaMA-Factory ignores it, so its value silently changes nothing; a warning names
the key it was probably meant to be."""

from __future__ import annotations

import difflib
import logging
from typing import Any

logger = logging.getLogger("engine.data.registry")

ENTRY_KEYS = ("file_name", "hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name", "formatting",
              "ranking", "subset", "split", "folder", "revision", "num_samples", "columns", "tags")
"""What LLaMA-Factory 0.9.5 reads from an entry (its ``DatasetAttr``), ``revision`` for hub datasets included."""
COLUMN_KEYS = ("prompt", "query", "response", "history", "messages", "system", "tools", "images", "videos", "audios",
               "chosen", "rejected", "kto_tag")
"""What LLaMA-Factory 0.9.5 reads from an entry's ``columns`` (``DatasetAttr.join``, data/parser.py:80-84)."""
TAG_KEYS = ("role_tag", "content_tag", "user_tag", "assistant_tag", "observation_tag", "function_tag", "system_tag")
"""What it reads from an entry's ``tags`` (data/parser.py:86-90); any other key of either is never read there."""
INNER_KEYS = {"columns": COLUMN_KEYS, "tags": TAG_KEYS}


def misspelt_keys(entry: dict[str, Any]) -> dict[str, str]:
    """{key in the entry: the entry key it is close to}, for keys that are not entry keys (others, such as notes a
    user keeps there, are left alone)."""
    near = {}
    for key in entry:
        if isinstance(key, str) and key not in ENTRY_KEYS:
            match = difflib.get_close_matches(key, ENTRY_KEYS, n=1, cutoff=0.75)
            if match:
                near[key] = match[0]
    return near


def known_inner(entry: dict[str, Any], section: str) -> dict[str, Any]:
    """The entry's ``columns`` or ``tags`` without the keys LLaMA-Factory does not read ({} when there are none), nor
    those set to null: LLaMA-Factory reads ``{"system": null}`` as the key left out (``obj.get(key)`` is None either
    way, data/parser.py:70)."""
    value = entry.get(section)
    if not isinstance(value, dict):
        return {}
    return {key: name for key, name in value.items() if key in INNER_KEYS[section] and name is not None}


def unknown_inner_keys(entry: dict[str, Any]) -> list[str]:
    """One line per key of the entry's ``columns``/``tags`` that LLaMA-Factory does not read, naming the nearest
    known key (or the section it belongs to)."""
    lines = []
    for section, known in INNER_KEYS.items():
        value = entry.get(section)
        for key in value if isinstance(value, dict) else ():
            if key in known:
                continue
            other = next(name for name in INNER_KEYS if name != section)
            if key in INNER_KEYS[other]:
                hint = f"`{key}` belongs under `{other}`"
            else:
                near = difflib.get_close_matches(str(key), known, n=1, cutoff=0.0)
                hint = f"the nearest {section} key is `{near[0]}`" if near else ""
            lines.append(f"`{section}.{key}` is not a {section} key, so it is ignored (as in LLaMA-Factory); {hint}")
    return lines


_WARNED: set[tuple[str, str]] = set()
"""(dataset, key) pairs warned about in this process (the pre-flight check and the loader both read the entry)."""


def warn_misspelt_keys(name: str, entry: dict[str, Any], info_file: str) -> None:
    for key, meant in misspelt_keys(entry).items():
        if (name, key) in _WARNED:
            continue
        _WARNED.add((name, key))
        logger.warning("Dataset %r: `%s` is not a %s key, so it is ignored (as in LLaMA-Factory); did you mean "
                       "`%s`?", name, key, info_file, meant)
    for line in unknown_inner_keys(entry):
        if (name, line) in _WARNED:
            continue
        _WARNED.add((name, line))
        logger.warning("Dataset %r in %s: %s.", name, info_file, line)
