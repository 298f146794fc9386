"""English wording for messages that name a value inside a sentence."""

from __future__ import annotations

_SOUNDS_LIKE_YOU = ("us", "uni", "use", "eu", "one")


def with_article(word: object) -> str:
    """``word`` after "a" or "an" as it is spoken: "an eval", "an export", "an assistant", "a user", "a train"."""
    text = str(word)
    lower = text.lower().lstrip("`'\"")
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(_SOUNDS_LIKE_YOU)
    return f"{'an' if vowel else 'a'} {text}"


def counted(number: int, noun: str, plural: str | None = None) -> str:
    """``number`` and ``noun`` agreeing: "1 row", "2 rows", "0 rows" (``plural`` for an irregular one: "batches")."""
    return f"{number:,} {noun if number == 1 else plural or noun + 's'}"


def was_were(number: int) -> str:
    """The verb that agrees with ``number`` things: "1 row was", "2 rows were"."""
    return "was" if number == 1 else "were"
