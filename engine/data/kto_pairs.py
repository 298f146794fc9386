"""KTO's mismatched (KL) pairs, exactly as LLaMA-Factory 0.9.5 forms them.

KTO estimates its KL term from prompts paired with completions of other rows. LLaMA-Factory builds those pairs
while preprocessing: within each batch of its dataset map, every row takes the completion of the row before it
(the first row the last's), and the pair is encoded and cut to ``cutoff_len`` *as a pair of its own*
(``infer_seqlen`` of the row's whole prompt and the partner's whole completion), not as the row's cut prompt
followed by the partner's cut completion.

Our tokenizer cuts each row for its own pair, so a KTO row also keeps what the KL pair may need beyond that cut
(:func:`source_columns`: the whole lengths and the tokens cut off, at most ``cutoff_len`` of each side; empty for
rows that were not cut). :func:`kl_inputs` then gives every row its KL prompt and KL completion, cut as
LLaMA-Factory cuts them, and :func:`with_kl_pairs` adds them to a tokenized set, where the stand-ins of skipped rows
(:mod:`engine.data.kl_stand_ins`) take part in the pairing and then leave.

A prompt can depend on its reply: a reasoning template with thinking off ends the prompt with the empty thought
block only when the reply has no thought of its own (:func:`reply_block`). LLaMA-Factory encodes the KL pair's
prompt with the partner's reply, so a row also keeps that block (``prompt_block_ids``), and its KL prompt swaps it
for the partner's.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from engine.data.lf_batches import lf_batches
from engine.data.tokenize import TokenizeOptions, cut_prompt, fit_reply

logger = logging.getLogger(__name__)

SOURCE_COLUMNS = ("prompt_len", "completion_len", "prompt_rest_ids", "completion_rest_ids", "prompt_floor",
                  "prompt_block_ids")
"""Columns a tokenized KTO row carries for its KL pairs (dropped once the pairs are built)."""
REQUIRED_COLUMNS = SOURCE_COLUMNS[:-1]
"""The columns exact pairs cannot do without (data tokenized before ``prompt_block_ids`` lacks that one only)."""


def reply_block(template: Any, tokenizer: Any, prompt: list[int]) -> list[int]:
    """The ids that ``prompt`` ends with because of its reply: a reasoning template with thinking off or mixed (None)
    puts the empty thought block there when the reply has no thought (as LLaMA-Factory's ``ReasoningTemplate``
    does); [] otherwise."""
    if not (getattr(template, "reasoning", False) and getattr(template, "empty_thought", False)
            and not template.enable_thinking):
        return []
    from engine.templates.slots import element_ids

    block = element_ids(tokenizer, [template.add_thought()])
    return list(block) if block and prompt[len(prompt) - len(block):] == block else []


def kl_partners(rows: int, batch_size: int | None = None, workers: int | None = None) -> list[int]:
    """For each row, the row whose completion KTO's KL term pairs with its prompt, as LLaMA-Factory 0.9.5 pairs them:
    within each batch of its preprocessing map (:func:`engine.data.lf_batches.lf_batches`, which depend on
    ``preprocessing_batch_size`` and ``preprocessing_num_workers``), each row takes the completion of the row
    before it (the first takes the last's)."""
    partners: list[int] = []
    for first, end in lf_batches(rows, batch_size, workers):
        partners += [end - 1, *range(first, end - 1)]
    return partners


def source_columns(prompt: list[int], completion: list[int], prompt_keep: int, reply_keep: int,
                   opts: TokenizeOptions, floor: int = 0, block: Sequence[int] = ()) -> dict[str, object]:
    """What a KTO row's KL pairs need beyond its own cut, from its whole ``prompt`` and ``completion`` ids.

    ``prompt_keep``/``reply_keep`` are the row's own cut; ``floor`` is how many leading prompt tokens a KL prompt
    must keep (a multimodal row's prompt up to its last media token, which a cut must not split); ``block`` is
    the :func:`reply_block` the prompt ends with.
    """
    cap = opts.cutoff_len
    if opts.keep_prompt_end:  # the kept tail, and up to cap tokens before it (and before the block, swapped out)
        prompt_rest = prompt[max(0, len(prompt) - cap - len(block)):len(prompt) - prompt_keep]
    else:
        prompt_rest = prompt[prompt_keep:cap]
    return {"prompt_len": len(prompt), "completion_len": len(completion), "prompt_rest_ids": prompt_rest,
            "completion_rest_ids": completion[reply_keep:cap], "prompt_floor": floor, "prompt_block_ids": list(block)}


def kl_inputs(columns: dict[str, Sequence], partners: Sequence[int], opts: TokenizeOptions,
              ) -> tuple[list[list[int]], list[list[int]]]:
    """Every row's KL prompt ids and KL completion ids: its prompt with its partner's completion, cut as a pair.

    ``columns`` holds a tokenized KTO set's ``prompt_ids``, ``completion_ids`` and :data:`SOURCE_COLUMNS`.
    """
    prompts, completions = columns["prompt_ids"], columns["completion_ids"]
    prompt_rests, completion_rests = columns["prompt_rest_ids"], columns["completion_rest_ids"]
    prompt_lens, completion_lens, floors = columns["prompt_len"], columns["completion_len"], columns["prompt_floor"]
    blocks = columns.get("prompt_block_ids") or [[]] * len(prompts)
    kl_prompts: list[list[int]] = []
    kl_completions: list[list[int]] = []
    for row, partner in enumerate(partners):
        own, theirs = list(blocks[row]), list(blocks[partner])
        prompt_len = max(0, prompt_lens[row] - len(own)) + len(theirs)  # a stand-in (no prompt) pairs, then leaves
        prompt_keep, reply_keep = fit_reply(prompt_len, completion_lens[partner], opts)
        if prompt_keep < floors[row]:  # never cut through a media token: the completion gives way
            prompt_keep = floors[row]
            reply_keep = max(0, min(reply_keep, opts.cutoff_len - prompt_keep))
        if opts.keep_prompt_end:
            prompt = list(prompt_rests[row]) + list(prompts[row])
        else:
            prompt = list(prompts[row]) + list(prompt_rests[row])
        if own != theirs:  # the prompt as the partner's reply leaves it: its block instead of the row's own
            start = prompt[:len(prompt) - len(own)] if opts.keep_prompt_end else prompt[:prompt_lens[row] - len(own)]
            prompt = start + theirs
        kl_prompts.append(cut_prompt(prompt, prompt_keep, opts))
        kl_completions.append((list(completions[partner]) + list(completion_rests[partner]))[:reply_keep])
    return kl_prompts, kl_completions


def with_kl_pairs(dataset: Any, data: Any = None, examples: Any = None) -> Any:
    """``dataset`` (tokenized KTO rows) with LLaMA-Factory's KL pairs (``KL_prompt_ids``, ``KL_completion_ids``),
    paired over the batches ``data`` (a data config, or None for the defaults) gives, stand-ins included; the
    stand-ins and :data:`SOURCE_COLUMNS` then leave. A set that has its pairs already is returned as it is.
    ``examples`` (the rows ``dataset`` was tokenized from) let a refusal name the rows by dataset and row number.

    Raises:
        DatasetError: when a kept row would pair with a stand-in that has no reply.
    """
    from engine.data.kl_stand_ins import KEY, refuse_unpaired

    if "KL_completion_ids" in dataset.column_names:
        return dataset
    partners = kl_partners(len(dataset), getattr(data, "preprocessing_batch_size", None),
                           getattr(data, "preprocessing_num_workers", None))
    kinds = dataset[KEY] if KEY in dataset.column_names else [0] * len(dataset)
    refuse_unpaired(kinds, partners, examples)
    if not set(REQUIRED_COLUMNS) <= set(dataset.column_names):  # tokenized_path written before these columns
        logger.warning("The tokenized KTO data was saved by an older version and lacks what exact KL pairs need, "
                       "so each KL pair is the row's cut prompt and its partner's cut completion; set "
                       "overwrite_cache: true once to tokenize it again.")
        completions = dataset["completion_ids"]
        return dataset.add_column("KL_completion_ids", [completions[i] for i in partners])
    from engine.data import tokenize_options

    opts = tokenize_options(data, "kto") if data is not None else TokenizeOptions()
    names = [name for name in ("prompt_ids", "completion_ids", *SOURCE_COLUMNS) if name in dataset.column_names]
    prompts, completions = kl_inputs({name: dataset[name] for name in names}, partners, opts)
    dataset = dataset.add_column("KL_prompt_ids", prompts).add_column("KL_completion_ids", completions)
    if any(kinds):
        dataset = dataset.select([row for row, kind in enumerate(kinds) if not kind])
    return dataset.remove_columns([name for name in (*SOURCE_COLUMNS, KEY) if name in dataset.column_names])


def pair_batch(columns: dict[str, list], opts: TokenizeOptions, examples: Any = None) -> dict[str, list]:
    """One streamed preprocessing batch of tokenized KTO rows (:mod:`engine.data.kl_stand_ins`' stand-ins included)
    with its KL pairs, as LLaMA-Factory's map pairs a batch of a stream: each row takes the completion of the row
    before it in the batch (the first the last's). The stand-ins and :data:`SOURCE_COLUMNS` then leave. ``examples``
    (the batch's examples) let a refusal name the skipped rows.

    Raises:
        DatasetError: when a kept row would pair with a stand-in that has no reply.
    """
    from engine.data.kl_stand_ins import KEY, refuse_unpaired

    count = len(columns["prompt_ids"])
    partners = [count - 1, *range(count - 1)] if count else []
    kinds = list(columns.get(KEY) or [0] * count)
    refuse_unpaired(kinds, partners, examples)
    prompts, completions = kl_inputs(columns, partners, opts)
    keep = [row for row, kind in enumerate(kinds) if not kind]
    paired = {name: [values[row] for row in keep] for name, values in columns.items()
              if name not in (*SOURCE_COLUMNS, KEY)}
    paired["KL_prompt_ids"] = [prompts[row] for row in keep]
    paired["KL_completion_ids"] = [completions[row] for row in keep]
    return paired
