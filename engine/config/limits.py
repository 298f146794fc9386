"""Size limits on config input, and short forms of values for messages.

A config is a few dozen keys of short values. Caps keep a hostile or broken input (a megabyte model name, a hundred
thousand unknown keys, a NaN learning rate) from turning into a raw OS error, a minute of work or a megabyte of
error message: each is refused at once with a message that names the problem and the fix.
"""

from __future__ import annotations

import math
import re
from typing import Any

from engine.wording import counted

MAX_CONFIG_BYTES = 1_000_000
"""The largest config file read (the board's /submit_run takes as many characters): a LLaMA-Factory config is a few
hundred bytes, and YAML is read at about 0.2 MB a second, so a large file picked by mistake held the reader for
minutes before it was refused."""
MAX_KEYS = 1000
"""Most keys one config may hold (LLaMA-Factory configs hold tens; all Hugging Face training keys are ~150)."""
MAX_KEY_CHARS = 200
MAX_PATH_CHARS = 4000
"""Just under PATH_MAX (4096 on Linux): longer paths cannot be opened anyway."""
MAX_NAME_CHARS = 255
"""NAME_MAX on Linux: the longest single folder or file name."""
MAX_TEXT_CHARS = 100_000
"""Longest text value (a system prompt, a list of dataset names)."""
MAX_VALUES = 100_000
"""Most values (keys, items, scalars) one config may hold with its YAML aliases expanded. A config holds a few
hundred at most; an alias bomb (a few hundred bytes of nested ``&a [*b, *b, ...]``) expands to billions, and turning
it into text would take the process's memory."""
MAX_WHOLE_NUMBER = 2**63 - 1
"""Largest whole number a numeric setting may hold (a 64-bit integer's): torch, numpy and JSON writers (the board's
page) take no larger, and no count or seed needs one."""
MAX_PROBLEMS_SHOWN = 30
MAX_MESSAGE_CHARS = 8000

# keys whose values are file-system paths or hub ids (comma separated lists for some)
PATH_KEYS = frozenset({
    "model_name_or_path", "adapter_name_or_path", "cache_dir", "dataset_dir", "tokenized_path", "output_dir",
    "export_dir", "deepspeed", "fsdp_config", "resume_from_checkpoint", "ref_model", "dataset", "eval_dataset",
})

LIST_TEXT_KEYS = frozenset({
    "dataset", "eval_dataset", "adapter_name_or_path", "lora_target", "oft_target", "additional_target",
    "freeze_trainable_modules", "freeze_extra_modules", "galore_target", "apollo_target", "add_tokens",
    "add_special_tokens", "interleave_probs", "report_to", "reward_funcs", "reward_weights", "profile_modules",
    "fsdp", "fsdp_transformer_layer_cls_to_wrap",
})
"""Text keys that hold a comma-separated list, so a YAML list is taken too (joined with commas, as LLaMA-Factory
splits them). A list for any other text key (``output_dir: [a]``) is refused, not read as its first item or joined."""
TEXT_KINDS = {key: "one path or hub id" for key in PATH_KEYS} | {
    "output_dir": "one folder path", "export_dir": "one folder path", "template": "one template name",
    "optim": "one optimizer name"}
"""What a text key holds, as a refusal of a list says it."""


def shorten(text: Any, limit: int = 60) -> str:
    """``text`` cut to ``limit`` characters with a note of the full length (lone surrogates made visible)."""
    text = str(text)
    if len(text) > limit:
        text = f"{text[:limit]}… ({len(text):,} characters)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")


MAX_WORD_CHARS = 200
"""Longest run of characters without a space that a problem shows whole (a long path, hub id or value)."""
_LONG_WORD = re.compile(r"[^\s\u3000-\u9fff\uff00-\uffef]{" + str(MAX_WORD_CHARS + 1) + ",}")


def shorten_words(text: Any) -> str:
    """``text`` with each run of more than MAX_WORD_CHARS characters without a space (a 5,000-character model name
    a message quotes) cut to its start and end with a note of its length, so that one long value cannot push the
    other problems of the same message out of its size limit."""
    return _LONG_WORD.sub(lambda m: f"{m[0][:120]}… ({len(m[0]):,} characters) …{m[0][-40:]}", str(text))


def shown(value: Any, limit: int = 60) -> str:
    """A value as a message shows it: its repr, shortened."""
    return shorten(repr(value), limit)


def non_finite(value: Any) -> bool:
    """Whether ``value`` is a float NaN or infinity (which fail every ``<``/``>`` bound check silently)."""
    return isinstance(value, float) and not math.isfinite(value)


def non_finite_inside(value: Any) -> float | None:
    """The first NaN or infinity in a value, looking inside lists and mappings (None when there is none)."""
    if non_finite(value):
        return value
    items = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple)) else ()
    for item in items:
        found = non_finite_inside(item)
        if found is not None:
            return found
    return None


def typed_number(text: str, limit: int = 40) -> str:
    """A number as the user typed it, for a message: whole when short, else its first digits and how many it has."""
    text = text.strip()
    if len(text) <= limit:
        return shorten(text, limit)
    digits = sum(c.isdigit() for c in text)
    if digits >= len(text) - 8:  # digits with a sign, a point or an exponent
        return shorten(text[:20], 20) + f"… ({digits:,} digits)"
    return shorten(text, limit)


def _spells_non_finite(text: str) -> bool:
    """Whether ``text`` names NaN or an infinity (``nan``, ``-inf``, ``.inf``, ``Infinity``) rather than a number
    too large to hold."""
    word = text.strip().lstrip("+-").lstrip(".").lower()
    return word in ("nan", "inf", "infinity")


def non_finite_problem(key: str, value: Any) -> str:
    """The message for a NaN or infinity given for ``key``; ``value`` is the text the user typed where there was
    text (a command-line override), shown as typed (abridged), else the number it became."""
    if isinstance(value, str) and not _spells_non_finite(value):
        return (f"`{key}: {typed_number(value)}` is too large a number (past about 1.8e308 it reads as infinity, "
                "which slips past every bound and breaks training); give a real number.")
    return (f"`{key}: {value}` is not a finite number (NaN and infinities are refused: they slip past every bound "
            "and break training); give a real number.")


def text_problem(key: str, value: str) -> str | None:
    """Why a text value is too long or not valid Unicode (None when it is fine)."""
    bad = surrogate_at(value)
    if bad is not None:
        return (f"`{key}` holds an invalid character (a lone surrogate, U+{ord(value[bad]):04X}, at position "
                f"{bad + 1}); save the config as UTF-8 text and check the value.")
    if key in PATH_KEYS:
        if len(value) > MAX_PATH_CHARS:
            return (f"`{key}` is {len(value):,} characters long (`{shorten(value, 40)}`); a path or hub id has at most "
                    f"{MAX_PATH_CHARS} characters. Check the value.")
        for item in value.split(","):
            longest = max(item.replace("\\", "/").split("/"), key=len)
            if len(longest) > MAX_NAME_CHARS:
                return (f"`{key}` holds a name of {len(longest):,} characters (`{shorten(longest, 40)}`); a folder or "
                        f"file name has at most {MAX_NAME_CHARS}. Check the value.")
        return None
    if len(value) > MAX_TEXT_CHARS:
        return (f"`{key}` is {len(value):,} characters long (`{shorten(value, 40)}`); at most {MAX_TEXT_CHARS:,} are "
                "accepted. Put long text in a file instead.")
    return None


def surrogate_at(text: str) -> int | None:
    """The index of the first lone UTF-16 surrogate in ``text`` (text that cannot be written as UTF-8), or None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        return err.start
    return None


def expanded_values(value: Any, limit: int = MAX_VALUES) -> int:
    """How many values ``value`` holds, counting a shared sub-value (a YAML alias) every time it appears; any number
    above ``limit`` once it is known to be more, and ``limit + 1`` for a value that holds itself. Each distinct list
    or mapping is counted once and its count reused, so an alias bomb costs the size of its file, not of its
    expansion."""
    if not isinstance(value, (list, tuple, dict)):
        return 1
    counts: dict[int, int] = {}
    on_path: set[int] = set()
    stack: list[tuple[Any, bool]] = [(value, False)]
    while stack:
        item, done = stack.pop()
        key = id(item)
        children = list(item.keys()) + list(item.values()) if isinstance(item, dict) else list(item)
        if done:
            on_path.discard(key)
            total = 1
            for child in children:
                total += counts.get(id(child), 1) if isinstance(child, (list, tuple, dict)) else 1
                if total > limit:
                    total = limit + 1
                    break
            counts[key] = total
            continue
        if key in counts:
            continue
        if key in on_path:
            return limit + 1  # a value that holds itself (`&a [*a]`): endless once expanded
        on_path.add(key)
        stack.append((item, True))
        stack.extend((child, False) for child in children if isinstance(child, (list, tuple, dict))
                     and id(child) not in counts)
    return counts[id(value)]


def expansion_problem(value: Any, what: str = "The config") -> str | None:
    """Why ``value`` is too large once its YAML aliases are expanded (None when it is fine)."""
    if expanded_values(value) > MAX_VALUES:
        return (f"{what} holds more than {MAX_VALUES:,} values (each YAML alias, `*name`, counted as often as it is "
                "used), or a value that holds itself; a LLaMA-Factory config holds a few dozen. Is this the right "
                "file? Write the values out instead of nesting anchors.")
    return None


def size_problems(mapping: dict[Any, Any]) -> list[str]:
    """Problems with the config's size as a whole, checked before any key is looked at."""
    if len(mapping) > MAX_KEYS:
        return [f"The config has {len(mapping):,} keys; at most {MAX_KEYS:,} are accepted (a LLaMA-Factory config "
                "holds a few dozen). Is this the right file?"]
    return []


def key_problem(key: str) -> str | None:
    if len(key) > MAX_KEY_CHARS:
        return f"A key of {len(key):,} characters (`{shorten(key, 40)}`) is not a config key; remove it."
    return None


def format_problems(head: str, problems: list[str]) -> str:
    """Problems as one message: at most MAX_PROBLEMS_SHOWN lines, MAX_MESSAGE_CHARS in all."""
    lines = [f"  - {shorten_words(p)}" for p in problems[:MAX_PROBLEMS_SHOWN]]
    if len(problems) > MAX_PROBLEMS_SHOWN:
        lines.append(f"  - … and {counted(len(problems) - MAX_PROBLEMS_SHOWN, 'more problem')} of the same kinds.")
    text = head + "\n" + "\n".join(lines)
    if len(text) > MAX_MESSAGE_CHARS:
        text = text[:MAX_MESSAGE_CHARS] + "\n  … (message cut)"
    return text.encode("utf-8", "backslashreplace").decode("utf-8")
