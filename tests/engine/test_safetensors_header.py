"""One reader of safetensors headers (engine.safetensors_header) for the checkpoint check, the memory estimate and
the value head: a damaged header is named, never a traceback, and a header longer than the bound is not read."""

from __future__ import annotations

import json
import struct

import pytest
import torch
from safetensors.torch import save_file

from engine.checkpoints import weights_problem
from engine.models.value_head import value_head_inputs
from engine.preflight_memory import estimate_params
from engine.safetensors_header import HeaderError, read_header


def _raw(path, header: bytes, length: int | None = None, tail: bytes = b"") -> None:
    path.write_bytes(struct.pack("<Q", len(header) if length is None else length) + header + tail)


def test_a_whole_file_is_read_as_safetensors_wrote_it(tmp_path):
    save_file({"a": torch.zeros(2, 3), "b": torch.zeros(4, dtype=torch.bfloat16)}, str(tmp_path / "x.safetensors"),
              metadata={"format": "pt"})
    header = read_header(tmp_path / "x.safetensors")
    assert {k: (t.dtype, t.shape) for k, t in header.tensors.items()} == {"a": ("F32", (2, 3)), "b": ("BF16", (4,))}
    assert header.metadata == {"format": "pt"} and header.data_end == header.file_size


@pytest.mark.parametrize("header, length, kind", [
    (b"", 0, "json"),
    (b"[1, 2]", None, "table"),
    (b'{"a": {"dtype": "F32", "shape": [2], "data_offsets": [8, 0]}}', None, "table"),
    (b'{"a": {"dtype": "F32", "shape": "2", "data_offsets": [0, 8]}}', None, "table"),
    (b'{"__metadata__": [1]}', None, "table"),
    (b"\xff{}", None, "json"),
    (b"{}", 1 << 62, "large"),
    (b"{}", 100, "cut"),
])
def test_a_damaged_header_is_named(tmp_path, header, length, kind):
    _raw(tmp_path / "x.safetensors", header, length)
    with pytest.raises(HeaderError) as caught:
        read_header(tmp_path / "x.safetensors")
    assert caught.value.kind == kind and str(caught.value).startswith("x.safetensors ")
    (tmp_path / "short.safetensors").write_bytes(b"\x01\x02")
    with pytest.raises(HeaderError, match=r"short.safetensors is empty or shorter than a safetensors header"):
        read_header(tmp_path / "short.safetensors")


def test_the_three_readers_name_a_damaged_header_instead_of_failing(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    _raw(folder / "model.safetensors", b"[1]")  # was AttributeError ('list' has no attribute 'items') in all three
    assert weights_problem(folder) == "model.safetensors is not a safetensors file (its header is not a table of tensors)"
    assert estimate_params(folder) is None
    _raw(folder / "model.safetensors", b"{}", 1 << 62)  # was OverflowError: a read of 2**62 bytes asked for
    assert estimate_params(folder) is None
    assert weights_problem(folder).startswith("model.safetensors is not a safetensors file (announces a header of ")
    _raw(tmp_path / "value_head.safetensors", b'{"v_head.summary.weight": 3}')
    assert "is not a safetensors file (has a header whose entry 'v_head.summary.weight' is not a tensor's" in (
        value_head_inputs(tmp_path / "value_head.safetensors")[1])


def test_a_weights_file_cut_in_its_data_is_named_with_its_sizes(tmp_path):
    save_file({"a": torch.zeros(16)}, str(tmp_path / "model.safetensors"))
    whole = (tmp_path / "model.safetensors").read_bytes()
    (tmp_path / "model.safetensors").write_bytes(whole[:-10])
    assert weights_problem(tmp_path) == f"model.safetensors is cut off ({len(whole) - 10:,} of {len(whole):,} bytes)"
    (tmp_path / "model.safetensors").write_bytes(whole)
    assert weights_problem(tmp_path) is None and estimate_params(tmp_path) == (16, 4)
    header = json.loads(whole[8:8 + struct.unpack("<Q", whole[:8])[0]])
    assert header["a"]["shape"] == [16]
