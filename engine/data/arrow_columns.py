"""Tokenized columns (Python lists of token-id lists) to Arrow arrays, without Arrow's per-value conversion.

``datasets``' writer turns a column of Python lists into Arrow by inspecting every int object (about 15 % of a
100,000-row tokenization here). The same arrays are built from two flat buffers instead: each row's length (its
offsets) and every value in order, read by numpy in one pass (only where all are Python ints). The types are those
``datasets`` infers for the same lists (its ``OptimizedTypedSequence``: ``input_ids`` int32, masks int8, anything
else int64; a wider type where a value does not fit), so a file written either way has the same schema and rows.
A token-id column of empty lists only (``*_ids``) keeps its int type rather than the null type ``datasets`` would
give it, so a later chunk with ids can be written after it.
"""

from __future__ import annotations

import itertools
from typing import Any

import numpy as np

NARROW_TYPES = {"input_ids": np.int32, "attention_mask": np.int8, "special_tokens_mask": np.int8,
                "token_type_ids": np.int8}


def to_arrow_columns(columns: dict[str, list]) -> dict[str, Any]:
    """``columns`` with every column of int lists as a ``pyarrow`` list array; other columns are left as they are
    (``datasets`` converts those itself)."""
    return {name: _list_array(name, values) for name, values in columns.items()}


def _list_array(name: str, rows: list) -> Any:
    import pyarrow as pa

    if type(rows) is not list or not rows or not all(type(row) is list for row in rows):
        return rows
    lengths = np.fromiter(map(len, rows), dtype=np.int64, count=len(rows))
    offsets = np.zeros(len(rows) + 1, dtype=np.int64)
    np.cumsum(lengths, out=offsets[1:])
    if not offsets[-1]:  # no values at all: datasets would type the column null, and a later chunk of the same
        if not name.endswith("_ids"):  # stream with ids then fails to cast to it; token columns keep their int type
            return rows
        values = np.zeros(0, dtype=NARROW_TYPES.get(name, np.int64))
        return pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32), type=pa.int32()), pa.array(values))
    try:
        values = np.array(list(itertools.chain.from_iterable(rows)))
    except (TypeError, ValueError, OverflowError):
        return rows
    if values.dtype != np.int64 or values.ndim != 1:  # floats, bools, None, text, beyond int64: datasets decides
        return rows
    narrow = NARROW_TYPES.get(name)
    if narrow is not None and len(values) and (values.min() >= np.iinfo(narrow).min
                                               and values.max() <= np.iinfo(narrow).max):
        values = values.astype(narrow)
    if offsets[-1] >= 2**31:  # beyond a list array's 32-bit offsets (never a chunk of rows): datasets decides
        return rows
    return pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), pa.array(values))
