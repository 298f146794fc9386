"""The header of a safetensors file, read without torch and without reading any tensor.

A safetensors file starts with 8 bytes (little-endian: the header's length N), then N bytes of JSON: a table of
``name -> {"dtype", "shape", "data_offsets": [begin, end]}`` (offsets into the data after the header) and an
optional ``__metadata__`` table of strings. :func:`read_header` reads and checks that much, refusing a header longer
than ``limit`` bytes (safetensors' own reader refuses more than 100 MB) before reading it, and raises
:class:`HeaderError` naming what is wrong: the file empty or shorter than its header, a header that is not JSON or not
such a table. Whether the tensors' data is all there is :attr:`Header.data_end` against the file's size.
"""

from __future__ import annotations

import json
import struct
from dataclasses import dataclass
from pathlib import Path

MAX_HEADER = 100_000_000
"""safetensors' own limit on a header's length (``MAX_HEADER_SIZE`` in its Rust reader)."""


class HeaderError(ValueError):
    """A safetensors header that cannot be read. ``kind`` says how: ``unreadable`` (the file cannot be opened or
    read), ``short`` (under 8 bytes), ``large`` (a header over the limit), ``cut`` (the file ends inside its header),
    ``json`` (the header is not UTF-8 JSON), ``table`` (not a table of tensors); ``reason`` says it in words (the
    message: the file's name, then the reason)."""

    def __init__(self, kind: str, name: str, reason: str) -> None:
        super().__init__(f"{name} {reason}")
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class Tensor:
    dtype: str
    shape: tuple[int, ...]
    offsets: tuple[int, int]


@dataclass(frozen=True)
class Header:
    tensors: dict[str, Tensor]
    metadata: dict[str, object]
    length: int
    """The header's length in bytes (the 8 bytes before it not counted)."""
    file_size: int

    @property
    def data_end(self) -> int:
        """The size the file must have at least to hold every tensor's data."""
        return 8 + self.length + max((t.offsets[1] for t in self.tensors.values()), default=0)


def read_header(path: str | Path, limit: int = MAX_HEADER) -> Header:
    """The header of the safetensors file ``path``; :class:`HeaderError` when it cannot be read (see the module)."""
    from engine.runs import open_regular

    path = Path(path)
    try:
        size = path.stat().st_size
        with open_regular(path) as handle:  # a named pipe is refused, not waited on for a writer
            head = handle.read(8)
            if len(head) < 8:
                raise HeaderError("short", path.name, f"is empty or shorter than a safetensors header "
                                                      f"({len(head)} bytes)")
            (length,) = struct.unpack("<Q", head)
            if length > limit:
                raise HeaderError("large", path.name, f"announces a header of {length:,} bytes (more than "
                                                      f"{limit:,}: not a safetensors file, or a damaged one)")
            if length > size - 8:
                raise HeaderError("cut", path.name, f"ends inside its header ({size - 8:,} of {length:,} bytes)")
            raw = handle.read(length)
    except OSError as err:
        raise HeaderError("unreadable", path.name, f"cannot be read ({err.strerror or type(err).__name__})") from None
    if len(raw) < length:  # the file shrank while it was read
        raise HeaderError("cut", path.name, f"ends inside its header ({len(raw):,} of {length:,} bytes)")
    try:
        table = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as err:
        why = "nested too deeply" if isinstance(err, RecursionError) else type(err).__name__
        raise HeaderError("json", path.name, f"has a header that is not JSON ({why})") from None
    return Header(*_tensors(path.name, table), length=length, file_size=size)


def _tensors(name: str, table: object) -> tuple[dict[str, Tensor], dict[str, object]]:
    if not isinstance(table, dict):
        raise HeaderError("table", name, "has a header that is not a table of tensors")
    metadata = table.get("__metadata__") or {}
    tensors: dict[str, Tensor] = {}
    for key, info in table.items():
        if key == "__metadata__":
            continue
        shape = info.get("shape") if isinstance(info, dict) else None
        offsets = info.get("data_offsets") if isinstance(info, dict) else None
        if not (isinstance(info, dict) and isinstance(info.get("dtype"), str) and _ints(shape) and _ints(offsets)
                and len(offsets) == 2 and offsets[0] <= offsets[1]):
            raise HeaderError("table", name, f"has a header whose entry {key[:100]!r} is not a tensor's "
                                             "(dtype, shape, data_offsets)")
        tensors[key] = Tensor(info["dtype"], tuple(shape), (offsets[0], offsets[1]))
    if not isinstance(metadata, dict):
        raise HeaderError("table", name, "has a header whose __metadata__ is not a table")
    return tensors, metadata


def _ints(values: object) -> bool:
    return isinstance(values, list) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)
