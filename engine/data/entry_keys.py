"""The keys of a dataset_info.json entry. A misspelt one (``formating``) is ignored, as LLaMA-Factory ignores it, so
its value silently changes nothing; a warning names the key it was probably meant to be."""

from __future__ import annotations

import difflib
import logging
from typing import Any

logger = logging.getLogger("engine.data.registry")

ENTRY_KEYS = ("file_name", "hf_hub_url", "ms_hub_url", "om_hub_url", "script_url", "cloud_file_name", "formatting",
              "ranking", "subset", "split", "folder", "revision", "num_samples", "columns", "tags")
"""What LLaMA-Factory 0.9.5 reads from an entry (its ``DatasetAttr``), ``revision`` for hub datasets included."""


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


_WARNED: set[tuple[str, str]] = set()
"""(dataset, key) pairs warned about in this process (the pre-flight check and the loader both read the entry)."""


def warn_misspelt_keys(name: str, entry: dict[str, Any], info_file: str) -> None:
    for key, meant in misspelt_keys(entry).items():
        if (name, key) in _WARNED:
            continue
        _WARNED.add((name, key))
        logger.warning("Dataset %r: `%s` is not a %s key, so it is ignored (as in LLaMA-Factory); did you mean "
                       "`%s`?", name, key, info_file, meant)
