"""Packing rows with media (``packing`` / ``neat_packing`` in sft), as LLaMA-Factory 0.9.5 packs them.

Rows are packed exactly as text rows are (:func:`engine.data.tokenize.pack_order`: LLaMA-Factory's greedy knapsack
within each of its preprocessing batches, ``cutoff_len`` one less, every label kept), and each packed sequence
carries its rows' media in the same order as their soft tokens: the ``mm_inputs`` of its rows joined along the
first axis (images, frames, audio clips in row order, as a batch of those rows would hold them), the token-type
ids joined, and ``position_ids`` restarting at 0 for each row.

No row sees another: the collator turns the restarting positions into per-row attention (as for text), and the
models whose positions or masks are not plain 1D positions get them per row from
:mod:`engine.multimodal.packed_model` (Qwen-VL's and GLM-4V's 3D rotary positions, Gemma's two-way attention over
an image). A family where that cannot hold is refused before the run (:func:`engine.models.packing_support`).
"""

from __future__ import annotations

import bisect

from engine.data.tokenize import IGNORE, pack_order
from engine.multimodal.collator import join_numpy
from engine.multimodal.plugins import pack_arrays, unpack_arrays


def pack_media_rows(columns: dict[str, list], cutoff_len: int, mask_first: bool = False) -> dict[str, list]:
    """``columns`` of tokenized media rows (:func:`engine.multimodal.dataset.tokenize_media_sft`, every row at most
    ``cutoff_len`` tokens) packed into sequences of at most ``cutoff_len`` tokens; with ``mask_first`` the first
    label of each row is masked (LLaMA-Factory's sft packing keeps it, the default)."""
    packed: dict[str, list] = {key: [] for key in (*columns, "position_ids")}
    for pack in pack_order([len(ids) for ids in columns["input_ids"]], cutoff_len):
        for key in columns:
            if key == "labels" and mask_first:
                packed[key].append([label for index in pack
                                    for label in [IGNORE] + list(columns[key][index][1:])])
            elif key == "mm_inputs":
                arrays = [unpack_arrays(columns[key][index]) for index in pack]
                packed[key].append(pack_arrays(join_numpy([row for row in arrays if row])))
            else:
                packed[key].append([value for index in pack for value in columns[key][index]])
        packed["position_ids"].append([position for index in pack
                                       for position in range(len(columns["input_ids"][index]))])
    return packed


def pack_in_batches(columns: dict[str, list], origins: list[int], bounds: list[tuple[int, int]], cutoff_len: int,
                    mask_first: bool = False) -> dict[str, list]:
    """:func:`pack_media_rows` of the rows whose source example (``origins``, one index per row) falls in each
    ``(start, end)`` of ``bounds``, batch after batch: LLaMA-Factory joins rows only within one preprocessing batch
    (:func:`engine.data.lf_batches.lf_batches`)."""
    out: dict[str, list] = {key: [] for key in (*columns, "position_ids")}
    for start, end in bounds:  # origins ascend: the rows of a batch are one slice
        rows = range(bisect.bisect_left(origins, start), bisect.bisect_left(origins, end))
        part = pack_media_rows({key: [values[index] for index in rows] for key, values in columns.items()},
                               cutoff_len, mask_first)
        for key, values in part.items():
            out[key] += values
    return out
