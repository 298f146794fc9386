"""Secrets (hub tokens, the chat server's API key) come from the environment and never reach a run folder or log.

- A config may still carry LLaMA-Factory's ``hf_hub_token`` / ``ms_hub_token`` / ``om_hub_token`` /
  ``swanlab_api_key`` or Hugging Face's ``hub_token``: :func:`take_secrets` takes them out of the mapping before it
  is validated, so they are never part of the typed config and therefore never written to config.yaml,
  lf_config.yaml, a checkpoint or training_args.bin. The engine then uses them through the environment variable the hub library reads
  (:func:`export_secrets`), and the note it prints names the variable to set instead.
- :class:`RedactingFilter` masks every secret value (from the variables below) in log records, the run folder's
  JSON writers (run.json, events.jsonl) mask them in what they write, and :func:`install_stream_redaction` masks
  them in what the process prints (user code such as a reward function may print or raise with one).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, MutableMapping
from typing import Any

API_KEY_ENV = "LF_ENGINE_API_KEY"
"""The bearer key the chat server (``lf-engine api``) requires; the board passes a per-worker one here."""
LF_API_KEY_ENV = "API_KEY"
"""LLaMA-Factory's name for the same setting, honoured when ``LF_ENGINE_API_KEY`` is unset."""

SECRET_KEYS: dict[str, str] = {
    "hf_hub_token": "HF_TOKEN",
    "hub_token": "HF_TOKEN",
    "ms_hub_token": "MODELSCOPE_API_TOKEN",
    "om_hub_token": "MODELERS_API_TOKEN",
    "swanlab_api_key": "SWANLAB_API_KEY",
}
"""Config keys that hold a secret -> the environment variable to put it in instead."""

SECRET_ENV_VARS = (API_KEY_ENV, LF_API_KEY_ENV, "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "MODELSCOPE_API_TOKEN",
                   "MODELERS_API_TOKEN", "WANDB_API_KEY", "SWANLAB_API_KEY", "LF_BOARD_AUTH")
MASK = "***"


def api_key_from_env(environ: Mapping[str, str] | None = None) -> str | None:
    """The API key from ``LF_ENGINE_API_KEY`` (or LLaMA-Factory's ``API_KEY``); None when neither is set."""
    environ = os.environ if environ is None else environ
    return (environ.get(API_KEY_ENV) or environ.get(LF_API_KEY_ENV) or "").strip() or None


def secret_problems(mapping: Mapping[str, Any]) -> list[str]:
    """Secret keys set to something that is not a token (a list, a number, ``true``), or two keys for the same
    variable set to different tokens (which one was meant?). The messages never show a value."""
    problems: list[str] = []
    seen: dict[str, tuple[str, str]] = {}
    for key, value in mapping.items():
        env = SECRET_KEYS.get(str(key))
        if env is None or value in (None, "", False):
            continue
        if not isinstance(value, str):
            problems.append(f"`{key}` must be the token itself, as text (it is a {type(value).__name__}); or leave it "
                            f"out and set ${env} in the environment.")
            continue
        other = seen.get(env)
        if other is not None and other[1] != value:
            problems.append(f"`{other[0]}` and `{key}` are both set, to different tokens, and both would go to ${env}; "
                            "keep one.")
        seen.setdefault(env, (str(key), value))
    return problems


def take_secrets(mapping: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    """Split secret keys off a flat config mapping.

    Returns:
        (the mapping without them, {environment variable: value}, notes naming the variable to use instead).
    """
    clean: dict[str, Any] = {}
    found: dict[str, str] = {}
    notes: list[str] = []
    for key, value in mapping.items():
        env = SECRET_KEYS.get(str(key))
        if env is None:
            clean[key] = value
            continue
        if value not in (None, "", False):
            found.setdefault(env, str(value))
        notes.append(f"`{key}` is a secret: it is used for this run but never saved with it; set ${env} in the "
                     "environment instead of writing it into a config.")
    return clean, found, notes


SECRET_OPTIONS = ("--api-key",)
"""Command-line options whose value is a secret (``lf-engine api --api-key KEY``)."""


def masked_argv(argv: list[str]) -> list[str]:
    """A command line as a run folder may record it: the value of each ``key=value`` override of a secret key
    (``hf_hub_token=...``, also written ``--hf_hub_token=...``) and of each :data:`SECRET_OPTIONS` option is ``***``.
    Such a token is used from the environment only when no variable of its own is set, so masking the variables'
    values alone would have kept it in run.json's ``command``."""
    masked: list[str] = []
    hide_next = False
    for item in map(str, argv):
        if hide_next:
            masked.append(MASK)
            hide_next = False
            continue
        name, sep, _ = item.partition("=")
        if item in SECRET_OPTIONS:
            hide_next = True
        elif sep and (name.strip().lstrip("-") in SECRET_KEYS or name in SECRET_OPTIONS):
            item = f"{name}={MASK}"
        masked.append(item)
    return masked


def export_secrets(found: Mapping[str, str], environ: MutableMapping[str, str] | None = None) -> None:
    """Put secrets taken from a config into the environment (a variable the user set already wins)."""
    environ = os.environ if environ is None else environ
    for name, value in found.items():
        environ.setdefault(name, value)


def secret_values(environ: Mapping[str, str] | None = None) -> list[str]:
    """The values of the secret variables now set (longest first; short ones are too common to mask)."""
    environ = os.environ if environ is None else environ
    values = {environ.get(name, "") for name in SECRET_ENV_VARS}
    auth = environ.get("LF_BOARD_AUTH", "")
    if ":" in auth:
        values.add(auth.split(":", 1)[1])
    return sorted((v for v in values if len(v) >= 6), key=len, reverse=True)


def redact(text: str, values: list[str] | None = None) -> str:
    """``text`` with every secret value replaced by ``***``."""
    for value in secret_values() if values is None else values:
        if value in text:
            text = text.replace(value, MASK)
    return text


class RedactingFilter(logging.Filter):
    """Masks secret values in log records (message and arguments are formatted first)."""

    def filter(self, record: logging.LogRecord) -> bool:
        values = secret_values()
        if values:
            message = record.getMessage()
            cleaned = redact(message, values)
            if cleaned != message:
                record.msg, record.args = cleaned, None
        return True


def install_log_redaction(logger: logging.Logger | None = None) -> None:
    """Add :class:`RedactingFilter` to every handler of ``logger`` (the root logger by default), once."""
    logger = logger or logging.getLogger()
    for handler in logger.handlers:
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter())


class RedactingStream:
    """A text stream that masks secret values in what is written to it; everything else goes to the stream it
    wraps (a value split across two writes is not caught)."""

    def __init__(self, stream: Any):
        self._stream = stream

    def write(self, text: str) -> int:
        values = secret_values()
        self._stream.write(redact(text, values) if values and isinstance(text, str) else text)
        return len(text)

    def writelines(self, lines: Any) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def install_stream_redaction() -> None:
    """Wrap ``sys.stdout`` and ``sys.stderr`` in :class:`RedactingStream` (once)."""
    import sys

    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if stream is not None and not isinstance(stream, RedactingStream):
            setattr(sys, name, RedactingStream(stream))
