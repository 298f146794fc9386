"""Prediction (``do_predict``) on rows with media: the prompts carry their images, videos and audio.

:func:`media_prompt_row` turns an evaluation row into a prediction row whose ``prompt_ids`` hold the expanded soft
tokens and whose ``mm_inputs`` hold the processed media (as in training, processed once);
:func:`batch_media_inputs` gives ``generate`` the media of a left-padded batch, in row order, with the token-type
ids padded on the left like the prompts (and, for Llama 3.2 Vision, the prompts' cross-attention mask).
"""

from __future__ import annotations

import logging
from typing import Any

from engine.multimodal.errors import MediaError
from engine.multimodal.plugins import soft_token_ids

logger = logging.getLogger(__name__)


def media_prompt_row(example: dict[str, Any], messages: list[dict[str, Any]], tokenizer: Any, template: Any,
                     ctx: Any, cutoff_len: int, index: int = 0) -> dict[str, Any]:
    """``prompt_ids`` (soft tokens expanded), ``mm_inputs`` and the token-type ids of one prediction prompt.

    A prompt longer than ``cutoff_len`` keeps its end, as text prompts do, unless that would cut its media: then it
    is kept whole (with a warning), since soft tokens without their features cannot be generated from.

    Raises:
        MediaError: naming the dataset and row, for media that cannot be used.
    """
    try:
        expanded, arrays = ctx.plugin.process(ctx.processor, messages, example.get("images") or [],
                                              example.get("videos") or [], example.get("audios") or [], ctx.options)
    except MediaError as err:
        where = f"dataset `{example.get('_dataset', '?')}` row {example.get('_row', index)}"
        raise MediaError(f"{where}: {err}") from None
    prompt_ids = ctx.plugin.prefix_ids(ctx.processor, len(example.get("images") or [])) + template.encode_prompt(
        tokenizer, expanded, example.get("system"), example.get("tools"))  # PaliGemma's image tokens open the prompt
    soft = soft_token_ids(ctx.processor)
    cut = prompt_ids[-cutoff_len:]
    if sum(token in soft for token in cut) == sum(token in soft for token in prompt_ids):
        prompt_ids = cut
    else:
        logger.warning("Prediction prompt %d is longer than cutoff_len=%d with its media; it is kept whole so that "
                       "its images, videos or audio stay complete.", index, cutoff_len)
    row: dict[str, Any] = {"prompt_ids": prompt_ids, "mm_inputs": arrays}
    cross = ctx.plugin.cross_attention(ctx.processor)
    if cross is not None:  # Llama 3.2 Vision: the batch builds the prompts' cross-attention mask
        row["cross_attention"] = cross
    flags = ctx.plugin.batch_flags(ctx.options, ctx.processor)
    if flags:  # Qwen-Omni's use_audio_in_video: generate() is told, as training's forward is
        row["flags"] = flags
    if ctx.plugin.type_ids_key:
        row["mm_type_ids"] = (ctx.plugin.type_ids_key, ctx.plugin.type_ids(ctx.processor, prompt_ids))
    tables = ctx.plugin.extra_type_ids(ctx.processor)
    if tables:  # ERNIE-4.5-VL's moe_mm_token_type_ids, built on the padded batch
        row["mm_extra_types"] = tables
    return row


def batch_media_inputs(rows: list[dict[str, Any]], width: int, device: Any, dtype: Any) -> dict[str, Any]:
    """Extra ``generate`` inputs for a left-padded batch of prediction rows ({} when none carries media)."""
    import torch

    from engine.multimodal.collator import batch_media, extra_typed, to_tensors

    cross = next((row["cross_attention"] for row in rows if row.get("cross_attention")), None)
    arrays = batch_media([row.get("mm_inputs") or {} for row in rows], cross, [row["prompt_ids"] for row in rows],
                         width, left=True)
    extra: dict[str, Any] = {}
    for row in rows:
        extra.update(row.get("flags") or {})
    for key, value in to_tensors(arrays).items():
        value = value.to(device)
        extra[key] = value.to(dtype) if value.is_floating_point() else value
    typed = [row.get("mm_type_ids") for row in rows]
    key = next((item[0] for item in typed if item), None)
    if key is not None:
        padded = []
        for row, item in zip(rows, typed):
            ids = list(item[1]) if item else [0] * len(row["prompt_ids"])
            padded.append([0] * (width - len(ids)) + ids)
        extra[key] = torch.tensor(padded, dtype=torch.long, device=device)
    tables = next((row["mm_extra_types"] for row in rows if row.get("mm_extra_types")), None)
    if tables:
        ids = torch.tensor([[-1] * (width - len(row["prompt_ids"])) + list(row["prompt_ids"]) for row in rows],
                           dtype=torch.long, device=device)
        extra.update(extra_typed(tables, ids))
    return extra
