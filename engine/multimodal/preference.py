"""Preference data with media: DPO (pairwise) and KTO rows whose prompts carry images, videos or audio.

As in LLaMA-Factory, the media placeholders belong to the prompt: the plugin expands them there (soft-token counts
from the processor), the media are processed once at dataset-map time and stored with the row as an ``mm_inputs``
blob, and the replies are tokenized as for text rows (``engine.data.tokenize.prompt_and_reply``). A row whose
prompt would be cut inside its media by ``cutoff_len`` is dropped and counted, like a supervised one (a KTO row then
stays as a stand-in for the KL pairs, as do the KTO rows skipped in conversion: :mod:`engine.data.kl_stand_ins`).

:class:`MediaPreferenceCollator` batches these rows for TRL's DPO and KTO trainers: TRL's own text collator builds
``input_ids``/``attention_mask``/``completion_mask`` (DPO: the chosen rows, then the rejected rows; KTO: the rows
and their KL counterparts), and the collator adds the media inputs in the same row order and the token-type ids.
Soft tokens never count as completion tokens, so they never carry loss.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

from engine.data.tokenize import TokenizeOptions, cutoff_phrase, infer_seqlen, new_stats, prompt_and_reply
from engine.multimodal.cross_attention import CrossAttention
from engine.multimodal.errors import MediaError
from engine.multimodal.plugins import PLACEHOLDERS, pack_arrays, soft_token_ids, unpack_arrays
from engine.wording import counted, was_were

logger = logging.getLogger(__name__)


def _where(example: dict[str, Any], index: int) -> str:
    return f"dataset `{example.get('_dataset', '?')}` row {example.get('_row', index)}"


def _check_replies(example: dict[str, Any], replies: list[dict[str, Any]], where: str) -> None:
    for reply in replies:
        content = str(reply.get("content") or "")
        tags = [tag for tag in PLACEHOLDERS.values() if tag in content]
        if tags:
            raise MediaError(f"{where}: the reply contains {', '.join(tags)}; media placeholders belong in the "
                             "prompt (the user turns) of preference and KTO data. Move them there.")


def _expanded_prompt(example: dict[str, Any], ctx: Any, where: str) -> tuple[list[dict[str, Any]], bytes]:
    try:
        messages, arrays = ctx.plugin.process(ctx.processor, example["messages"], example.get("images") or [],
                                              example.get("videos") or [], example.get("audios") or [], ctx.options)
    except MediaError as err:
        raise MediaError(f"{where}: {err}") from None
    return messages, pack_arrays(arrays)


def tokenize_media_preference(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions, ctx: Any,
                              stage: str) -> tuple[dict[str, list], dict[str, int]]:
    """DPO (``stage: dpo``) or KTO (``stage: kto``) columns plus ``mm_inputs``, for rows with or without media.

    Raises:
        MediaError: naming the dataset, row and fix, for a row whose media cannot be used.
    """
    if opts.keep_prompt_end:
        raise MediaError("`keep_prompt_end` keeps the end of long prompts, which would cut their images, videos or "
                         "audio; set keep_prompt_end: false for multimodal preference data.")
    stats = new_stats(len(examples))
    stats["media_dropped"] = 0
    soft = soft_token_ids(ctx.processor)
    replies = ("chosen_ids", "rejected_ids") if stage == "dpo" else ("completion_ids",)
    columns: dict[str, list] = {"prompt_ids": [], **{name: [] for name in replies}, "mm_inputs": []}
    if stage == "kto":
        from engine.data.kl_stand_ins import KEY
        from engine.data.kto_pairs import SOURCE_COLUMNS, reply_block, source_columns

        columns.update({"label": [], **{name: [] for name in SOURCE_COLUMNS}, KEY: []})
    for index, example in enumerate(examples):
        where = _where(example, index)
        if stage == "kto" and example.get(KEY):  # a skipped row, kept for the KL pairs (engine.data.kl_stand_ins)
            _add_stand_in(columns, example, tokenizer, template, opts)
            stats["rows"] -= 1  # counted where it was skipped
            continue
        if stage == "kto":
            example = {**example, "messages": example["messages"][:-1], "_reply": [example["messages"][-1]]}
        else:
            example = {**example, "_reply": [example["chosen"], example["rejected"]]}
        _check_replies(example, example["_reply"], where)
        messages, blob = _expanded_prompt(example, ctx, where)
        row = {**example, "messages": messages}
        prompt, first = prompt_and_reply(tokenizer, template, row, example["_reply"][0])
        outputs = [first] + [prompt_and_reply(tokenizer, template, row, reply)[1] for reply in example["_reply"][1:]]
        prompt = ctx.plugin.prefix_ids(ctx.processor, len(example.get("images") or [])) + prompt  # PaliGemma
        longest = max(len(ids) for ids in outputs)
        prompt_keep, reply_keep = infer_seqlen(len(prompt), longest, opts.cutoff_len)
        if prompt_keep < len(prompt) or reply_keep < longest:
            stats["truncated"] += 1
        kept_prompt = prompt[:prompt_keep]
        outputs = [ids[:reply_keep] for ids in outputs]
        if sum(token in soft for token in kept_prompt) != sum(token in soft for token in prompt):
            stats["dropped"] += 1
            stats["media_dropped"] += 1
            if stage == "kto":  # LLaMA-Factory keeps the row, so its reply still takes part in the KL pairs
                from engine.data.kl_stand_ins import stand_in_of_dropped

                _add_stand_in(columns, stand_in_of_dropped({**example, "messages": example["_reply"]}), tokenizer,
                              template, opts)
            continue
        if not reply_keep:  # kept, as LLaMA-Factory keeps it: the row then trains nothing
            stats["untrained"] = stats.get("untrained", 0) + 1
        columns["prompt_ids"].append(kept_prompt)
        for name, ids in zip(replies, outputs):
            columns[name].append(ids)
        columns["mm_inputs"].append(blob)
        if stage == "kto":
            columns[KEY].append(0)
            columns["label"].append(bool(example["kto_tag"]))
            floor = max((at + 1 for at, token in enumerate(prompt) if token in soft), default=0)
            block = reply_block(template, tokenizer, prompt)
            for name, value in source_columns(prompt, first, prompt_keep, reply_keep, opts, floor, block).items():
                columns[name].append(value)
        stats["total_tokens"] += len(kept_prompt) * len(outputs) + sum(len(ids) for ids in outputs)
        stats["trainable_tokens"] += sum(len(ids) for ids in outputs)
        stats["media_tokens"] = stats.get("media_tokens", 0) + sum(token in soft for token in kept_prompt)
        stats["kept"] += 1
    if stats["media_dropped"]:
        dropped = stats["media_dropped"]
        logger.warning("%s %s dropped because %s cut through their images, videos or audio; "
                       "raise cutoff_len (or lower image_max_pixels / video_maxlen) to keep %s.",
                       counted(dropped, "row"), was_were(dropped), cutoff_phrase(opts), "it" if dropped == 1 else "them")
    return columns, stats


def _add_stand_in(columns: dict[str, list], example: dict[str, Any], tokenizer: Any, template: Any,
                  opts: TokenizeOptions) -> None:
    """A stand-in's KTO columns (:func:`engine.data.kl_stand_ins.stand_in_columns`), no media; one whose reply holds
    a media placeholder is marked, since a kept row pairing with it is refused (LLaMA-Factory stops there)."""
    from engine.data.kl_stand_ins import KEY, PLACEHOLDER_REPLY, stand_in_columns

    for name, value in stand_in_columns(example, tokenizer, template, opts).items():
        columns[name].append(value)
    reply = str((example["messages"][-1] if example["messages"] else {}).get("content") or "")
    tagged = example[KEY] == 1 and any(tag in reply for tag in PLACEHOLDERS.values())
    columns[KEY].append(PLACEHOLDER_REPLY if tagged else example[KEY])
    columns["mm_inputs"].append(b"")


def token_types(plugin: Any, processor: Any) -> dict[int, int]:
    """Soft-token id -> token type (1 image, 2 video, 3 audio; PaliGemma: 0 image, text 1) as the plugin defines
    them; the text tokens get ``plugin.text_type_id``."""
    ids = sorted(soft_token_ids(processor))
    if not ids or not plugin.type_ids_key:
        return {}
    return {token: int(kind) for token, kind in zip(ids, plugin.type_ids(processor, ids))
            if int(kind) != plugin.text_type_id}


@dataclass
class MediaPreferenceCollator:
    """TRL's DPO/KTO text collator plus media inputs, token-type ids and soft tokens kept out of the loss.

    Attributes:
        text_collator: TRL's ``DataCollatorForPreference`` (DPO) or ``DataCollatorForUnpairedPreference`` (KTO).
        soft_ids: Ids of the media soft tokens.
        types: Soft-token id -> modality id, for the token-type ids (empty: the model takes none).
        type_ids_key: The model's token-type input (``mm_token_type_ids``; ``token_type_ids`` for Gemma 3).
        pairwise: DPO batches (chosen rows, then rejected rows: the media are repeated for each half).
        cross: A cross-attention model's mask settings (Llama 3.2 Vision): the media go per row, with the
            ``cross_attention_mask`` of the rows (``KL_cross_attention_mask`` of the KTO KL rows), as LLaMA-Factory's
            pairwise and KTO collators give them.
        flags: Keyword arguments every batch carries to the model (Qwen-Omni's ``use_audio_in_video``).
        extra_types: The plugin's further token-type inputs (ERNIE-4.5-VL's ``moe_mm_token_type_ids``), input name ->
            (token id -> type), built for the rows and (``KL_``) their KL rows.
    """

    text_collator: Any
    soft_ids: set[int] = field(default_factory=set)
    types: dict[int, int] = field(default_factory=dict)
    type_ids_key: str | None = "mm_token_type_ids"
    pairwise: bool = True
    text_type: int = 0
    cross: CrossAttention | None = None
    flags: dict[str, Any] = field(default_factory=dict)
    stand_ins: list[Any] | None = None  # multi-process runs: media for batches without (engine.multimodal.stand_in)
    pad_id: int = 0
    extra_types: dict[str, dict[int, int]] = field(default_factory=dict)

    def _type_ids(self, input_ids: Any) -> Any:
        from engine.multimodal.collator import typed_ids

        return typed_ids(self.types, input_ids, text=self.text_type)

    def _unmask_soft(self, batch: dict[str, Any], prefix: str = "") -> None:
        import torch

        ids, mask = batch.get(prefix + "input_ids"), batch.get(prefix + "completion_mask")
        if ids is None or mask is None or not self.soft_ids:
            return
        soft = torch.isin(ids, torch.tensor(sorted(self.soft_ids), dtype=ids.dtype))
        batch[prefix + "completion_mask"] = mask.masked_fill(soft, 0)

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        from engine.multimodal.collator import extra_typed, join_arrays

        blobs = [feature.get("mm_inputs") for feature in features]
        text = [{k: v for k, v in feature.items() if k != "mm_inputs"} for feature in features]
        batch = dict(self.text_collator(text))
        rows = [unpack_arrays(blob) for blob in blobs]
        rows = rows + rows if self.pairwise else rows  # DPO: the chosen rows, then the rejected rows
        reach: dict[str, int] = {}  # stand-in tokens on the first row: where its tokens end, per prefix
        if self.stand_ins:
            from engine.multimodal.stand_in import add_stand_ins_to_batch

            rows, reach = add_stand_ins_to_batch(batch, rows, self.stand_ins, self.pad_id)
        for prefix in ("", "KL_"):
            self._unmask_soft(batch, prefix)
            if self.type_ids_key and self.types and prefix + "input_ids" in batch:
                batch[prefix + self.type_ids_key] = self._type_ids(batch[prefix + "input_ids"])
            if prefix + "input_ids" in batch:
                batch.update(extra_typed(self.extra_types, batch[prefix + "input_ids"], prefix))
        batch.update(self.flags)
        if self.cross is not None:
            return self._cross_attention(batch, rows, reach)
        arrays = [row for row in rows if row]
        if arrays:
            batch.update(join_arrays(arrays))
        return batch

    def _cross_attention(self, batch: dict[str, Any], arrays: list[dict[str, Any]],
                         reach: dict[str, int]) -> dict[str, Any]:
        import torch

        from engine.multimodal.collator import batch_media, to_tensors

        for prefix in ("", "KL_"):
            ids, mask = batch.get(prefix + "input_ids"), batch.get(prefix + "attention_mask")
            if ids is None or mask is None:
                continue
            rows = [row[keep.bool()].tolist() for row, keep in zip(ids, mask)]  # TRL pads on the right
            if prefix in reach:  # the stand-in image's token, outside attention, still has its image
                rows[0] = ids[0, :reach[prefix]].tolist()
            joined = batch_media(arrays, self.cross, rows, ids.shape[1], left=False)
            if not joined:
                break
            if prefix:
                batch[prefix + "cross_attention_mask"] = torch.from_numpy(joined["cross_attention_mask"])
            else:
                batch.update(to_tensors(joined))
        return batch


def build_preference_collator(trainer: Any, bundle: Any, stage: str) -> MediaPreferenceCollator:
    """The media collator for a DPO or KTO trainer built by TRL (its own text collator inside)."""
    from engine.multimodal.stand_in import stand_ins_for_ranks

    ctx = bundle.media
    tokenizer = getattr(ctx.processor, "tokenizer", None) or trainer.processing_class
    text = trainer.data_collator
    pad_id = next((value for value in (getattr(text, "pad_token_id", None),  # TRL's own padding id
                                       getattr(getattr(text, "inner", None), "pad_token_id", None),
                                       getattr(tokenizer, "pad_token_id", None)) if value is not None), None)
    return MediaPreferenceCollator(
        text_collator=trainer.data_collator, soft_ids=soft_token_ids(ctx.processor),
        types=token_types(ctx.plugin, ctx.processor), type_ids_key=ctx.plugin.type_ids_key,
        pairwise=stage == "dpo", text_type=ctx.plugin.text_type_id, cross=ctx.plugin.cross_attention(ctx.processor),
        flags=ctx.plugin.batch_flags(ctx.options, ctx.processor),
        extra_types=ctx.plugin.extra_type_ids(ctx.processor),
        stand_ins=stand_ins_for_ranks(ctx, tokenizer, getattr(trainer, "model", None)),
        pad_id=pad_id if pad_id is not None else 0,
    )
