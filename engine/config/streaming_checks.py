"""The config rules of ``streaming: true`` (engine.data.streaming): LLaMA-Factory 0.9.5's own, and where this engine
does not stream (each message says which)."""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)

STREAMED_STAGES = ("pt", "sft", "rm", "dpo", "kto")  # the stages LLaMA-Factory 0.9.5 trains with a stream too
_SAID: set[str] = set()  # notes logged once per process (a config is often checked more than once)


def _note(text: str) -> None:
    if text not in _SAID:
        _SAID.add(text)
        logger.info(text)


def media_refusal(name: str) -> str:
    """Why dataset ``name``, whose rows have media, cannot stream here (said by ``lf-engine check`` before anything
    loads, and by the data loader as a backstop)."""
    return (f"Dataset {name!r} has images, videos or audio, and `streaming: true` streams text rows only here; "
            "remove `streaming`.")


def streaming_problems(cfg: Any) -> list[str]:
    """Problems of a ``streaming: true`` config (empty when it can stream); notes what LLaMA-Factory does
    differently where this engine runs a config it cannot."""
    data, tr, stage = cfg.data, cfg.train, cfg.finetuning.stage
    problems: list[str] = []
    # LLaMA-Factory's refusals (hparams/data_args.py, hparams/parser.py)
    if tr.max_steps <= 0:  # an evaluation-only run too, as there
        problems.append("`streaming: true` needs `max_steps`: a stream has no length to count epochs in (LLaMA-Factory "
                        "refuses it too). Set `max_steps` (e.g. `max_steps: 1000`), or remove `streaming`.")
    if data.max_samples is not None:
        problems.append("`max_samples` cannot be used with `streaming: true` (LLaMA-Factory refuses the pair too); "
                        "remove `max_samples`, or remove `streaming`.")
    if 1e-6 < data.val_size < 1:
        problems.append(f"`val_size: {data.val_size}` is a fraction, and `streaming: true` holds out a number of rows "
                        "(the first rows of the stream; LLaMA-Factory refuses a fraction too). Give a row count, e.g. "
                        "`val_size: 100`.")
    # where this engine does not stream
    if stage not in STREAMED_STAGES:
        problems.append(f"`streaming: true` streams stages {', '.join(STREAMED_STAGES[:-1])} and {STREAMED_STAGES[-1]} "
                        f"here (this config has `stage: {stage}`); remove `streaming` (the data is then tokenized "
                        "once, before training).")
    if tr.max_tokens_per_batch:
        problems.append("`max_tokens_per_batch` (token-budget batches) groups rows of a known set, and `streaming: "
                        "true` has none; remove one of them.")
    generating = [key for key in ("do_predict", "predict_with_generate") if getattr(tr, key)]
    if generating:
        problems.append(f"`{generating[0]}: true` with `streaming: true`: prompts to generate from are read without "
                        "streaming here, so they would not be the streamed evaluation rows (a streamed `val_size` "
                        f"split, `eval_dataset` in the stream's order). Remove `{generating[0]}`, and predict in a run "
                        "without `streaming` (`lf-engine eval` with `do_predict: true`).")
    if not problems and tr.dataloader_num_workers == 0:
        _note("`streaming: true` with `dataloader_num_workers: 0`: each dataset streams as one shard, the order "
              "LLaMA-Factory 0.9.5 gives with `dataloader_num_workers: 1` (with 0 it splits local files into no "
              "shards and stops with StopIteration).")
    if not problems and cfg.train.group_by_length:
        _note("`group_by_length` does not apply to streamed rows (a stream has no lengths to sort); rows "
              "train in the stream's order, as in LLaMA-Factory.")
    return problems
