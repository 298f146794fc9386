"""`lf-engine data`'s per-split line agrees with its counts: "1 row -> 1 sequence", not "1 rows -> 1 sequences"."""

from __future__ import annotations

from engine.prepare_data import split_lines


def test_one_row_and_one_sequence_read_as_one():
    stats = {"train": {"rows": 1, "kept": 1, "truncated": 0, "total_tokens": 42, "trainable_tokens": 4},
             "eval": {"rows": 3, "kept": 1, "truncated": 0, "dropped": 2, "total_tokens": 9}}
    assert split_lines(stats, 512) == ["train: 1 row -> 1 sequence (0 cut to cutoff_len 512); 42 tokens, 4 trained on",
                                       "eval: 3 rows -> 1 sequence (0 cut to cutoff_len 512, 2 dropped); 9 tokens, ? "
                                       "trained on"]
    assert split_lines({"eval": {"rows": 1, "kept": 1}}, 64, prompts=True) == [
        "eval: 1 row -> 1 prompt (0 cut to cutoff_len 64); ? tokens"]
    assert split_lines({"train": {"rows": "x", "kept": 2}}, 64)[0].startswith("train: ? rows -> 2 sequences (")
