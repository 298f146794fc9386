"""The tensors a ``torch.save`` file holds (names and shapes), read without torch and without running its pickle.

``torch.save`` writes a zip: ``<name>/data.pkl`` (a pickle of the object, each tensor's data replaced by a reference
to a storage) and ``<name>/data/<key>`` (each storage's bytes). :func:`read_tensor_shapes` unpickles ``data.pkl``
with an unpickler that knows only what a table of tensors is made of (a dict or OrderedDict, torch's tensor rebuild
functions, its storage types) and builds none of it: anything else a pickle names (a function that would run code
as ``torch.load`` without ``weights_only`` rebuilds it) is refused, not called. Each tensor's storage must be in the
zip, long enough for the tensor. :class:`TorchFileError` names what is wrong.

A file of torch's format before 1.6 (a bare pickle, no zip) cannot be checked this way: ``legacy`` says so.
"""

from __future__ import annotations

import collections
import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

MAX_PICKLE = 16 << 20
"""The largest ``data.pkl`` read (a table of tensors pickles to a few bytes per tensor)."""

STORAGE_BYTES = {
    "DoubleStorage": 8, "FloatStorage": 4, "HalfStorage": 2, "BFloat16Storage": 2, "LongStorage": 8,
    "IntStorage": 4, "ShortStorage": 2, "CharStorage": 1, "ByteStorage": 1, "BoolStorage": 1,
    "ComplexFloatStorage": 8, "ComplexDoubleStorage": 16,
}
"""torch's typed storages (the names ``torch.save`` pickles) and the bytes of one element of each."""


LEGACY_START = b"\x80\x02\x8a\x0a" + 0x1950A86A20F9469CFC6C.to_bytes(10, "little")
"""How a file of torch's format before 1.6 starts: the pickle of its magic number (protocol 2)."""


class TorchFileError(ValueError):
    """A file that is not a ``torch.save`` table of tensors, or a damaged one. ``kind``: ``legacy`` (torch's format
    before 1.6), ``damaged`` (not a zip, cut off, a storage missing or short), ``code`` (its pickle names something
    other than tensors: loading it could run code); ``reason`` in words."""

    def __init__(self, kind: str, reason: str) -> None:
        super().__init__(reason)
        self.kind, self.reason = kind, reason


@dataclass(frozen=True)
class _Storage:
    kind: str
    key: str
    numel: int


@dataclass(frozen=True)
class _Tensor:
    storage: _Storage
    offset: int
    shape: tuple[int, ...]
    stride: tuple[int, ...] | None

    def extent(self) -> int:
        """How many elements of its storage the tensor reaches."""
        if any(size == 0 for size in self.shape):
            return 0
        if self.stride is None:
            count = 1
            for size in self.shape:
                count *= size
            return self.offset + count
        return self.offset + 1 + sum((size - 1) * step for size, step in zip(self.shape, self.stride))


def _ints(values: Any) -> bool:
    return isinstance(values, tuple) and all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values)


def _rebuild_tensor(storage: Any, offset: Any, size: Any, stride: Any = None, *rest: Any) -> _Tensor:
    if not (isinstance(storage, _Storage) and isinstance(offset, int) and offset >= 0 and _ints(size)):
        raise pickle.UnpicklingError("a tensor whose storage, offset or shape is not one")
    return _Tensor(storage, offset, size, stride if _ints(stride) and len(stride) == len(size) else None)


def _rebuild_parameter(data: Any, *rest: Any) -> Any:
    return data


class _TableReader(pickle.Unpickler):
    """Unpickles a table of tensors into :class:`_Tensor` records; refuses any other global."""

    KNOWN = {("collections", "OrderedDict"): collections.OrderedDict,
             ("torch._utils", "_rebuild_tensor_v2"): _rebuild_tensor,
             ("torch._utils", "_rebuild_parameter"): _rebuild_parameter}

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in self.KNOWN:
            return self.KNOWN[(module, name)]
        if module == "torch" and name in STORAGE_BYTES:
            return name  # the storage's type, as its reference names it
        raise TorchFileError("code", f"its pickle names `{module[:100]}.{name[:100]}`, which a file of tensors never "
                                     "holds: loading it could run code")

    def persistent_load(self, pid: Any) -> _Storage:
        if (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage" and pid[1] in STORAGE_BYTES
                and isinstance(pid[2], str) and isinstance(pid[4], int) and pid[4] >= 0):
            return _Storage(pid[1], pid[2], pid[4])
        raise pickle.UnpicklingError("a reference that is not a tensor's storage")


def read_tensor_shapes(path: str | Path) -> dict[str, tuple[int, ...]]:
    """``name -> shape`` of the tensors in the table ``torch.save`` wrote to ``path`` (its values that are not
    tensors left out, as ``torch.load`` callers here leave them; {} when it holds no table);
    :class:`TorchFileError` when the file is not such a table or is damaged (see the module)."""
    path = Path(path)
    try:
        with zipfile.ZipFile(path) as archive:
            return _shapes(archive)
    except zipfile.BadZipFile:
        pass
    except OSError as err:
        raise TorchFileError("damaged", f"it cannot be read ({err.strerror or type(err).__name__})") from None
    try:
        with open(path, "rb") as handle:
            start = handle.read(len(LEGACY_START))
    except OSError as err:
        raise TorchFileError("damaged", f"it cannot be read ({err.strerror or type(err).__name__})") from None
    if start == LEGACY_START:
        raise TorchFileError("legacy", "it is in torch's format before 1.6 (no zip)")
    raise TorchFileError("damaged", "it is not a zip as torch.save writes, or it is cut off")


def _shapes(archive: zipfile.ZipFile) -> dict[str, tuple[int, ...]]:
    pickles = [info for info in archive.infolist() if info.filename.endswith("data.pkl")
               and info.filename.count("/") <= 1]
    if len(pickles) != 1:
        raise TorchFileError("damaged", "its zip holds no data.pkl (not a file torch.save wrote)")
    found = pickles[0]
    if found.file_size > MAX_PICKLE:
        raise TorchFileError("damaged", f"its data.pkl has {found.file_size:,} bytes, more than a table of tensors")
    prefix = found.filename[:-len("data.pkl")]
    try:
        table = _TableReader(io.BytesIO(archive.read(found))).load()
    except TorchFileError:
        raise
    except Exception as err:  # noqa: BLE001 - a damaged pickle fails in many ways: say it is damaged
        raise TorchFileError("damaged", f"its data.pkl cannot be read ({type(err).__name__})") from None
    if not isinstance(table, dict):
        return {}
    sizes = {info.filename: info.file_size for info in archive.infolist()}
    shapes: dict[str, tuple[int, ...]] = {}
    for key, value in table.items():
        if not isinstance(value, _Tensor):
            continue
        storage = value.storage
        held = sizes.get(f"{prefix}data/{storage.key}")
        if held is None:
            raise TorchFileError("damaged", f"the data of its tensor {str(key)[:100]!r} is missing")
        if held < storage.numel * STORAGE_BYTES[storage.kind] or value.extent() > storage.numel:
            raise TorchFileError("damaged", f"the data of its tensor {str(key)[:100]!r} is shorter than its shape "
                                            f"{list(value.shape)}")
        shapes[str(key)] = value.shape
    return shapes
