"""Before a run: the named tokens a template writes (``{token:[gMASK]}``: ChatGLM3, Yuan) against a model folder's
tokenizer files, read as JSON (nothing is loaded), so a missing one is reported before the model loads."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

MAX_TOKENIZER_BYTES = 512 << 20
"""The largest tokenizer file read here (the largest real tokenizer.json files hold a few tens of MB)."""


def missing_template_tokens(model_args: Any, folder: Path) -> list[str]:
    """A template that writes named tokens (``{token:[gMASK]}``) needs them in the tokenizer, which tokenizing would
    find only after the model loads. Read from a local folder's tokenizer.json (other tokenizer files are left to
    that later check); a token added by ``add_special_tokens`` / ``add_tokens``, or an unk token (which the template
    then writes, as LLaMA-Factory does) lets it pass."""
    if not model_args.template or not (folder / "tokenizer.json").is_file():
        return []
    from engine.templates import get_template
    from engine.templates.slots import token_slots

    names = token_slots(get_template(model_args.template))
    if not names:
        return []

    from engine.models.registry import read_config_text

    def read(name: str) -> dict:
        try:  # the board checks in its own process: no pipe waited on, no sparse file of gigabytes read whole
            data = json.loads(read_config_text(folder / name, max_bytes=MAX_TOKENIZER_BYTES))
        except (OSError, ValueError, RecursionError):
            return {}  # absent, unreadable or too large: the tokenizer's own load reports that
        return data if isinstance(data, dict) else {}

    configs = [read(name) for name in ("tokenizer_config.json", "special_tokens_map.json")]
    if any(config.get("unk_token") for config in configs):
        return []  # transformers gives the unk token for a missing one
    data = read("tokenizer.json")
    if not data:  # unreadable or too large: the tokenizer's own load reports it, not as missing tokens
        return []
    model = data.get("model") or {}
    vocab = model.get("vocab") or {}
    known = set(vocab) if isinstance(vocab, dict) else {entry[0] for entry in vocab if isinstance(entry, list) and entry}
    added = list(data.get("added_tokens") or [])
    for config in configs:  # tokens transformers adds when it loads the tokenizer
        extra = config.get("extra_special_tokens")  # transformers 5; 4's name only where 5's is absent
        extra = config.get("additional_special_tokens") if extra is None else extra
        added += list(extra.values() if isinstance(extra, dict) else extra if isinstance(extra, list) else [])
        decoder = config.get("added_tokens_decoder")
        added += list(decoder.values()) if isinstance(decoder, dict) else []
        added += [config.get(f"{name}_token") for name in ("bos", "eos", "pad", "sep", "cls", "mask")]
    for token in added:
        token = token.get("content") if isinstance(token, dict) else token
        if isinstance(token, str):
            known.add(token)
    for key in ("add_special_tokens", "add_tokens"):
        known |= {token.strip() for token in str(getattr(model_args, key, None) or "").split(",") if token.strip()}
    missing = sorted(names - known)
    if not missing:
        return []
    return [f"`template: {model_args.template}` writes {', '.join(repr(name) for name in missing)} as single tokens, "
            f"and the tokenizer of {folder} has no such token: use the model's own template (or leave `template` "
            "empty for its chat template), or a model whose tokenizer has them."]
