"""Canonical examples -> tokenized columns per stage (engine/CONTRACTS.md), with loss masking, truncation and packing.

- ``sft``: ``input_ids``, ``labels`` (-100 on prompts unless ``train_on_prompt``; with ``mask_history`` only the
  last reply is trained), ``attention_mask``.
- ``pt``: as LLaMA-Factory's pre-training processor: each text + EOS, joined within each preprocessing batch and cut
  into blocks of ``cutoff_len`` tokens (or one row per text with ``packing: false``); see :func:`tokenize_pt`.
- ``rm``: ``chosen_ids``/``rejected_ids`` (prompt + answer); ``dpo``: ``prompt_ids``, ``chosen_ids``,
  ``rejected_ids`` (answers only); ``kto``: ``prompt_ids``, ``completion_ids``, ``label`` and what its KL pairs need
  beyond the row's own cut (``engine.data.kto_pairs``).

Truncation is LLaMA-Factory's (``infer_seqlen``): turn by turn from the start (from the last turn with
``mask_history``), each (prompt, reply) pair gets what is left of ``cutoff_len``: a reply shorter than half of it
stays whole, else a prompt shorter than half stays whole, else both are cut in proportion to their lengths; the
*start* of each side is kept. Templates with ``efficient_eos`` end the sequence with one EOS (counted in the budget)
and label the first prompt token of every later turn with EOS. With ``keep_prompt_end`` a long prompt keeps its
end instead (the turns nearest the reply), an option of ours that LLaMA-Factory does not have. An sft example left
without any trained token is kept, as LLaMA-Factory keeps it (its loss term is zero).

Packing (sft: ``packing`` or ``neat_packing``; pt: ``neat_packing``, since pt's ``packing`` is LLaMA-Factory's block
joining) places whole examples into sequences as LLaMA-Factory 0.9.5 does, within each of its preprocessing
batches (``engine.data.lf_batches``): its cutoff of ``cutoff_len - 1`` for every sft example (its DataArguments take
one off when packing), examples longer than that dropped, its greedy knapsack (:func:`greedy_knapsack`).
``position_ids`` restart at 0 for every example, and with them the collator keeps attention inside each example
(see ``engine.data.collator``; LLaMA-Factory's ``neat_packing``, which we apply to ``packing`` too), so packed
examples never attend to each other. A pt document (``neat_packing``, ours) longer than ``cutoff_len`` is split into
pieces first, and the first label of each is masked.
"""

from __future__ import annotations

import bisect
import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from engine.templates.text_ids import prefetched

IGNORE = -100
_MIN_TAIL_TURN = 32


@dataclass
class TokenizeOptions:
    """Tokenization settings taken from the data config."""

    cutoff_len: int = 2048
    train_on_prompt: bool = False
    mask_history: bool = False
    packing: bool = False
    keep_prompt_end: bool = False
    pt_documents: bool = False
    """pt: one row per text (LLaMA-Factory's ``packing: false``) instead of blocks joined across texts."""
    block_len: int | None = None
    """pt: the block length (default ``cutoff_len``; LLaMA-Factory's explicit ``packing: true`` makes it one less)."""
    mask_packed_starts: bool = True
    """With ``packing``: mask the first label of each packed example (sft packing as LLaMA-Factory's keeps them)."""
    written_cutoff: int | None = None
    """``cutoff_len`` as the config gives it, where packing keeps one token of it free (for messages: cutoff_phrase)."""


def cutoff_phrase(opts: TokenizeOptions, length: int | None = None) -> str:
    """``cutoff_len=N`` as the user wrote it for messages, with the token packing keeps free where that applies
    (``length``, default ``opts.cutoff_len``, is the length rows are actually cut to)."""
    length = opts.cutoff_len if length is None else length
    written = opts.written_cutoff
    if written is None or written == length:
        return f"cutoff_len={length}"
    return (f"cutoff_len={written} (packing keeps one token of it free, as LLaMA-Factory does, so rows are cut to "
            f"{length})")


def new_stats(rows: int) -> dict[str, int]:
    """Counters every stage reports."""
    return {"rows": rows, "kept": 0, "truncated": 0, "dropped": 0, "total_tokens": 0, "trainable_tokens": 0}


def fit_pair(prompt_len: int, response_len: int, budget: int) -> tuple[int, int]:
    """How many prompt and response tokens to keep within ``budget``.

    A side that needs at most half the budget is kept whole and the other side gets the rest; when both are
    longer, the budget is shared in proportion to their lengths.
    """
    if prompt_len + response_len <= budget:
        return prompt_len, response_len
    if budget <= 0:
        return 0, 0
    if prompt_len * 2 <= budget:
        return prompt_len, budget - prompt_len
    if response_len * 2 <= budget:
        return budget - response_len, response_len
    response_keep = math.ceil(budget * response_len / (prompt_len + response_len))
    return budget - response_keep, response_keep


def _tail(ids: list[int], keep: int) -> list[int]:
    return ids[len(ids) - keep:] if keep > 0 else []


def infer_seqlen(source_len: int, target_len: int, cutoff_len: int) -> tuple[int, int]:
    """LLaMA-Factory's split of ``cutoff_len`` between a prompt (source) and its reply (target)."""
    if target_len * 2 < cutoff_len:
        max_target_len = cutoff_len
    elif source_len * 2 < cutoff_len:
        max_target_len = cutoff_len - source_len
    else:
        max_target_len = int(cutoff_len * (target_len / (source_len + target_len)))
    new_target_len = min(max_target_len, target_len)
    new_source_len = min(max(cutoff_len - new_target_len, 0), source_len)
    return new_source_len, new_target_len


def _efficient_eos(template: Any) -> bool:
    return bool(getattr(template, "uses_efficient_eos", False))


# ------------------------------------------------------------------------------------------------------ sft
def sft_row(pairs: list[tuple[list[int], list[int]]], opts: TokenizeOptions, eos_id: int | None = None,
            prefix: list[int] | None = None) -> tuple[list[int], list[int], bool]:
    """One supervised row from (prompt, response) pairs: input ids, labels and whether it was truncated.

    ``eos_id`` is given for templates with ``efficient_eos`` (LLaMA-Factory's rule, see the module docstring).
    ``prefix``: ids that open the row outside the loss and count against ``cutoff_len`` (PaliGemma's image tokens;
    LLaMA-Factory starts the row with them, so with ``mask_history`` the turns are put before them, as there).
    """
    prefix = list(prefix or [])
    if opts.keep_prompt_end:
        input_ids, labels, truncated = _sft_row_keep_end(
            pairs, dataclasses.replace(opts, cutoff_len=max(opts.cutoff_len - len(prefix), 0)))
        return prefix + input_ids, [IGNORE] * len(prefix) + labels, truncated
    efficient = eos_id is not None
    order = pairs[::-1] if opts.mask_history else pairs
    total = len(prefix) + (1 if efficient else 0)
    input_ids: list[int] = prefix
    labels: list[int] = [IGNORE] * len(prefix)
    truncated = False
    for turn, (source, target) in enumerate(order):
        if total >= opts.cutoff_len:
            truncated = True
            break
        source_len, target_len = infer_seqlen(len(source), len(target), opts.cutoff_len - total)
        truncated = truncated or source_len < len(source) or target_len < len(target)
        source, target = source[:source_len], target[:target_len]
        total += source_len + target_len
        if opts.train_on_prompt:
            source_label = list(source)
        elif efficient and turn != 0 and source_len:
            source_label = [eos_id] + [IGNORE] * (source_len - 1)
        else:
            source_label = [IGNORE] * source_len
        target_label = [IGNORE] * target_len if opts.mask_history and turn != 0 else list(target)
        if opts.mask_history:
            input_ids = source + target + input_ids
            labels = source_label + target_label + labels
        else:
            input_ids += source + target
            labels += source_label + target_label
    if efficient:
        input_ids.append(eos_id)
        labels.append(eos_id)
    return input_ids, labels, truncated


def _sft_row_keep_end(pairs: list[tuple[list[int], list[int]]], opts: TokenizeOptions,
                      ) -> tuple[list[int], list[int], bool]:
    """``keep_prompt_end``: whole turns from the start (from the end with ``mask_history``); the first turn that
    does not fit keeps the tail of its prompt and the head of its reply (``fit_pair``)."""
    count = len(pairs)
    order = list(range(count - 1, -1, -1)) if opts.mask_history else list(range(count))
    budget = opts.cutoff_len
    kept: dict[int, tuple[list[int], list[int]]] = {}
    truncated = False
    for position, index in enumerate(order):
        prompt, response = pairs[index]
        if len(prompt) + len(response) <= budget:
            kept[index] = (prompt, response)
            budget -= len(prompt) + len(response)
            continue
        truncated = True
        if position == 0 or (not opts.mask_history and budget >= min(_MIN_TAIL_TURN, opts.cutoff_len // 4)):
            prompt_keep, response_keep = fit_pair(len(prompt), len(response), budget)
            if response_keep > 0:
                kept[index] = (_tail(prompt, prompt_keep), response[:response_keep])
        break
    input_ids: list[int] = []
    labels: list[int] = []
    for index in sorted(kept):
        prompt, response = kept[index]
        trained = not opts.mask_history or index == count - 1
        input_ids += prompt + response
        labels += (prompt if opts.train_on_prompt else [IGNORE] * len(prompt))
        labels += response if trained else [IGNORE] * len(response)
    return input_ids, labels, truncated


def train_on_prompt_problem(template: Any) -> str | None:
    """Why ``train_on_prompt`` cannot be used with ``template`` (an efficient_eos one, as LLaMA-Factory refuses it),
    or None."""
    if not _efficient_eos(template):
        return None
    return (f"Template `{template.name}` ends replies without EOS (efficient_eos), so `train_on_prompt` cannot be "
            "used with it: set train_on_prompt: false.")


def check_options(template: Any, opts: TokenizeOptions) -> None:
    problem = train_on_prompt_problem(template) if opts.train_on_prompt else None
    if problem:
        from engine.templates import TemplateError

        raise TemplateError(problem)


def encode_pairs(tokenizer: Any, template: Any, example: dict, opts: TokenizeOptions,
                  ) -> list[tuple[list[int], list[int]]]:
    discard = opts.mask_history and not getattr(template, "preserve_thinking", False)
    return template.encode_multiturn(tokenizer, example["messages"], example.get("system"), example.get("tools"),
                                     discard_history=discard)


def tokenize_sft(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions,
                 ) -> tuple[dict[str, list], dict[str, int]]:
    """Supervised rows (packed when ``opts.packing``)."""
    check_options(template, opts)
    stats = new_stats(len(examples))
    rows: list[tuple[list[int], list[int]]] = []
    eos_id = tokenizer.eos_token_id if _efficient_eos(template) else None
    with prefetched(tokenizer, _texts(template, _sft_conversations(template, examples, opts))):
        for example in examples:
            input_ids, labels, truncated = sft_row(encode_pairs(tokenizer, template, example, opts), opts, eos_id)
            stats["truncated"] += truncated
            if labels.count(IGNORE) == len(labels):  # nothing left to train on (list.count: C speed)
                stats["untrained"] = stats.get("untrained", 0) + 1
            rows.append((input_ids, labels))  # kept even so, as LLaMA-Factory keeps it
    return _finish_rows(rows, opts, stats)


def _texts(template: Any, conversations: Any):
    """Every text piece the rows will tokenize (for one batched call), where the template can list them;
    ``conversations`` yields ``(messages, system, tools, options of message_elements)``."""
    elements_of = getattr(template, "message_elements", None)
    if elements_of is None:
        return
    for messages, system, tools, options in conversations:
        try:
            elements = elements_of(messages, system, tools, **options)
        except Exception:  # noqa: BLE001 - the row's own tokenization reports it
            continue
        for items in elements:
            yield from (item for item in items if isinstance(item, str))


def _sft_conversations(template: Any, examples: list[dict], opts: TokenizeOptions):
    discard = opts.mask_history and not getattr(template, "preserve_thinking", False)
    for example in examples:
        yield example["messages"], example.get("system"), example.get("tools"), {"discard_history": discard}


def _reply_conversations(examples: list[dict], replies: tuple[str, ...]):
    """Each example's messages with each of its ``replies`` appended (``()``: its messages as they are), one turn."""
    for example in examples:
        for key in replies or (None,):
            messages = example["messages"] + [example[key]] if key else example["messages"]
            yield messages, example.get("system"), example.get("tools"), {"oneturn": True}


def _finish_rows(rows: list[tuple[list[int], list[int]]], opts: TokenizeOptions,
                 stats: dict[str, int]) -> tuple[dict[str, list], dict[str, int]]:
    for input_ids, labels in rows:
        stats["total_tokens"] += len(input_ids)
        stats["trainable_tokens"] += len(labels) - labels.count(IGNORE)
    if opts.packing:
        fitting = [row for row in rows if len(row[0]) <= opts.cutoff_len]  # longer ones: dropped, as there
        stats["dropped"] += len(rows) - len(fitting)
        columns = pack_rows(fitting, opts.cutoff_len, mask_first=opts.mask_packed_starts)
        stats["packed_sequences"] = len(columns["input_ids"])
        stats["trainable_tokens"] = sum(len(labels) - labels.count(IGNORE) for labels in columns["labels"])
    else:
        columns = {"input_ids": [r[0] for r in rows], "labels": [r[1] for r in rows],
                   "attention_mask": [[1] * len(r[0]) for r in rows]}
    stats["kept"] = len(columns["input_ids"])
    return columns, stats


def greedy_knapsack(lengths: list[int], capacity: int) -> list[list[int]]:
    """LLaMA-Factory's packing: each sequence takes the longest length that still fits, again and again, until none
    does; the lengths of each sequence in the order taken. Every length must be at most ``capacity``."""
    remaining = sorted(lengths)
    knapsacks: list[list[int]] = []
    while remaining:
        knapsack: list[int] = []
        free = capacity
        while True:
            index = bisect.bisect(remaining, free) - 1
            if index < 0:
                break
            free -= remaining[index]
            knapsack.append(remaining.pop(index))
        knapsacks.append(knapsack)
    return knapsacks


def pack_order(lengths: list[int], capacity: int) -> list[list[int]]:
    """The row indices of each packed sequence, as LLaMA-Factory packs rows of these ``lengths``
    (:func:`greedy_knapsack`; of rows of one length, the last one first). Every length must be at most ``capacity``."""
    by_length: dict[int, list[int]] = {}
    for index, length in enumerate(lengths):
        by_length.setdefault(length, []).append(index)
    return [[by_length[length].pop() for length in knapsack] for knapsack in greedy_knapsack(lengths, capacity)]


def pack_rows(rows: list[tuple[list[int], list[int]]], cutoff_len: int, mask_first: bool = True) -> dict[str, list]:
    """Rows packed into sequences of at most ``cutoff_len`` tokens as LLaMA-Factory packs them (:func:`pack_order`).
    Every row must fit.

    Returns columns ``input_ids``, ``labels``, ``attention_mask`` and ``position_ids`` (restarting at 0 per
    example); with ``mask_first`` the first label of each example is masked (LLaMA-Factory's sft packing keeps it).
    """
    columns: dict[str, list] = {"input_ids": [], "labels": [], "attention_mask": [], "position_ids": []}
    for pack in pack_order([len(ids) for ids, _ in rows], cutoff_len):
        input_ids: list[int] = []
        labels: list[int] = []
        positions: list[int] = []
        for index in pack:
            ids, lab = rows[index]
            input_ids += ids
            labels += [IGNORE] + lab[1:] if mask_first else lab
            positions += list(range(len(ids)))
        columns["input_ids"].append(input_ids)
        columns["labels"].append(labels)
        columns["attention_mask"].append([1] * len(input_ids))
        columns["position_ids"].append(positions)
    return columns


# ------------------------------------------------------------------------------------------------------- pt
def tokenize_pt(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions,
                ) -> tuple[dict[str, list], dict[str, int]]:
    """Pre-training rows from one batch of LLaMA-Factory's preprocessing map (:mod:`engine.data.lf_batches`), as
    LLaMA-Factory 0.9.5's pre-training processor makes them.

    Each text gets the tokenizer's EOS appended as text (``<|end_of_text|>`` with the ``llama3`` template) and is
    tokenized without special tokens. By default (``opts.pt_documents`` false) the batch's tokens are joined and cut
    into blocks of ``opts.block_len`` tokens, the incomplete last block left out (counted in
    ``stats["remainder_tokens"]``), and a tokenizer that adds BOS gets it as the first token of every block (in
    place of the token there). With ``opts.pt_documents`` each text is a row of its own (BOS first where the
    tokenizer adds it), cut by the tokenizer to ``cutoff_len``. Labels are the ids, except where an id is the pad
    token's (LLaMA-Factory's language-modelling collator masks those; where pad and EOS are one token, EOS is not
    trained). ``opts.packing`` (``neat_packing``, ours) packs the texts, each split into ``cutoff_len`` pieces,
    without attention across them.
    """
    stats = new_stats(len(examples))
    eos = "<|end_of_text|>" if getattr(template, "name", None) == "llama3" else (tokenizer.eos_token or "")
    texts = [str(example["text"]) + eos for example in examples]
    add_bos = bool(getattr(tokenizer, "add_bos_token", False)) and tokenizer.bos_token_id is not None
    pad = tokenizer.pad_token_id
    size = opts.cutoff_len
    if opts.pt_documents or opts.packing:
        if add_bos:
            texts = [tokenizer.bos_token + text for text in texts]
        documents = _encode_texts(tokenizer, texts)
        stats["truncated"] = sum(len(ids) > size for ids in documents)
        if opts.packing:
            pieces = [doc[start:start + size] for doc in documents for start in range(0, len(doc), size)]
            return _finish_rows([(piece, _lm_labels(piece, pad)) for piece in pieces if len(piece) > 1], opts, stats)
        left = getattr(tokenizer, "truncation_side", "right") == "left"  # the tokenizer's own truncation, as there
        rows = [ids[len(ids) - size:] if left and len(ids) > size else ids[:size] for ids in documents]
        return _finish_rows([(ids, _lm_labels(ids, pad)) for ids in rows if ids], opts, stats)
    block = opts.block_len or size
    stream = [token for ids in _encode_texts(tokenizer, texts) for token in ids]
    whole = len(stream) // block * block
    stats["remainder_tokens"] = len(stream) - whole
    blocks = [stream[start:start + block] for start in range(0, whole, block)]
    if add_bos:
        for ids in blocks:
            ids[0] = tokenizer.bos_token_id
    return _finish_rows([(ids, _lm_labels(ids, pad)) for ids in blocks], opts, stats)


def _encode_texts(tokenizer: Any, texts: list[str]) -> list[list[int]]:
    """The texts' ids in one call (``verbose=False``: long texts are the point here, no "longer than the maximum"
    warning per process)."""
    return tokenizer(texts, add_special_tokens=False, verbose=False)["input_ids"]


def _lm_labels(ids: list[int], pad: int | None) -> list[int]:
    return [IGNORE if token == pad else token for token in ids] if pad is not None and pad in ids else list(ids)


# ----------------------------------------------------------------------------------------------- preference
def prompt_and_reply(tokenizer: Any, template: Any, example: dict, reply: dict) -> tuple[list[int], list[int]]:
    """Prompt ids (all turns before the reply) and the reply's ids, as LLaMA-Factory's ``encode_oneturn`` gives
    them; an ``efficient_eos`` template's reply ends with EOS."""
    prompt, response = template.encode_oneturn(tokenizer, example["messages"] + [reply], example.get("system"),
                                               example.get("tools"))
    if _efficient_eos(template):
        response = response + [tokenizer.eos_token_id]
    return prompt, response


def fit_reply(prompt_len: int, reply_len: int, opts: TokenizeOptions) -> tuple[int, int]:
    """Prompt and reply tokens kept of a (prompt, reply) pair: ``infer_seqlen``, or ``fit_pair`` with
    ``keep_prompt_end``."""
    if opts.keep_prompt_end:
        return fit_pair(prompt_len, reply_len, opts.cutoff_len)
    return infer_seqlen(prompt_len, reply_len, opts.cutoff_len)


def cut_prompt(prompt: list[int], keep: int, opts: TokenizeOptions) -> list[int]:
    """The ``keep`` prompt tokens kept: the first ones, or the last with ``keep_prompt_end``."""
    return _tail(prompt, keep) if opts.keep_prompt_end else prompt[:keep]


def tokenize_preference(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions, stage: str,
                        ) -> tuple[dict[str, list], dict[str, int]]:
    """Preference rows: rm (full sequences) or dpo (prompt and answers apart)."""
    stats = new_stats(len(examples))
    columns: dict[str, list] = ({"chosen_ids": [], "rejected_ids": []} if stage == "rm"
                                else {"prompt_ids": [], "chosen_ids": [], "rejected_ids": []})
    with prefetched(tokenizer, _texts(template, _reply_conversations(examples, ("chosen", "rejected")))):
        _preference_rows(examples, tokenizer, template, opts, stage, columns, stats)
    return columns, stats


def _preference_rows(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions, stage: str,
                     columns: dict[str, list], stats: dict[str, int]) -> None:
    for example in examples:
        prompt, chosen = prompt_and_reply(tokenizer, template, example, example["chosen"])
        rejected = prompt_and_reply(tokenizer, template, example, example["rejected"])[1]
        longest = max(len(chosen), len(rejected))
        prompt_keep, reply_keep = fit_reply(len(prompt), longest, opts)
        if prompt_keep < len(prompt) or reply_keep < longest:
            stats["truncated"] += 1
        prompt, chosen, rejected = cut_prompt(prompt, prompt_keep, opts), chosen[:reply_keep], rejected[:reply_keep]
        if not reply_keep:  # kept, as LLaMA-Factory keeps it: the pair then trains nothing
            stats["untrained"] = stats.get("untrained", 0) + 1
        if stage == "rm":
            columns["chosen_ids"].append(prompt + chosen)
            columns["rejected_ids"].append(prompt + rejected)
        else:
            columns["prompt_ids"].append(prompt)
            columns["chosen_ids"].append(chosen)
            columns["rejected_ids"].append(rejected)
        stats["total_tokens"] += 2 * len(prompt) + len(chosen) + len(rejected)
        stats["trainable_tokens"] += len(chosen) + len(rejected)
        stats["kept"] += 1


def tokenize_kto(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions,
                 ) -> tuple[dict[str, list], dict[str, int]]:
    """KTO rows: prompt, completion and the desirable/undesirable label."""
    stats = new_stats(len(examples))
    from engine.data.kl_stand_ins import KEY
    from engine.data.kto_pairs import SOURCE_COLUMNS

    columns: dict[str, list] = {"prompt_ids": [], "completion_ids": [], "label": [],
                                **{name: [] for name in SOURCE_COLUMNS}, KEY: []}
    with prefetched(tokenizer, _texts(template, _reply_conversations(examples, ()))):
        _kto_rows(examples, tokenizer, template, opts, columns, stats)
    return columns, stats


def _kto_rows(examples: list[dict], tokenizer: Any, template: Any, opts: TokenizeOptions,
              columns: dict[str, list], stats: dict[str, int]) -> None:
    from engine.data.kl_stand_ins import KEY, stand_in_columns
    from engine.data.kto_pairs import reply_block, source_columns

    for example in examples:
        columns[KEY].append(example.get(KEY, 0))
        if example.get(KEY):  # a skipped row, kept for the KL pairs: its reply alone
            for name, value in stand_in_columns(example, tokenizer, template, opts).items():
                columns[name].append(value)
            stats["rows"] -= 1  # counted where it was skipped
            continue
        prompt, completion = prompt_and_reply(tokenizer, template, {**example, "messages": example["messages"][:-1]},
                                              example["messages"][-1])
        block = reply_block(template, tokenizer, prompt)
        prompt_keep, reply_keep = fit_reply(len(prompt), len(completion), opts)
        if prompt_keep < len(prompt) or reply_keep < len(completion):
            stats["truncated"] += 1
        if not reply_keep:  # kept, as LLaMA-Factory keeps it: the row then trains nothing
            stats["untrained"] = stats.get("untrained", 0) + 1
        for name, value in source_columns(prompt, completion, prompt_keep, reply_keep, opts, block=block).items():
            columns[name].append(value)
        prompt, completion = cut_prompt(prompt, prompt_keep, opts), completion[:reply_keep]
        columns["prompt_ids"].append(prompt)
        columns["completion_ids"].append(completion)
        columns["label"].append(bool(example["kto_tag"]))
        stats["total_tokens"] += len(prompt) + len(completion)
        stats["trainable_tokens"] += len(completion)
        stats["kept"] += 1


TOKENIZERS: dict[str, Callable[..., tuple[dict[str, list], dict[str, int]]]] = {
    "pt": tokenize_pt,
    "sft": tokenize_sft,
    "rm": lambda ex, tok, tpl, opts: tokenize_preference(ex, tok, tpl, opts, "rm"),
    "dpo": lambda ex, tok, tpl, opts: tokenize_preference(ex, tok, tpl, opts, "dpo"),
    "kto": tokenize_kto,
}


def tokenize_examples(examples: list[dict], stage: str, tokenizer: Any, template: Any,
                      opts: TokenizeOptions) -> tuple[dict[str, list], dict[str, int]]:
    """Tokenized columns for ``stage`` and the stats (rows, kept, truncated, dropped, total/trainable tokens)."""
    if opts.packing and stage not in ("pt", "sft"):
        opts = dataclasses.replace(opts, packing=False)
    return TOKENIZERS[stage](examples, tokenizer, template, opts)
