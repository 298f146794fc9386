"""English wording for messages that name a value inside a sentence."""

from __future__ import annotations

_SOUNDS_LIKE_YOU = ("us", "uni", "use", "eu", "one")


def with_article(word: object) -> str:
    """``word`` after "a" or "an" as it is spoken: "an eval", "an export", "an assistant", "a user", "a train"."""
    text = str(word)
    lower = text.lower().lstrip("`'\"")
    vowel = lower[:1] in ("a", "e", "i", "o", "u") and not lower.startswith(_SOUNDS_LIKE_YOU)
    return f"{'an' if vowel else 'a'} {text}"
