"""Stand-ins for KTO rows that are dropped, kept until KTO's mismatched (KL) pairs are formed.

LLaMA-Factory 0.9.5 forms the KL pairs over the rows of each preprocessing batch *before* it drops the rows it
cannot use (no reply, no boolean kto_tag, a broken conversation): a kept row may take its KL completion from a row
that is dropped, and the pairs of all rows are counted over the whole batch. So a row we skip in conversion is
replaced, for ``stage: kto`` training data, by a stand-in example that carries only what the pairing reads: its
reply, or none. Stand-ins go through mixing, sampling and the evaluation split like the rows they stand for
(LLaMA-Factory does all three before preprocessing), are tokenized to their reply alone, and are removed once the
pairs are built (:func:`engine.data.kto_pairs.with_kl_pairs`).

A kept row whose partner has no usable reply (an empty one, or a conversation LLaMA-Factory reads as broken) cannot
be paired: LLaMA-Factory stops there with an IndexError; here it is a :class:`DatasetError` naming the fix.
"""

from __future__ import annotations

from typing import Any

KEY = "kl_stand_in"
"""Marks a stand-in example; also the tokenized column (0: a row, 1: a stand-in with a reply, 2: one without)."""

NO_REPLY = 2


def stand_in(converted: dict[str, Any] | None) -> dict[str, Any]:
    """The stand-in of a row that was dropped; ``converted`` is the row as our converter read it (None when it
    could not): the reply LLaMA-Factory would pair with is its last turn, where the turns alternate (a prompt turn
    first) and end with a reply holding text."""
    messages = (converted or {}).get("messages") or []
    reply = messages[-1] if messages and _alternates(messages) else None
    usable = reply is not None and reply.get("role") in ("assistant", "function") and _has_text(reply.get("content"))
    return {"messages": [{"role": "user", "content": ""}, reply] if usable else [], "system": "", "tools": "",
            "images": [], "videos": [], "audios": [], KEY: 1 if usable else NO_REPLY}


def _alternates(messages: list[dict[str, Any]]) -> bool:
    return len(messages) % 2 == 0 and all(
        (message.get("role") in ("user", "observation")) == (index % 2 == 0) for index, message in enumerate(messages))


def _has_text(content: Any) -> bool:
    return isinstance(content, str) and content != ""


def refuse_unpaired(kinds: list[int], partners: list[int]) -> None:
    """Raise when a kept row's KL partner is a stand-in without a usable reply (LLaMA-Factory fails there)."""
    from engine.data.errors import DatasetError

    bad = [row for row, partner in enumerate(partners) if not kinds[row] and kinds[partner] == NO_REPLY]
    if bad:
        raise DatasetError(
            f"KTO pairs each row with the reply of the row before it (within each preprocessing batch), even where "
            f"that row is skipped; {len(bad)} kept row(s) (the first at position {bad[0]} of its split, skipped "
            "rows counted) would take theirs from a skipped row that has no reply to give (an empty reply, or turns "
            "that do not alternate). LLaMA-Factory 0.9.5 stops on such data with an IndexError. Fix or remove the "
            "skipped rows the warning above lists.")
