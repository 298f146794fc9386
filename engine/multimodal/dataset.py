"""Tokenizing rows with media: placeholders expanded, media processed once, soft tokens labelled as LLaMA-Factory does.

Each supervised row becomes ``input_ids``, ``labels``, ``attention_mask``, the model's token-type ids
(``mm_token_type_ids``: 0 text, 1 image, 2 video, 3 audio) and ``mm_inputs``: the processed media (pixel values,
grids, audio features) as one ``.npz`` blob. The blob is stored with the tokenized rows (and with them in
``tokenized_path``), so media are decoded and processed once, never again per training step.

A row cut by ``cutoff_len`` inside its media would leave soft tokens without features (or the reverse): such a
row is dropped and counted, with a warning to raise ``cutoff_len``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from engine.data.tokenize import (
    IGNORE,
    TokenizeOptions,
    check_options,
    cutoff_phrase,
    encode_pairs,
    new_stats,
    sft_row,
)
from engine.multimodal.errors import MediaError
from engine.multimodal.plugins import MediaPlugin, pack_arrays, soft_token_ids
from engine.multimodal.processor import MediaOptions
from engine.wording import counted, was_were

logger = logging.getLogger(__name__)

MEDIA_COLUMNS = ("images", "videos", "audios")
MEDIA_STAGES = ("sft", "dpo", "kto")
TEXT_ONLY_PREF_LOSSES = ("orpo", "simpo")  # TRL's experimental trainers behind them re-tokenize text only


@dataclass
class MediaContext:
    """What the multimodal data path needs: the family's plugin, the processor and the media options."""

    plugin: MediaPlugin
    processor: Any
    options: MediaOptions


def has_media(example: dict[str, Any]) -> bool:
    """Whether a converted row carries images, videos or audio."""
    return any(example.get(kind) for kind in MEDIA_COLUMNS)


def _where(example: dict[str, Any], index: int) -> str:
    return f"dataset `{example.get('_dataset', '?')}` row {example.get('_row', index)}"


def tokenize_media_sft(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions,
                       ctx: MediaContext, batches: list[tuple[int, int]] | None = None,
                       ) -> tuple[dict[str, list], dict[str, int]]:
    """Supervised rows with media (rows without media pass through the same path, with no features); with
    ``opts.packing``, packed within each ``(start, end)`` of ``batches`` over the examples (LLaMA-Factory's
    preprocessing batches; None: one batch), see :mod:`engine.multimodal.packing`.

    Raises:
        MediaError: naming the dataset, row and fix, for a row whose media cannot be used.
    """
    check_options(template, opts)
    eos_id = tokenizer.eos_token_id if template.uses_efficient_eos else None
    stats = new_stats(len(examples))
    stats["media_dropped"] = 0
    soft = soft_token_ids(ctx.processor)
    columns: dict[str, list] = {"input_ids": [], "labels": [], "attention_mask": [], "mm_inputs": []}
    origins: list[int] = []  # each kept row's example index
    if ctx.plugin.type_ids_key:
        columns["mm_token_type_ids"] = []
    for index, example in enumerate(examples):
        try:
            messages, arrays = ctx.plugin.process(ctx.processor, example["messages"], example.get("images") or [],
                                                  example.get("videos") or [], example.get("audios") or [],
                                                  ctx.options)
        except MediaError as err:
            raise MediaError(f"{_where(example, index)}: {err}") from None
        pairs = encode_pairs(tokenizer, template, {**example, "messages": messages}, opts)
        prefix = ctx.plugin.prefix_ids(ctx.processor, len(example.get("images") or []))
        input_ids, labels, truncated = sft_row(pairs, opts, eos_id, prefix)
        stats["truncated"] += truncated
        expected = len(prefix) + sum(token in soft for prompt, response in pairs for token in prompt + response)
        if truncated and sum(token in soft for token in input_ids) != expected:
            stats["dropped"] += 1
            stats["media_dropped"] += 1
            continue
        # the media tokens are labelled as the text around them is, as in LLaMA-Factory: masked in the prompt,
        # trained with `train_on_prompt: true`
        if opts.packing and len(input_ids) > opts.cutoff_len:  # longer ones: dropped, as LLaMA-Factory drops them
            stats["dropped"] += 1
            continue
        if labels.count(IGNORE) == len(labels):
            stats["untrained"] = stats.get("untrained", 0) + 1  # kept even so, as LLaMA-Factory keeps it
        origins.append(index)
        columns["input_ids"].append(input_ids)
        columns["labels"].append(labels)
        columns["attention_mask"].append([1] * len(input_ids))
        columns["mm_inputs"].append(pack_arrays(arrays))
        if ctx.plugin.type_ids_key:
            columns["mm_token_type_ids"].append(ctx.plugin.type_ids(ctx.processor, input_ids))
        stats["total_tokens"] += len(input_ids)
        stats["trainable_tokens"] += sum(label != IGNORE for label in labels)
        stats["media_tokens"] = stats.get("media_tokens", 0) + sum(token in soft for token in input_ids)
    if stats["media_dropped"]:
        dropped = stats["media_dropped"]
        logger.warning("%s %s dropped because %s cut through their images, videos or audio; "
                       "raise cutoff_len (or lower image_max_pixels / video_maxlen) to keep %s.",
                       counted(dropped, "row"), was_were(dropped), cutoff_phrase(opts), "it" if dropped == 1 else "them")
    if opts.packing:
        from engine.multimodal.packing import pack_in_batches

        columns = pack_in_batches(columns, origins, batches or [(0, len(examples))], opts.cutoff_len,
                                  mask_first=opts.mask_packed_starts)
        stats["packed_sequences"] = len(columns["input_ids"])
    stats["kept"] = len(columns["input_ids"])
    return columns, stats


def stage_problem(stage: str, pref_loss: str | None = None) -> str | None:
    """Why ``stage`` (with ``pref_loss``) cannot train on rows with media, with the fix; None when it can."""
    if stage not in MEDIA_STAGES:
        return (f"`stage: {stage}` does not train on images, videos or audio (sft, dpo and kto do); use one of those "
                "stages, or a dataset without media columns.")
    if stage == "dpo" and pref_loss in TEXT_ONLY_PREF_LOSSES:
        return (f"`pref_loss: {pref_loss}` trains on text only (TRL's ORPO/CPO trainers re-tokenize the text), so it "
                "cannot use the images, videos or audio of this data; use `pref_loss: sigmoid` (DPO), hinge or ipo, "
                "or `stage: kto`.")
    return None


def check_stage(stage: str, examples: list[dict], pref_loss: str | None = None) -> None:
    """Refuse stages (and preference losses) that cannot train on media, naming the fix."""
    if not any(has_media(example) for example in examples):
        return
    problem = stage_problem(stage, pref_loss)
    if problem:
        raise MediaError(problem)
