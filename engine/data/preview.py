"""A dataset preview for the board: rows rendered with trained/masked spans, and token-length statistics."""

from __future__ import annotations

from typing import Any

from engine.data.loader import load_examples
from engine.templates.base import KEEP
from engine.templates.slots import element_text

_LENGTH_SAMPLE = 2000


def _pieces(template: Any, messages: list[dict], example: dict, tokenizer: Any, **how: bool) -> list[tuple[str, bool]]:
    """(text, is_reply) per message, encoded as training encodes it: ``oneturn`` (preference and KTO rows, whose
    history thoughts stay only with ``preserve_thinking``) or ``discard_history`` (sft with ``mask_history`` and
    without ``preserve_thinking``), as LLaMA-Factory's processors call its template."""
    elements = template.message_elements(messages, example.get("system"), example.get("tools"), **how)
    return [(element_text(items, tokenizer, template.bos_text, template.eos_text), index % 2 == 1)
            for index, items in enumerate(elements)]


def _sft_spans(template: Any, example: dict, tokenizer: Any, train_on_prompt: bool,
               mask_history: bool) -> list[tuple[str, bool]]:
    discard = mask_history and not template.preserve_thinking  # LLaMA-Factory's discarding_history_cot
    segments = _pieces(template, example["messages"], example, tokenizer, discard_history=discard)
    last = max((i for i, (_, is_reply) in enumerate(segments) if is_reply), default=-1)
    spans = []
    for index, (text, is_reply) in enumerate(segments):
        trained = (is_reply and (not mask_history or index == last)) or (train_on_prompt and not is_reply)
        spans.append((text, trained))
    return spans


def _reply_spans(template: Any, example: dict, reply: dict, tokenizer: Any) -> list[tuple[str, bool]]:
    segments = _pieces(template, example["messages"] + [reply], example, tokenizer, oneturn=True)
    last = max(i for i, (_, is_reply) in enumerate(segments) if is_reply)
    prompt = "".join(text for text, _ in segments[:last])
    return [(prompt, False), (segments[last][0], True)]


def example_spans(example: dict, stage: str, template: Any, tokenizer: Any = None, train_on_prompt: bool = False,
                  mask_history: bool = False) -> dict[str, Any]:
    """One example as text spans ``(text, trained)``; preference rows add ``rejected_spans``."""
    if stage == "pt":
        return {"spans": [(example["text"], True)]}
    if stage in ("rm", "dpo"):
        return {"spans": _reply_spans(template, example, example["chosen"], tokenizer),
                "rejected_spans": _reply_spans(template, example, example["rejected"], tokenizer)}
    if stage == "kto":  # a prompt and its one reply, encoded as a preference row's (single-turn)
        prompt = {**example, "messages": example["messages"][:-1]}
        return {"spans": _reply_spans(template, prompt, example["messages"][-1], tokenizer),
                "kto_tag": bool(example["kto_tag"])}
    return {"spans": _sft_spans(template, example, tokenizer, train_on_prompt, mask_history)}


def example_length(example: dict, stage: str, template: Any, tokenizer: Any, mask_history: bool = False) -> int:
    """Token count of one example before truncation (the longer answer for preference rows)."""
    if stage == "pt":
        return len(tokenizer.encode(example["text"], add_special_tokens=False)) + 1
    system, tools = example.get("system"), example.get("tools")
    if stage in ("rm", "dpo", "kto"):  # single-turn, as training encodes these rows
        prompt = example["messages"] if stage != "kto" else example["messages"][:-1]
        replies = (example["chosen"], example["rejected"]) if stage != "kto" else (example["messages"][-1],)
        return max(sum(map(len, template.encode_oneturn(tokenizer, prompt + [reply], system, tools)))
                   for reply in replies)
    pairs = template.encode_multiturn(tokenizer, example["messages"], system, tools,
                                      discard_history=mask_history and not template.preserve_thinking)
    return sum(len(p) + len(r) for p, r in pairs)


def preview_dataset(data_args: Any, stage: str, tokenizer: Any, template: Any, n: int = 5,
                    media: Any = None) -> dict[str, Any]:
    """What the board shows for a dataset choice.

    Returns:
        ``rows``: the first ``n`` examples as ``{"spans": [(text, trained), ...]}`` (plus ``rejected_spans`` for
        preference data and ``kto_tag`` for kto, and ``media`` for rows with images, videos or audio: thumbnails,
        frame counts and soft-token counts through ``media``, the model's
        :class:`engine.multimodal.dataset.MediaContext`, see :func:`engine.multimodal.preview.media_preview`);
        ``lengths``: token lengths of up to 2000 examples (for a
        histogram); ``over_cutoff``: how many of those exceed ``cutoff_len``; ``num_examples`` (None when
        ``sampled``: only the first 2000 examples are read, so the total is not counted); ``cutoff_len``;
        ``sampled``: whether lengths cover only a sample.

    Raises:
        DatasetError: for any dataset problem (as ``load_examples``).
    """
    template = template.with_options(enable_thinking=getattr(data_args, "enable_thinking", KEEP),
                                     default_system=getattr(data_args, "default_system", None),
                                     tool_format=getattr(data_args, "tool_format", None),
                                     preserve_thinking=getattr(data_args, "preserve_thinking", None))
    # only what is shown is read: the first rows, and up to _LENGTH_SAMPLE for the lengths (one more tells
    # whether there are more); a large dataset is not read whole for a preview
    examples = load_examples(data_args, data_args.dataset, stage, first=max(n, _LENGTH_SAMPLE) + 1)
    sampled = len(examples) > _LENGTH_SAMPLE
    train_on_prompt = bool(getattr(data_args, "train_on_prompt", False))
    mask_history = bool(getattr(data_args, "mask_history", False))
    rows = [example_spans(example, stage, template, tokenizer, train_on_prompt, mask_history)
            for example in examples[:n]]
    if any(any(example.get(kind) for kind in ("images", "videos", "audios")) for example in examples[:n]):
        from engine.multimodal.preview import media_preview
        from engine.multimodal.processor import MediaOptions

        options = MediaOptions.from_data_args(data_args)
        for row, example in zip(rows, examples[:n]):
            shown = media_preview(example, media, options)
            if shown is not None:
                row["media"] = shown
    sample = examples[:_LENGTH_SAMPLE]
    lengths = [example_length(example, stage, template, tokenizer, mask_history) for example in sample]
    cutoff = int(data_args.cutoff_len)
    return {
        "rows": rows,
        "lengths": lengths,
        "over_cutoff": sum(length > cutoff for length in lengths),
        "num_examples": None if sampled else len(examples),
        "cutoff_len": cutoff,
        "sampled": sampled,
    }
