"""Whether a reference model reads the policy's token ids as the same tokens.

DPO, KTO and ASFT score the policy's token ids with the reference model (``ref_model``). A reference with another
tokenizer gives each id a different token (or none), so its log-probabilities are meaningless while training goes
on without an error. Light: reading a tokenizer file needs ``tokenizers`` only, no torch and no weights.
"""

from __future__ import annotations

import json
from pathlib import Path

from engine.demo_names import built_demo_folder, is_demo_name

SHOWN = 3  # differing tokens quoted in a message


def tokenizer_vocab(folder: str | Path) -> dict[str, int] | None:
    """The token -> id map of the tokenizer saved in ``folder`` (tokenizer.json, else vocab.json with
    added_tokens.json), added tokens included; None when there is no such file or it cannot be read."""
    from engine.models.registry import read_config_text
    from engine.templates.token_check import MAX_TOKENIZER_BYTES

    def read(name: str) -> str:  # the board checks in its own process: no pipe waited on, no huge file read whole
        return read_config_text(folder / name, max_bytes=MAX_TOKENIZER_BYTES)

    folder = Path(folder)
    if (folder / "tokenizer.json").is_file():
        try:
            from tokenizers import Tokenizer

            return Tokenizer.from_str(read("tokenizer.json")).get_vocab(with_added_tokens=True)
        except Exception:  # noqa: BLE001 - a tokenizer file this library cannot read: the loader will say why
            return None
    if (folder / "vocab.json").is_file():
        try:
            vocab = dict(json.loads(read("vocab.json")))
            if (folder / "added_tokens.json").is_file():
                vocab.update(json.loads(read("added_tokens.json")))
        except (OSError, ValueError, TypeError, RecursionError):
            return None
        return vocab if all(isinstance(i, int) for i in vocab.values()) else None
    return None


def vocab_mismatch(policy: dict[str, int], reference: dict[str, int], policy_name: str, ref_name: str) -> str | None:
    """The problem, naming both models, when a token of the policy's vocabulary has another id in the reference's,
    or is missing there while the reference has another token at its id; None when each id the reference knows
    stands for the same token (tokens added after the reference's last id, such as a template's, are no problem,
    nor are tokens only the reference has)."""
    last = max(reference.values(), default=-1)
    differing = [(token, i) for token, i in policy.items()
                 if reference.get(token) != i and (token in reference or i <= last)]
    if not differing:
        return None
    differing.sort(key=lambda pair: pair[1])
    examples = ", ".join(
        f"{token!r} is id {i} in `{policy_name}` and " + (f"id {reference[token]}" if token in reference else "none")
        + f" in `{ref_name}`" for token, i in differing[:SHOWN])
    return (f"`ref_model: {ref_name}` has another vocabulary than the model being trained (`model_name_or_path: "
            f"{policy_name}`): {len(differing)} of its {len(policy)} tokens have another id or none in the "
            f"reference ({examples}), so the reference would score the wrong tokens. Give a reference model with "
            "the same tokenizer (the same family, e.g. the base or the SFT model you start from), or remove "
            "`ref_model` to use the model's own frozen weights.")


def too_few_rows(rows: int, tokens: int, policy_name: str, ref_name: str) -> str | None:
    """The problem when the reference's embedding table (``rows``) has no row for some of the policy's ``tokens``."""
    if rows >= tokens:
        return None
    return (f"`ref_model: {ref_name}` has {rows} token embeddings, but the tokenizer of `model_name_or_path: "
            f"{policy_name}` has {tokens} tokens (with those the template or `add_tokens` / `add_special_tokens` "
            f"add), so the reference cannot score ids {rows} and above. Remove `ref_model` to use the model's own "
            "frozen weights (which gain those rows), or give a reference whose embeddings cover them.")


def ref_vocab_problems(policy_name: str, ref_name: str, cache_dir: str | None = None) -> list[str]:
    """Pre-flight: the reference's saved tokenizer against the policy's, where both are here to read (a model that is
    not, such as a demo model not yet built, is checked when it loads: :func:`vocab_mismatch`)."""
    folders = [local_folder(name, cache_dir) for name in (policy_name, ref_name)]
    if None in folders or folders[0].resolve() == folders[1].resolve():
        return []
    policy, reference = (tokenizer_vocab(folder) for folder in folders)
    if policy is None or reference is None:
        return []
    problem = vocab_mismatch(policy, reference, policy_name, ref_name)
    return [problem] if problem else []


def local_folder(name: str, cache_dir: str | None = None) -> Path | None:
    """The local folder holding model ``name`` when it is here without downloading or building anything: a folder,
    the built-in demo models once built, or a hub id's snapshot in the Hugging Face cache."""
    text = str(name or "").strip()
    if is_demo_name(text):
        return built_demo_folder(text)
    path = Path(text).expanduser()
    if path.is_dir():
        return path
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(text, "config.json", cache_dir=cache_dir)
    except Exception:  # noqa: BLE001 - not a hub id, or no hub library: nothing cached to read
        return None
    return Path(cached).parent if isinstance(cached, str) else None
