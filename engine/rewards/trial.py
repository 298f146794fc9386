""""Try it": sample a few completions of the current model on a few dataset prompts and score them with the
configured rewards, before any training (``lf-engine rewards CONFIG``; the board runs it in a subprocess).

This imports user reward files, so it only ever runs in its own process.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from engine.config import RunConfig

logger = logging.getLogger(__name__)


def try_rewards(cfg: RunConfig, prompts: int = 3, samples: int | None = None) -> dict[str, Any]:
    """Score ``samples`` sampled completions (default num_generations, at most 8) of ``prompts`` dataset rows.

    Returns ``{"rewards": [names], "weights": [...], "rows": [{"prompt", "answer", "completion", "tokens",
    "rewards": {name: value}, "reward"}], "mean": {name: mean}, "errors": {name: count}}``.

    Raises:
        UserError: for a bad config, dataset or reward (the same checks and messages as training).
    """
    import torch

    from engine.models import load_model, load_tokenizer
    from engine.templates import get_template
    from engine.train.rl import build_reward_funcs, get_prompt_dataset, sampling_settings, weighted_total
    from engine.train.rl_checks import check_stage

    check_stage(cfg)

    tokenizer = load_tokenizer(cfg.model, padding_side="left")
    template = get_template(cfg.model.template, tokenizer)
    if template.fix_tokenizer(tokenizer):
        cfg.model.resize_vocab = True
    bundle = get_prompt_dataset(cfg, tokenizer, template)
    data = bundle.train if bundle.train is not None else bundle.eval
    rows = data.select(range(min(prompts, len(data))))
    funcs, weights = build_reward_funcs(cfg, template)
    for func in funcs:
        if hasattr(func, "trial"):  # the guarded reward_funcs (a reward model is not user code)
            func.trial = True
    weights = weights or [1.0] * len(funcs)
    model = load_model(cfg.model, cfg.finetuning, tokenizer, is_trainable=False)
    count = samples or min(cfg.finetuning.num_generations, 8)
    stops = template.get_stop_token_ids(tokenizer)
    device = next(model.parameters()).device
    out_rows: list[dict[str, Any]] = []
    torch.manual_seed(cfg.train.seed)
    for row in rows:
        ids = torch.tensor([row["prompt_ids"]] * count, device=device)
        with torch.inference_mode():
            generated = model.generate(
                input_ids=ids, attention_mask=torch.ones_like(ids), do_sample=True,
                temperature=cfg.generation.temperature, **{"top_p": 1.0, "top_k": 0, **sampling_settings(cfg)},
                max_new_tokens=cfg.finetuning.max_completion_length, eos_token_id=stops,
                pad_token_id=tokenizer.pad_token_id)
        completion_ids = []
        for sequence in generated[:, ids.shape[1]:].tolist():
            cut = next((i + 1 for i, token in enumerate(sequence) if token in stops), len(sequence))
            completion_ids.append(sequence[:cut])
        texts = tokenizer.batch_decode(completion_ids, skip_special_tokens=True)
        kwargs = {"answer": [row["answer"]] * count, "system": [row["system"]] * count,
                  "tools": [row["tools"]] * count, "completion_ids": completion_ids, "trainer_state": None}
        scores = {getattr(f, "__name__", "reward"): f(prompts=[row["prompt"]] * count, completions=texts, **kwargs)
                  for f in funcs}
        for i, text in enumerate(texts):
            per = {name: values[i] for name, values in scores.items()}
            out_rows.append({"prompt": row["prompt"], "answer": row["answer"], "completion": text,
                             "tokens": len(completion_ids[i]), "rewards": per,
                             "reward": weighted_total(weights, per.values())})
    names = [getattr(f, "__name__", "reward") for f in funcs]
    means = {}
    for name in names:
        values = [r["rewards"][name] for r in out_rows if r["rewards"][name] is not None]
        means[name] = sum(values) / len(values) if values else None
    totals = [r["reward"] for r in out_rows if r["reward"] is not None]
    means["reward"] = sum(totals) / len(totals) if totals else math.nan
    return {"rewards": names, "weights": weights, "rows": out_rows, "mean": means,
            "errors": {getattr(f, "__name__", "reward"): getattr(f, "errors", 0) for f in funcs}}


def format_table(result: dict[str, Any], width: int = 60) -> str:
    """The result as plain text lines for the terminal."""
    names = result["rewards"]
    lines = ["  ".join(["reward", *names]) + "  completion"]
    for row in result["rows"]:
        cells = ["   -  " if value is None else f"{value:.3f}"
                 for value in [row["reward"], *(row["rewards"][n] for n in names)]]
        text = row["completion"].replace("\n", "\\n")
        lines.append("  ".join(cells) + "  " + (text[:width] + ("…" if len(text) > width else "")))
    means = result["mean"]
    lines.append("mean: " + ", ".join(f"{k} {v:.3f}" for k, v in means.items() if isinstance(v, float)))
    return "\n".join(lines)
