"""Counts in messages agree with their number: "1 row was dropped", never "1 rows were dropped"."""

from __future__ import annotations

import json
from pathlib import Path

from engine.wording import counted, was_were

LOCALES = Path(__file__).resolve().parents[2] / "locales"


def test_counted_and_verb_agree_with_the_number():
    assert counted(1, "row") == "1 row" and counted(0, "row") == "0 rows" and counted(2, "row") == "2 rows"
    assert counted(12345, "batch", "batches") == "12,345 batches" and counted(1, "batch", "batches") == "1 batch"
    assert was_were(1) == "was" and was_were(2) == "were" and was_were(0) == "were"


def test_no_count_message_hedges_with_a_parenthesised_plural():
    """A message with a count reads "{n} runs" with a `_one` key beside it for one, not "{n} run(s)"."""
    for lang in ("en", "zh"):
        texts = json.loads((LOCALES / f"{lang}.json").read_text(encoding="utf-8"))
        hedged = [key for key, text in texts.items() if "(s)" in text and "{n}" in text]
        assert not hedged, (lang, hedged)
        for key in ("progress_checkpoints", "chat_unloaded", "runs_confirm_text", "runs_deleted", "profile_summary"):
            assert f"{key}_one" in texts, (lang, key)
