"""Token columns to Arrow: the arrays and types datasets infers for the same Python lists, built from flat buffers."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from datasets.arrow_writer import OptimizedTypedSequence

from engine.data.arrow_columns import to_arrow_columns


def _datasets_array(name, rows):
    return pa.array(OptimizedTypedSequence(rows, col=name))


def test_same_arrays_and_types_as_datasets():
    rng = random.Random(0)
    ids = [[rng.randrange(150_000) for _ in range(rng.randrange(0, 40))] for _ in range(50)]
    columns = {"input_ids": ids, "labels": [[-100] * 3 + row[3:] for row in ids],
               "attention_mask": [[1] * len(row) for row in ids], "position_ids": [list(range(len(r))) for r in ids],
               "token_type_ids": [[0] * len(row) for row in ids]}
    arrays = to_arrow_columns(columns)
    for name, rows in columns.items():
        assert isinstance(arrays[name], pa.Array), name
        expected = _datasets_array(name, rows)
        assert arrays[name].type == expected.type, name
        assert arrays[name].equals(expected), name
        assert arrays[name].to_pylist() == rows
    assert arrays["input_ids"].type == pa.list_(pa.int32()) and arrays["attention_mask"].type == pa.list_(pa.int8())


def test_values_that_do_not_fit_the_narrow_type_widen_as_datasets_does():
    rows = {"input_ids": [[1, 2**31 + 5]], "attention_mask": [[1, 300]]}
    arrays = to_arrow_columns(rows)
    for name, values in rows.items():
        assert arrays[name].type == _datasets_array(name, values).type == pa.list_(pa.int64())
        assert arrays[name].to_pylist() == values


@pytest.mark.parametrize("rows", [
    [[1, 2], [3, None]],  # a missing value
    [[1.5, 2.0]],  # floats
    [["a"]],  # text
    [True, False],  # not lists (KTO tags)
    [[2**70]],  # beyond int64
    [[1], [2.0]],  # a float among ints
    [[], []],  # no values at all
    [],
])
def test_other_columns_are_left_to_datasets(rows):
    assert to_arrow_columns({"column": rows})["column"] is rows


def test_arrays_pass_through():
    array = pa.array([[1, 2], [3]])
    assert to_arrow_columns({"input_ids": array})["input_ids"] is array
