"""Stand-ins for KTO rows that are dropped, kept until KTO's mismatched (KL) pairs are formed.

LLaMA-Factory 0.9.5 forms the KL pairs over the rows of each preprocessing batch *before* it drops the rows it
cannot use (no reply, no boolean kto_tag, a broken conversation): a kept row may take its KL completion from a row
that is dropped, and the pairs of all rows are counted over the whole batch. So a row we skip in conversion is
replaced, for ``stage: kto`` training data, by a stand-in example that carries only what the pairing reads: its
reply, or none. Stand-ins go through mixing, sampling and the evaluation split like the rows they stand for
(LLaMA-Factory does all three before preprocessing), are tokenized to their reply alone, and are removed once the
pairs are built (:func:`engine.data.kto_pairs.with_kl_pairs`).

Rows with images, videos or audio get stand-ins too: LLaMA-Factory encodes a row's KL pair with the row's own media
(the partner lends its reply's text only), so a stand-in needs no media. A multimodal row that converts but that we
drop while tokenizing (``cutoff_len`` would cut through its media; LLaMA-Factory keeps it, and its training stops at
that row) becomes a stand-in there, its reply as it is (:func:`stand_in_of_dropped`).

A kept row whose partner has no usable reply (an empty one, or a conversation LLaMA-Factory reads as broken) cannot
be paired: LLaMA-Factory stops there with an IndexError; here it is a :class:`DatasetError` naming the fix. So is
a multimodal model's kept row whose partner's reply holds a media placeholder (``<image>``...): LLaMA-Factory counts
the placeholders of the KL pair against the row's own media and stops with a ValueError.
"""

from __future__ import annotations

from typing import Any

from engine.wording import counted

KEY = "kl_stand_in"
"""Marks a stand-in example; also the tokenized column (0: a row, 1: a stand-in with a reply, 2: one without, 3: one
whose reply holds a media placeholder)."""

NO_REPLY = 2
PLACEHOLDER_REPLY = 3
"""A stand-in whose reply holds a media placeholder, in data for a multimodal model (set while tokenizing)."""


def stand_in(converted: dict[str, Any] | None, row: int | None = None) -> dict[str, Any]:
    """The stand-in of a row that was dropped; ``converted`` is the row as our converter read it (None when it
    could not): the reply LLaMA-Factory would pair with is its last turn, where the turns alternate (a prompt turn
    first) and end with a reply holding text."""
    messages = (converted or {}).get("messages") or []
    reply = messages[-1] if messages and _alternates(messages) else None
    usable = reply is not None and reply.get("role") in ("assistant", "function") and _has_text(reply.get("content"))
    return {"messages": [{"role": "user", "content": ""}, reply] if usable else [], "system": "", "tools": "",
            "images": [], "videos": [], "audios": [], KEY: 1 if usable else NO_REPLY,
            **({"_row": row} if row is not None else {})}


def without_media(converter: Any, row: dict[str, Any], spec: Any) -> dict[str, Any] | None:
    """``row`` as ``converter`` reads it with its media columns left out (None when it still cannot be read): a row
    skipped because a media file is missing still has the reply LLaMA-Factory pairs with, as it opens a row's media
    only when it keeps the row."""
    from engine.data.errors import RowError

    media = {spec.columns.get(kind) for kind in ("images", "videos", "audios")} - {None}
    if not media & set(row):
        return None
    try:
        return converter({key: value for key, value in row.items() if key not in media}, spec)
    except RowError:
        return None


def stand_in_of_dropped(example: dict[str, Any]) -> dict[str, Any]:
    """The stand-in of a converted row dropped while tokenizing: LLaMA-Factory keeps such a row, so its reply lends
    itself as it is, even an empty one (a desirable row whose reply is empty pairs with the empty reply there)."""
    return {**stand_in(None), "messages": [{"role": "user", "content": ""}, example["messages"][-1]], KEY: 1}


def stand_in_columns(example: dict[str, Any], tokenizer: Any, template: Any, opts: Any) -> dict[str, Any]:
    """A stand-in's tokenized KTO columns: no prompt or completion of its own, and its whole reply (with the
    reasoning block it leaves at the end of a partner's prompt) for the KL pair it lends it to."""
    from engine.data.kto_pairs import reply_block, source_columns
    from engine.data.tokenize import prompt_and_reply

    messages = example["messages"]
    prompt, completion = prompt_and_reply(tokenizer, template, {**example, "messages": messages[:-1]},
                                          messages[-1]) if messages else ([], [])
    block = reply_block(template, tokenizer, prompt)
    return {"prompt_ids": [], "completion_ids": [], "label": False,
            **source_columns([], completion, 0, 0, opts, block=block)}


def _alternates(messages: list[dict[str, Any]]) -> bool:
    return len(messages) % 2 == 0 and all(
        (message.get("role") in ("user", "observation")) == (index % 2 == 0) for index, message in enumerate(messages))


def _has_text(content: Any) -> bool:
    return isinstance(content, str) and content != ""


_UNPAIRABLE = {
    NO_REPLY: ("that has no reply to give (an empty reply, or turns that do not alternate)", "an IndexError",
               "Fix or remove the skipped row(s) named"),
    PLACEHOLDER_REPLY: ("whose reply holds a media placeholder (<image>, <video> or <audio>)",
                        "a ValueError (it counts the placeholders of the pair against the kept row's own media)",
                        "Take the placeholder out of the reply, or remove the skipped row(s) named"),
}


def origin(example: dict[str, Any], position: int) -> str:
    """Where a stand-in came from: its dataset and row number, as the warning about skipped rows names them."""
    if "_row" in example:
        return f"dataset `{example.get('_dataset', '?')}` row {example['_row']}"
    return f"position {position} of its split (skipped rows counted)"


def refuse_unpaired(kinds: list[int], partners: list[int], examples: Any = None) -> None:
    """Raise when a kept row's KL partner is a stand-in without a usable reply, or (multimodal models) with a media
    placeholder in its reply: LLaMA-Factory fails there. ``examples`` (the rows the kinds were tokenized from, one
    each) name the skipped rows by dataset and row number."""
    from engine.data.errors import DatasetError

    for kind, (what, failure, fix) in _UNPAIRABLE.items():
        bad = [row for row, partner in enumerate(partners) if not kinds[row] and kinds[partner] == kind]
        if not bad:
            continue
        skipped = sorted({partners[row] for row in bad})
        known = examples is not None and len(examples) == len(kinds)
        named = ", ".join(origin(examples[at] if known else {}, at) for at in skipped[:5])
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        raise DatasetError(
            f"KTO pairs each row with the reply of the row before it (within each preprocessing batch), even where "
            f"that row is skipped; {counted(len(bad), 'kept row')} would take theirs from a skipped row {what}: {named}{more}. "
            f"LLaMA-Factory 0.9.5 stops on such data with {failure}. {fix} (the warning above says why it is "
            "skipped).")
