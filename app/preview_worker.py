"""Dataset preview in a short-lived subprocess, so that the board process never imports torch or transformers.

Usage: ``python -m app.preview_worker CONFIG.yaml OUT.json [N]``. Loads the model's tokenizer and template as
the engine would for training, calls ``engine.data.preview.preview_dataset`` and writes its result as JSON.
On a user error it writes ``{"error": message}`` and exits 2.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def load_tokenizer(cfg: Any) -> Any:
    """The tokenizer of the config's model (the engine's loader when present, else transformers directly)."""
    try:
        from engine.models.loader import load_tokenizer as engine_load_tokenizer
    except ImportError:
        engine_load_tokenizer = None
    if engine_load_tokenizer is not None:
        loaded = engine_load_tokenizer(cfg.model)
        return loaded[0] if isinstance(loaded, tuple) else loaded
    from transformers import AutoTokenizer

    path = cfg.model.model_name_or_path
    if path == "demo":
        from engine.demo import ensure_demo_model

        path = str(ensure_demo_model())
    return AutoTokenizer.from_pretrained(
        path, trust_remote_code=cfg.model.trust_remote_code, use_fast=cfg.model.use_fast_tokenizer
    )


def run(config_path: str, n: int) -> dict[str, Any]:
    from engine.config import load_config
    from engine.data.preview import preview_dataset
    from engine.templates import get_template

    cfg = load_config(config_path)
    tokenizer = load_tokenizer(cfg)
    template = get_template(
        cfg.model.template,
        tokenizer,
        enable_thinking=cfg.data.enable_thinking,
        default_system=cfg.data.default_system,
        tool_format=cfg.data.tool_format,
        preserve_thinking=cfg.data.preserve_thinking,
    )
    return preview_dataset(cfg.data, cfg.finetuning.stage, tokenizer, template, n=n, media=media_context_of(cfg, tokenizer))


def media_context_of(cfg: Any, tokenizer: Any) -> Any:
    """The model's media context (plugin + processor) for soft-token counts, or None for a text-only model.

    A vision-language model whose media setup fails (no plugin, no processor files) previews without the counts;
    training reports the problem with its fix.
    """
    from engine.multimodal import media_context
    from engine.multimodal.errors import MediaError

    try:
        return media_context(cfg, tokenizer)
    except MediaError:
        return None


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    config_path, out_path = argv[0], Path(argv[1])
    n = int(argv[2]) if len(argv) > 2 else 5
    try:
        result = run(config_path, n)
        code = 0
    except ImportError as err:
        result, code = {"error": f"The dataset preview needs an engine part that is missing: {err}"}, 2
    except Exception as err:  # reported to the page; the traceback stays in the worker's log
        from engine.config import ConfigError
        from engine.errors import UserError

        if not isinstance(err, (ConfigError, UserError, ValueError, FileNotFoundError)):
            raise
        result, code = {"error": str(err)}, 2
    out_path.write_text(json.dumps(result, ensure_ascii=False, default=str), encoding="utf-8")
    return code


def entry() -> int:
    """``python -m app.preview_worker``: a short process, so the collector stays paused for all of it
    (``engine.collector``)."""
    from engine import collector

    return collector.run_command(main)


if __name__ == "__main__":
    raise SystemExit(entry())
