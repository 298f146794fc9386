"""Generation settings shared by chat, the API server and batch prediction.

Turns the config's :class:`~engine.config.GenerationArgs` (plus per-request overrides) into keyword arguments for
``model.generate``, and collects the token ids that end a reply (the tokenizer's EOS and the template's stop words).
"""

from __future__ import annotations

import logging
from typing import Any

from engine.config import GenerationArgs, RunConfig
from engine.wording import counted

# Per-request settings a caller may override, mapped to the type each must have.
OVERRIDABLE = {
    "do_sample": bool,
    "temperature": float,
    "top_p": float,
    "top_k": int,
    "max_new_tokens": int,
    "repetition_penalty": float,
    "num_beams": int,
    "length_penalty": float,
}
_SAMPLING_ONLY = ("temperature", "top_p", "top_k")

logger = logging.getLogger(__name__)


def template_for(cfg: RunConfig, tokenizer: Any) -> Any:
    """The prompt template a config asks for, with its run options, after fixing the tokenizer's EOS/PAD.

    Args:
        cfg: The run config (``template``, ``enable_thinking``, ``default_system``, ``tool_format``,
            ``preserve_thinking``).
        tokenizer: The model's tokenizer; ``fix_tokenizer`` may set its EOS and PAD tokens.

    Returns:
        The template (``engine.templates.Template``).
    """
    from engine.templates import get_template

    template = get_template(
        cfg.model.template, tokenizer, enable_thinking=cfg.data.enable_thinking,
        default_system=cfg.data.default_system, tool_format=cfg.data.tool_format,
        preserve_thinking=cfg.data.preserve_thinking,  # LLaMA-Factory's chat engines too (template.py:663)
    )
    added = template.fix_tokenizer(tokenizer)
    if added:
        logger.info("The template added %s to the tokenizer; the model's embeddings are resized to match.",
                    counted(added, "token"))
    return template


def stop_token_ids(template: Any, tokenizer: Any) -> list[int]:
    """Token ids that end a reply: the tokenizer's EOS followed by the template's stop words, without repeats.

    Args:
        template: The prompt template (``engine.templates.Template``).
        tokenizer: The tokenizer the ids belong to.

    Returns:
        The ids in order; empty only when neither the tokenizer nor the template names any.
    """
    ids: list[int] = []
    eos = getattr(tokenizer, "eos_token_id", None)
    candidates = [eos] if isinstance(eos, int) else list(eos or [])
    candidates += list(template.get_stop_token_ids(tokenizer) or [])
    for token_id in candidates:
        if isinstance(token_id, int) and token_id >= 0 and token_id not in ids:
            ids.append(token_id)
    return ids


def generation_kwargs(
    gen: GenerationArgs,
    eos_token_ids: list[int],
    pad_token_id: int | None,
    overrides: dict[str, Any] | None = None,
    *,
    allow_beams: bool = True,
) -> dict[str, Any]:
    """Keyword arguments for ``model.generate`` from the config plus overrides.

    ``do_sample: false`` (or a temperature of 0) means greedy decoding: the sampling settings are then left out,
    so transformers does not warn about settings it ignores.

    Args:
        gen: The generation section of the config.
        eos_token_ids: Ids that end generation (see :func:`stop_token_ids`).
        pad_token_id: The padding id (falls back to the first EOS id).
        overrides: Per-request values for keys in :data:`OVERRIDABLE`; ``None`` values are ignored.
        allow_beams: False where a streamer is used (beam search cannot stream): ``num_beams`` is then forced to 1.

    Returns:
        The keyword arguments.

    Raises:
        ValueError: For an unknown override or a value of the wrong type or range.
    """
    settings = {name: getattr(gen, name) for name in OVERRIDABLE}
    for name, value in (overrides or {}).items():
        if value is None:
            continue
        if name not in OVERRIDABLE:
            raise ValueError(f"Unknown generation setting `{name}`; use one of {', '.join(OVERRIDABLE)}.")
        settings[name] = _coerce(name, value)
    if settings["temperature"] <= 0:
        settings["do_sample"] = False
    kwargs: dict[str, Any] = {
        "do_sample": settings["do_sample"],
        "max_new_tokens": settings["max_new_tokens"],
        "repetition_penalty": settings["repetition_penalty"],
        "num_beams": settings["num_beams"] if allow_beams else 1,
        "eos_token_id": list(eos_token_ids) or None,
        "pad_token_id": pad_token_id if pad_token_id is not None else (eos_token_ids[0] if eos_token_ids else None),
        "use_cache": True,
    }
    if kwargs["num_beams"] > 1:
        kwargs["length_penalty"] = settings["length_penalty"]
    if settings["do_sample"]:
        kwargs.update({name: settings[name] for name in _SAMPLING_ONLY})
    else:
        # Neutral values, so that sampling settings stored in the model's own generation config do not trigger
        # "set but ignored" warnings during greedy decoding.
        kwargs.update({"temperature": 1.0, "top_p": 1.0, "top_k": 50})
    return kwargs


def _coerce(name: str, value: Any) -> Any:
    kind = OVERRIDABLE[name]
    if kind is bool:
        if not isinstance(value, bool):
            raise ValueError(f"`{name}` must be true or false, not {value!r}.")
        return value
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{name}` must be a number, not {value!r}.")
    if kind is int:
        if float(value) != int(value):
            raise ValueError(f"`{name}` must be a whole number, not {value!r}.")
        value = int(value)
    else:
        value = float(value)
    if name in ("max_new_tokens", "num_beams") and value < 1:
        raise ValueError(f"`{name}` must be at least 1, not {value}.")
    if name == "top_p" and not 0 < value <= 1:
        raise ValueError(f"`top_p` must be in (0, 1], not {value}.")
    if name in ("top_k", "temperature") and value < 0:
        raise ValueError(f"`{name}` must not be negative, not {value}.")
    if name == "repetition_penalty" and value <= 0:
        raise ValueError(f"`repetition_penalty` must be positive, not {value}.")
    return value
