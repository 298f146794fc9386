"""Reading a small JSON file the engine wrote for itself (a cache entry's counts and meta, a quick-key record, a
saved dataset's state) or one a config names (a DeepSpeed or FSDP file) within a size bound, and only when it is a
regular file.

Such a file can be replaced by anything (a folder copied from elsewhere, a damaged disk, someone else's hand): a
sparse file of gigabytes takes no disk and was read whole, a named pipe held its reader until a writer came, and a
link to ``/dev/zero`` never ended. Here each is refused at once with an error that names the file and what it is.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MAX_SMALL_JSON_BYTES = 16 << 20
"""The default bound (bytes). What the engine writes itself is a few KB (a cache entry's meta lists one line per
Arrow shard: a 1 TB dataset in 500 MB shards is about 120 KB); DeepSpeed's and FSDP's own examples are under 2 KB."""


class TooLarge(ValueError):
    """A file past its bound; the message names the file, its size and the bound. ``size``: its size in bytes as
    opened (None when it grew past the bound while it was read)."""

    def __init__(self, message: str, size: int | None = None):
        super().__init__(message)
        self.size = size


def read_small(path: str | Path, limit: int = MAX_SMALL_JSON_BYTES) -> bytes:
    """The bytes of ``path``, a regular file (a link to one included) of at most ``limit`` bytes.

    Raises:
        OSError: missing, unreadable, or not a regular file (a pipe, device or socket; a folder).
        TooLarge: larger than ``limit`` (a ValueError).
    """
    from engine.runs import open_regular

    with open_regular(path) as fh:  # one descriptor: what is checked is what is read, whatever the path becomes
        size = os.fstat(fh.fileno()).st_size
        data = fh.read(limit + 1) if size <= limit else b""  # past the bound by its size: refused unread
    if size > limit or len(data) > limit:
        said = f"{size:,} bytes" if size > limit else "larger"  # else it grew while read
        raise TooLarge(f"{path} is {said}, more than the {limit:,} such a file can be", size if size > limit else None)
    return data


def read_small_json(path: str | Path, limit: int = MAX_SMALL_JSON_BYTES) -> Any:
    """``path`` parsed as JSON (see :func:`read_small`).

    Raises:
        OSError: missing, unreadable, or not a regular file.
        ValueError: larger than ``limit`` (:class:`TooLarge`), not UTF-8, or not JSON (a ``JSONDecodeError``,
            including a whole number past Python's digit limit).
        RecursionError: nested too deeply.
    """
    from engine.json_text import loads

    return loads(read_small(path, limit).decode("utf-8"))


def reason(err: BaseException) -> str:
    """Why a :func:`read_small_json` failed, in words for a message."""
    if isinstance(err, RecursionError):
        return "nested too deeply"
    if isinstance(err, json.JSONDecodeError):
        return f"not valid JSON: {err.msg} at line {err.lineno}"
    if isinstance(err, UnicodeDecodeError):
        return "not UTF-8 text"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err)


def read_named_json(key: str, value: str, kind: str, example: str, error: type[Exception]) -> dict[str, Any]:
    """The JSON object of the file a config's ``key: value`` names (a DeepSpeed or FSDP file), read only as a
    regular file of at most :data:`MAX_SMALL_JSON_BYTES`; ``kind`` (DeepSpeed) and ``example`` (a file of that kind)
    are named in the fix.

    Raises:
        error: missing, no regular file, outsized, unreadable, not UTF-8, not JSON or no object, with the fix.
    """
    import stat

    file = Path(value).expanduser()
    named = f"`{key}: {value}`"
    give = f"give a {kind} JSON file such as {example}"
    try:
        mode = os.stat(file).st_mode
    except OSError:
        raise error(f"{named} does not exist; {give}.") from None
    if not stat.S_ISREG(mode):
        what = "a folder" if stat.S_ISDIR(mode) else "a pipe, device or socket"
        raise error(f"{named} is {what}, not a regular file; {give}.")
    try:
        data = read_small_json(file)
    except TooLarge as err:  # its size as it was opened (the path, looked up again, may be gone by now)
        size = f"{err.size:,} bytes" if err.size is not None else "larger"
        raise error(f"{named} is {size}, more than any {kind} config (at most {MAX_SMALL_JSON_BYTES:,} are read); "
                    f"{give}.") from None
    except json.JSONDecodeError as err:
        raise error(f"{named} is not valid JSON ({err.msg} at line {err.lineno}).") from None
    except RecursionError:
        raise error(f"{named} nests lists or objects too deeply to be read.") from None
    except (OSError, ValueError) as err:  # unreadable (or no longer a regular file); not UTF-8
        raise error(f"{named} cannot be read ({reason(err)}); {give}.") from None
    if not isinstance(data, dict):
        raise error(f"{named} must hold a JSON object.")
    return data
