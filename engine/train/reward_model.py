"""GRPO/RLOO's ``reward_model``: the output folder of an ``rm`` run, scoring prompt + completion.

Two kinds of folder score here, each at its rows' last attended token (as LLaMA-Factory 0.9.5 reads a value head):

- this project's rm output: a ``SEQ_CLS`` LoRA adapter with its ``score`` head, or a whole
  ``*ForSequenceClassification``;
- LLaMA-Factory's rm output: a ``CAUSAL_LM`` LoRA adapter or a whole causal LM, with ``value_head.safetensors``
  beside it (:mod:`engine.models.value_head`), scored as its ``get_scores`` does (the head's bias included).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.train.rl_checks import adapter_base, check_reward_model

logger = logging.getLogger(__name__)


def load_reward_model(cfg: RunConfig, template: Any) -> Any:
    """A reward function scoring prompt + completion with the reward model ``cfg.finetuning.reward_model``."""
    from dataclasses import replace

    import torch

    from engine.config import load_config
    from engine.models import load_model, load_tokenizer
    from engine.models.value_head import ValueHeadScorer, read_value_head, score_last_attended, value_head_file

    folder = Path(cfg.finetuning.reward_model).expanduser()
    problems = check_reward_model(str(folder), cfg)
    if problems:
        raise UserError(problems[0])
    saved = load_config(folder / "lf_config.yaml") if (folder / "lf_config.yaml").is_file() else None
    adapter = (folder / "adapter_config.json").is_file()
    head_file = value_head_file(folder)
    head = read_value_head(head_file) if head_file is not None else None  # a damaged head refused before any load
    if adapter:
        from engine.checkpoints import read_adapter_config

        base = adapter_base(folder, read_adapter_config(folder))  # bounded; check_reward_model named a bad one
        model_args = replace(cfg.model, model_name_or_path=base, adapter_name_or_path=str(folder), quantization_bit=None)
    else:
        model_args = replace(cfg.model, model_name_or_path=str(folder), adapter_name_or_path=None, quantization_bit=None)
    if saved and saved.model.template and cfg.model.template and saved.model.template != cfg.model.template:
        logger.warning("The reward model was trained with template %s and the policy uses %s; it scores text in the "
                       "policy's format.", saved.model.template, cfg.model.template)
    if (folder / "tokenizer_config.json").is_file():  # the rm run saved the tokenizer it trained with
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=cfg.model.trust_remote_code)
        tokenizer.padding_side = "right"
        tokenizer.pad_token = tokenizer.pad_token or tokenizer.eos_token
    else:
        tokenizer = load_tokenizer(model_args)
    ft = replace(cfg.finetuning, stage="rm", finetuning_type="lora" if adapter else "full")
    if head is not None:  # LLaMA-Factory's: the causal LM (adapter merged) and its value head
        model: Any = ValueHeadScorer(load_model(model_args, ft, tokenizer, is_trainable=False, task="causal_lm"),
                                     head)
    else:
        model = load_model(model_args, ft, tokenizer, is_trainable=False, task="reward")
        score_last_attended(model)
    suffix = template.stop_words[0] if template.stop_words else (tokenizer.eos_token or "")
    limit, chunk = cfg.data.cutoff_len, max(1, cfg.train.per_device_eval_batch_size) * 8

    def reward_model(prompts: list, completions: list, **kwargs: Any) -> list[float]:
        texts = [p + c + suffix for p, c in zip(prompts, completions)]
        scores: list[float] = []
        device = next(model.parameters()).device
        for start in range(0, len(texts), chunk):
            batch = tokenizer(texts[start:start + chunk], return_tensors="pt", padding=True, truncation=True,
                              max_length=limit, add_special_tokens=False).to(device)
            with torch.inference_mode():
                output = model(**batch)
            scores += (output if head_file is not None else output.logits)[:, 0].float().tolist()
        return scores

    kind = "LoRA adapter" if adapter else "full model"
    logger.info("Reward model %s loaded (%s%s).", folder, kind,
                f" with LLaMA-Factory's value head {head_file.name}" if head_file is not None else "")
    return reward_model
