"""Our tokenized rows of a config, flattened per stage the way the golden digests of LLaMA-Factory 0.9.5's rows were
taken (tests that assert equality with rows recorded from it: thinking modes, tiny cutoffs, lenient
dataset_info.json), with the tiny qwen3 family tokenizer and template."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from golden.tokenizers import load

from engine.data import get_dataset
from engine.templates import get_template


def digest(row: Any) -> str:
    """A short fingerprint of one flattened row (its JSON)."""
    return hashlib.sha1(json.dumps(row).encode()).hexdigest()[:16]


def qwen3_rows(cfg: Any) -> tuple[Any, list[list[list[int]]]]:
    """(the tokenizer, the training rows of ``cfg``): per row, [ids, labels] (sft), [prompt + chosen, prompt +
    rejected] (dpo), [chosen, rejected] (rm), [prompt + completion, KL prompt + KL completion] (kto) or [ids] (pt)."""
    tokenizer = load("family", "qwen3")
    template = get_template("qwen3")
    template.fix_tokenizer(tokenizer)
    data = get_dataset(cfg, tokenizer, template).train
    stage = cfg.finetuning.stage
    if stage == "dpo":
        rows = [[p + c, p + r] for p, c, r in zip(data["prompt_ids"], data["chosen_ids"], data["rejected_ids"])]
    elif stage == "rm":
        rows = [[list(c), list(r)] for c, r in zip(data["chosen_ids"], data["rejected_ids"])]
    elif stage == "kto":
        rows = [[p + c, kp + kc] for p, c, kp, kc in zip(data["prompt_ids"], data["completion_ids"],
                                                         data["KL_prompt_ids"], data["KL_completion_ids"])]
    elif stage == "pt":
        rows = [[list(ids)] for ids in data["input_ids"]]
    else:
        rows = [[list(ids), list(labels)] for ids, labels in zip(data["input_ids"], data["labels"])]
    return tokenizer, rows
