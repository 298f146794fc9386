"""Canonical examples kept in an Arrow file on disk, not in a Python list.

A converted dataset of 100,000 rows held as dicts costs hundreds of MB of small Python objects (and the cyclic
garbage collector walks them all, again and again, while they load). Here the loader converts rows a chunk at a
time and appends each example, serialized (``marshal``, or ``pickle`` for values marshal refuses: either way it
comes back equal, types included), to one binary column of an Arrow file in the process's scratch folder
(:func:`engine.data.stream._scratch_dir`). :class:`Examples` is the read side: a ``Sequence`` with ``len``,
int and slice indexing and iteration a chunk at a time over that file (read a record batch at a time, so memory
stays flat however many rows there are), plus index views
(:meth:`Examples.take`, :func:`concat`) for mixing datasets and holding out an evaluation split, so nothing is
copied for those either. A forked process (tokenization workers) opens the file again on first use.

The file is deleted when the last view of it is gone (and with the scratch folder when the process ends).
"""

from __future__ import annotations

import marshal
import operator
import os
import pickle
import tempfile
import weakref
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

CHUNK_ROWS = 2000
"""Examples per Arrow record batch (and per read when iterating)."""
MEDIA_KINDS = ("images", "videos", "audios")
_MARSHAL, _PICKLE = b"M", b"P"


def dump(example: Any) -> bytes:
    """``example`` as bytes that :func:`load` turns back into an equal value of the same types."""
    try:
        return _MARSHAL + marshal.dumps(example)
    except ValueError:  # a type marshal does not write exactly (a subclass, a date, ...): pickle keeps it
        return _PICKLE + pickle.dumps(example, protocol=pickle.HIGHEST_PROTOCOL)


def load(blob: bytes) -> Any:
    view = memoryview(blob)[1:]
    return marshal.loads(view) if blob[:1] == _MARSHAL else pickle.loads(view)


def has_media(example: dict) -> bool:
    return bool(example.get("images") or example.get("videos") or example.get("audios"))


def _unlink(path: Path, owner: int) -> None:
    if os.getpid() == owner:  # never from a forked child that inherited the object
        try:
            path.unlink()
        except OSError:  # already gone, or still open elsewhere (Windows): the scratch folder goes at exit
            pass


class _Source:
    """One Arrow file of examples (record batches of ``chunk`` rows): its row count, which rows carry media, and
    the dataset name.

    Batches are read with plain file reads, not a memory map: pages of a map stay in the process's resident set
    once read, so reading 100,000 examples that way would grow the peak RSS with the row count.
    """

    def __init__(self, path: Path, count: int, chunk: int, media: Any, name: str) -> None:
        self.path, self.count, self.chunk, self.media, self.name = path, count, chunk, media, name
        self._reset()
        weakref.finalize(self, _unlink, path, os.getpid())

    def _reset(self) -> None:
        self._reader: Any = None
        self._pid = 0
        self._cached: tuple[int, Any] = (-1, None)

    def _batch(self, number: int) -> Any:
        if self._reader is None or self._pid != os.getpid():  # a forked process opens its own file handle
            import pyarrow as pa

            self._reader = pa.ipc.open_file(pa.OSFile(str(self.path)))
            self._pid, self._cached = os.getpid(), (-1, None)
        if self._cached[0] != number:  # one batch kept: reading example by example reads each batch once
            self._cached = (number, self._reader.get_batch(number).column(0))
        return self._cached[1]

    def blobs(self, lo: int, hi: int) -> list[bytes]:
        """The serialized examples ``lo`` to ``hi``."""
        out: list[bytes] = []
        for number in range(lo // self.chunk, (hi - 1) // self.chunk + 1):
            first = number * self.chunk
            start, stop = max(lo, first), min(hi, first + self.chunk)
            out += self._batch(number).slice(start - first, stop - start).to_pylist()
        return out

    def take(self, local: Any) -> list[bytes]:
        """The serialized examples at positions ``local`` (a numpy array), in that order."""
        import numpy as np
        import pyarrow as pa

        out: list[Any] = [None] * len(local)
        batches = local // self.chunk
        for number in np.unique(batches).tolist():
            chosen = np.flatnonzero(batches == number)
            values = self._batch(number).take(pa.array(local[chosen] - number * self.chunk)).to_pylist()
            for position, blob in zip(chosen.tolist(), values):
                out[position] = blob
        return out

    def __getstate__(self) -> dict[str, Any]:
        return {"path": self.path, "count": self.count, "chunk": self.chunk, "media": self.media, "name": self.name}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._reset()


class ExampleWriter:
    """Appends examples to a new Arrow file a chunk at a time; :meth:`finish` gives the :class:`Examples`."""

    def __init__(self, name: str = "", chunk_rows: int | None = None) -> None:
        import pyarrow as pa

        from engine.data.stream import _scratch_dir

        handle, path = tempfile.mkstemp(suffix=".examples.arrow", dir=_scratch_dir())
        os.close(handle)
        self.path, self.name, self.chunk_rows, self.count = Path(path), name, max(1, chunk_rows or CHUNK_ROWS), 0
        self._schema = pa.schema([("example", pa.large_binary())])
        self._sink = pa.OSFile(path, "wb")
        self._writer = pa.ipc.new_file(self._sink, self._schema)
        self._blobs: list[bytes] = []
        self._media = bytearray()

    def add(self, example: dict) -> None:
        self._blobs.append(dump(example))
        self._media.append(has_media(example))
        self.count += 1
        if len(self._blobs) >= self.chunk_rows:
            self._flush()

    def _flush(self) -> None:
        if self._blobs:
            import pyarrow as pa

            self._writer.write_batch(pa.record_batch([pa.array(self._blobs, pa.large_binary())], schema=self._schema))
            self._blobs = []

    def finish(self) -> Examples:
        import numpy as np

        self._flush()
        self._writer.close()
        self._sink.close()
        media = np.frombuffer(bytes(self._media), dtype=np.bool_)
        return Examples([_Source(self.path, self.count, self.chunk_rows, media, self.name)])

    def abort(self) -> None:
        try:
            self._writer.close()
            self._sink.close()
        finally:
            self.path.unlink(missing_ok=True)


class Examples(Sequence):
    """A read-only sequence of canonical examples over Arrow files (see the module docstring).

    ``examples[i]`` and ``examples[a:b]`` give dicts (a slice gives a list); iteration reads ``CHUNK_ROWS`` at a
    time. Comparing with any sequence compares the examples.
    """

    def __init__(self, sources: Iterable[_Source], order: Any = None) -> None:
        import numpy as np

        self._sources = tuple(sources)
        self._starts = np.cumsum([0] + [source.count for source in self._sources], dtype=np.int64)
        self._order = None if order is None else np.asarray(order, dtype=np.int64)

    # -------------------------------------------------------------------------------------------- sequence
    def __len__(self) -> int:
        return int(self._starts[-1]) if self._order is None else len(self._order)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if self._order is None and step == 1:
                return self._range(start, max(start, stop))
            return self._gather(self.ids()[key])
        index = operator.index(key)
        size = len(self)
        if index < 0:
            index += size
        if not 0 <= index < size:
            raise IndexError(f"example index {key} out of range ({size} examples)")
        at = index if self._order is None else int(self._order[index])
        return self._range(at, at + 1)[0]

    def __iter__(self) -> Iterator[dict]:
        for start in range(0, len(self), CHUNK_ROWS):
            yield from self[start:start + CHUNK_ROWS]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, (str, bytes)):
            return NotImplemented
        return len(self) == len(other) and all(a == b for a, b in zip(self, other))

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        names = ", ".join(dict.fromkeys(source.name for source in self._sources))
        return f"Examples({len(self)} examples of {names or '?'})"

    # -------------------------------------------------------------------------------------------- reading
    def ids(self) -> Any:
        """Positions of this view's examples in its files, all files counted one after another."""
        import numpy as np

        return np.arange(len(self), dtype=np.int64) if self._order is None else self._order

    def _range(self, start: int, stop: int) -> list[dict]:
        """Examples ``start`` to ``stop`` of the files counted one after another."""
        out: list[dict] = []
        for number, source in enumerate(self._sources):
            first, last = int(self._starts[number]), int(self._starts[number + 1])
            lo, hi = max(start, first), min(stop, last)
            if lo < hi:
                out += [load(blob) for blob in source.blobs(lo - first, hi - first)]
        return out

    def _gather(self, ids: Any) -> list[dict]:
        import numpy as np

        if not len(ids):
            return []
        if int(ids[-1]) - int(ids[0]) == len(ids) - 1 and (len(ids) == 1 or bool(np.all(np.diff(ids) == 1))):
            return self._range(int(ids[0]), int(ids[-1]) + 1)
        which = np.searchsorted(self._starts, ids, side="right") - 1
        out: list[Any] = [None] * len(ids)
        for number in np.unique(which).tolist():
            chosen = np.flatnonzero(which == number)
            blobs = self._sources[number].take(ids[chosen] - self._starts[number])
            for position, blob in zip(chosen.tolist(), blobs):
                out[position] = load(blob)
        return out

    # -------------------------------------------------------------------------------------------- views
    def take(self, indices: Any) -> Examples:
        """A view of the examples at ``indices`` (positions in this sequence), in that order."""
        import numpy as np

        return Examples(self._sources, self.ids()[np.asarray(indices, dtype=np.int64)])

    def media_mask(self) -> Any:
        """One bool per example: whether it has images, videos or audio (read without loading the examples)."""
        import numpy as np

        mask = np.concatenate([source.media for source in self._sources]) if self._sources else np.zeros(0, bool)
        return mask if self._order is None else mask[self._order]

    def media_names(self) -> list[str]:
        """Names of the datasets whose examples in this view carry media."""
        import numpy as np

        which = np.searchsorted(self._starts, self.ids()[self.media_mask()], side="right") - 1
        return sorted({self._sources[number].name for number in np.unique(which).tolist()})


def concat(parts: Sequence[Examples]) -> Examples:
    """The examples of ``parts`` one after another (a view: nothing is copied)."""
    import numpy as np

    sources: list[_Source] = []
    orders = []
    offset = 0
    for part in parts:
        sources += part._sources
        orders.append(part.ids() + offset)
        offset += int(part._starts[-1])
    if all(part._order is None for part in parts):
        return Examples(sources)
    return Examples(sources, np.concatenate(orders) if orders else np.zeros(0, np.int64))


def count_media(examples: Sequence[dict]) -> int:
    """How many examples have images, videos or audio (an :class:`Examples` answers without loading them)."""
    if isinstance(examples, Examples):
        return int(examples.media_mask().sum())
    return sum(has_media(example) for example in examples)


def media_dataset_names(examples: Sequence[dict]) -> list[str]:
    """The ``_dataset`` names of the examples that carry media."""
    if isinstance(examples, Examples):
        return examples.media_names()
    return sorted({str(example.get("_dataset", "?")) for example in examples if has_media(example)})
