"""A job's tokenizer and template, loaded together: the template fixes the tokenizer (stop words, pad), and a run
whose tokenizer gained tokens gets its embeddings resized. Used by every job and by `lf-engine data` (no model)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def load_text_components(cfg: Any) -> tuple[Any, Any]:
    """Tokenizer and template for ``cfg``; turns ``cfg.model.resize_vocab`` on when tokens were added."""
    from engine.models.loader import load_tokenizer
    from engine.templates import get_template

    tokenizer = load_tokenizer(cfg.model)
    template = get_template(cfg.model.template, tokenizer)
    if template.fix_tokenizer(tokenizer) and not cfg.model.resize_vocab:
        logger.warning("The template added special tokens to the tokenizer; the embeddings are resized to match.")
        cfg.model.resize_vocab = True
    if getattr(tokenizer, "lf_added_tokens", 0) and not cfg.model.resize_vocab:
        logger.warning("New tokens were added to the tokenizer; the embeddings are resized to match.")
        cfg.model.resize_vocab = True
    return tokenizer, template
