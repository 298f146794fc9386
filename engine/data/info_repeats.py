"""Keys written twice in one object of a JSON file (dataset_info.json): the file is read as ``json`` reads it (the
last one wins, as LLaMA-Factory reads it), and each repeated key is named, with the entry it is in, in one warning.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from engine.data.errors import DatasetError
from engine.json_text import loads

logger = logging.getLogger("engine.data.registry")  # the warning keeps the logger name it always had


def _noting_repeats(found: list[tuple[str, dict]]):
    """A ``json`` object hook that builds each object as ``json`` does (the last of a repeated key wins, as
    LLaMA-Factory reads the file) and notes each repeated key with the object it is in."""
    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        built = dict(pairs)
        if len(built) == len(pairs):  # no key repeats (nearly always): nothing more to look at
            return built
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                found.append((key, built))
            seen.add(key)
        return built

    return hook


def _holds(value: Any, target: dict) -> bool:
    """Whether ``target`` is ``value`` or nested in it."""
    if value is target:
        return True
    if isinstance(value, dict):
        return any(_holds(item, target) for item in value.values())
    if isinstance(value, list):
        return any(_holds(item, target) for item in value)
    return False


def _repeat_labels(info: Any, found: list[tuple[str, dict]]) -> list[str]:
    """Each repeated key as the message names it: a dataset name alone, a key inside an entry with that entry's
    name (```prompt` in `mine```)."""
    labels: list[str] = []
    for key, where in found:
        if where is info:
            label = f"`{key}`"
        else:
            owner = next((name for name, entry in info.items() if _holds(entry, where)), None) \
                if isinstance(info, dict) else None
            label = f"`{key}` in `{owner}`" if owner is not None else f"`{key}`"
        if label not in labels:
            labels.append(label)
    return labels


MAX_INFO_BYTES = 32 << 20
"""The largest dataset_info.json read (bytes): LLaMA-Factory's own, with every dataset it knows, is about 40 KB. A
larger one (a sparse 1 GB file took 2.3 GB and 24 s, in the board's own process when it checks a config) is refused."""


class InfoTooLarge(DatasetError):
    """A dataset_info.json past :data:`MAX_INFO_BYTES`; the message names the file, its size and the fix."""


def parse_noting_repeats(path: Path) -> tuple[Any, list[str]]:
    """A JSON file's value, parsed as ``json`` parses it, and its repeated keys labelled as :func:`_repeat_labels`
    does. The file is read only when it is a regular file of at most :data:`MAX_INFO_BYTES`. Raises what reading and
    ``json.loads`` raise (a number past Python's digit limit as a JSONDecodeError), and InfoTooLarge."""
    from engine.runs import read_regular

    raw = read_regular(path, max_bytes=MAX_INFO_BYTES + 1)
    if len(raw) > MAX_INFO_BYTES:
        raise InfoTooLarge(f"{path} is {path.stat().st_size:,} bytes, more than any dataset_info.json holds (at most "
                           f"{MAX_INFO_BYTES:,} are read; LLaMA-Factory's own is about 40 KB). Is this the right "
                           "file? Keep the entries there and the rows in the data files it names.")
    found: list[tuple[str, dict]] = []
    info = loads(raw.decode("utf-8-sig"), object_pairs_hook=_noting_repeats(found))
    return info, _repeat_labels(info, found)


def repeated_keys(path: Path) -> list[str]:
    """The labelled repeated keys of a readable JSON file ([] when none, or unreadable)."""
    try:
        return parse_noting_repeats(path)[1]
    except (OSError, ValueError, RecursionError):
        return []


_WARNED: set[tuple[str, float, tuple[str, ...]]] = set()


def warn_repeats(path: Path, repeated: list[str]) -> None:
    """Warn once per version of the file about keys written twice in one object."""
    try:
        stamp = path.stat().st_mtime
    except OSError:
        stamp = 0.0
    mark = (str(path), stamp, tuple(repeated))
    if mark in _WARNED:
        return
    _WARNED.add(mark)
    logger.warning("%s", repeats_message(path, repeated))


def key_names(repeated: list[str]) -> str:
    return ", ".join(repeated[:5]) + (" and more" if len(repeated) > 5 else "")


def repeats_message(path: Path, repeated: list[str]) -> str:
    """What to say about keys written twice in one object of dataset_info.json (the board shows it too)."""
    return (f"{path}: {key_names(repeated)} written more than once in the same object; the last one is used (as "
            "LLaMA-Factory reads it) and the earlier ones are ignored. Remove or rename the duplicates.")
