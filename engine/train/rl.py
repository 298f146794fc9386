"""Reinforcement learning stages on TRL's trainers: GRPO and RLOO with built-in, user and reward-model rewards.

- Data: any SFT-shaped dataset. Each row's conversation before its last reply becomes the prompt, rendered with
  our template (so generation sees exactly the chat format of SFT and chat); the last reply becomes the ``answer``
  column, passed to every reward with ``system`` and ``tools``.
- Rewards: ``reward_funcs`` (engine.rewards) plus ``reward_model`` (the output folder of an ``rm`` run), weighed by
  ``reward_weights``.
- Watching: TRL's per-step metrics (reward and reward_std, ``rewards/NAME/mean|std``, ``kl``,
  ``completions/mean_length``, ``completions/clipped_ratio``, ``clip_ratio/*``) reach events.jsonl through the
  EventsCallback; every ``log_completions_steps`` steps a sample of completions with their rewards is appended to
  ``completions.jsonl`` in the run folder.
- ``stage: ppo`` is refused: TRL 1.16 has no PPO trainer; GRPO/RLOO with ``reward_model`` run the same idea.
"""

from __future__ import annotations

import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.runs import RUN_SAMPLES
from engine.train.arguments import build_args
from engine.train.fused_head import refuse_adapted_head
from engine.train.parallel.fsdp import ShardingMixin
from engine.train.reward_model import load_reward_model
from engine.train.rl_checks import check_rl, check_stage
from engine.wording import counted

logger = logging.getLogger(__name__)

COMPLETIONS_FILE = RUN_SAMPLES
SAMPLE_ROWS = 16
"""Completions written per sample (whole prompt groups first)."""
# ------------------------------------------------------------------------------------------------ data
def prompt_columns(examples: list[dict], tokenizer: Any, template: Any, cutoff_len: int,
                   ) -> tuple[dict[str, list], dict[str, int]]:
    """Columns ``prompt`` (template-rendered text ending with the generation prompt), ``prompt_ids``, ``answer``
    (the reference reply), ``system`` and ``tools``; plus the usual stats.

    The prompt is the one sft trains the last reply on for the same row and options: the conversation encoded turn
    by turn (history replies keep their thoughts, or get the empty one with enable_thinking false, as sft's do), not
    as one flattened prompt (mask_history, which would drop them, is sft's only: refused for grpo/rloo)."""
    from engine.data.tokenize import TokenizeOptions, encode_pairs

    opts = TokenizeOptions(cutoff_len=cutoff_len)
    columns: dict[str, list] = {"prompt": [], "prompt_ids": [], "answer": [], "system": [], "tools": []}
    stats = {"rows": len(examples), "kept": 0, "truncated": 0, "dropped": 0, "total_tokens": 0, "trainable_tokens": 0}
    for example in examples:
        messages = example["messages"]
        if len(messages) < 2 or messages[-2]["role"] not in ("user", "observation"):
            stats["dropped"] += 1
            continue
        pending = {**example, "messages": messages[:-1] + [{"role": "assistant", "content": ""}]}
        pairs = encode_pairs(tokenizer, template, pending, opts)
        ids = [token for prompt, reply in pairs[:-1] for token in prompt + reply] + pairs[-1][0]
        if len(ids) > cutoff_len:
            stats["truncated"] += 1
            ids = ids[-cutoff_len:]
        columns["prompt"].append(tokenizer.decode(ids, skip_special_tokens=False))
        columns["prompt_ids"].append(ids)
        columns["answer"].append(template.reply_text(messages[-1]))
        columns["system"].append(example.get("system") or "")
        columns["tools"].append(example.get("tools") or "")
        stats["kept"] += 1
        stats["total_tokens"] += len(ids)
    return columns, stats


def get_prompt_dataset(cfg: RunConfig, tokenizer: Any, template: Any) -> Any:
    """Train/eval prompt sets for GRPO/RLOO from ``dataset``/``eval_dataset``/``val_size`` (any SFT format)."""
    from datasets import Dataset

    from engine.data import DatasetBundle, DatasetError, configured_template, load_examples, split_eval

    data, seed = cfg.data, cfg.train.seed
    template = configured_template(cfg, template)
    layout: dict[str, Any] = {}  # the rows as sft's split sees them (unusable ones included), so the held-out
    train = load_examples(data, data.dataset, "sft", seed, layout=layout) if data.dataset else []  # prompts are sft's
    evaluation = load_examples(data, data.eval_dataset, "sft", seed) if data.eval_dataset else []
    if data.val_size and train and not evaluation:
        train, evaluation = split_eval(train, data.val_size, seed, layout)
    bundle = DatasetBundle()
    for split, examples in (("train", train), ("eval", evaluation)):
        if not examples:
            continue
        columns, stats = prompt_columns(examples, tokenizer, template, data.cutoff_len)
        if not stats["kept"]:
            raise DatasetError(f"None of the {stats['rows']} {split} rows ends with a reply to a user turn, so there "
                               "is no prompt to sample from; use a dataset of prompts with reference answers.")
        logger.info("%s prompts: %d of %d rows (%d cut to cutoff_len, %d without a prompt).", split.capitalize(),
                    stats["kept"], stats["rows"], stats["truncated"], stats["dropped"])
        setattr(bundle, split, Dataset.from_dict(columns))
        bundle.stats[split] = stats
    return bundle


# ------------------------------------------------------------------------------------------------ rewards
def build_reward_funcs(cfg: RunConfig, template: Any) -> tuple[list, list[float] | None]:
    """The reward callables (reward_funcs, then the reward model) and their weights."""
    from engine.data import configured_template
    from engine.rewards import build_rewards, reward_weights

    template = configured_template(cfg, template)
    funcs: list = list(build_rewards(cfg.finetuning, template))
    if cfg.finetuning.reward_model:
        funcs.append(load_reward_model(cfg, template))
    if not funcs:
        raise UserError(check_rl(cfg)[0])
    return funcs, reward_weights(cfg.finetuning, len(funcs))


# ------------------------------------------------------------------------------------------------ trainers
def _rl_trainer(base: type) -> type:
    """TRL's GRPO/RLOO trainer that takes our template-rendered prompt ids as they are and samples completions
    into completions.jsonl."""

    class RLTrainer(ShardingMixin, base):  # FSDP2 on CPU processes too
        lf_prompt_ids: dict[str, list[int]] = {}
        lf_every = 1
        lf_weights: list[float] | None = None
        lf_last_sample = -1
        lf_rewards: list[float] = []

        def _tokenize_prompts(self, prompts: list):
            if prompts and isinstance(prompts[0], str):
                ids = [self.lf_prompt_ids.get(p) or self.processing_class(text=p, add_special_tokens=False)["input_ids"]
                       for p in prompts]
                return [list(x) for x in ids], None, {}
            return super()._tokenize_prompts(prompts)

        def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
            super().log(logs, start_time)  # TRL adds its averaged metrics (reward, kl, ...) to ``logs``
            reward = logs.get("reward")
            if self.model.training and isinstance(reward, float) and not math.isnan(reward):
                self.lf_rewards.append(reward)

        def train(self, *args: Any, **kwargs: Any) -> Any:
            self.lf_rewards = []
            output = super().train(*args, **kwargs)
            trend = reward_trend(self.lf_rewards)
            if not trend and self.state.global_step:
                logger.warning("No step had a reward: every reward function returned None (or NaN) for every "
                               "completion, so the run learned nothing. Check that the rewards apply to this data "
                               "(lf-engine rewards CONFIG shows their scores on a few samples).")
            if trend:
                output.metrics.update(trend)
                logger.info("Mean reward %.4g over the first %d logged steps, %.4g over the last %d.",
                            trend["reward_first"], trend["reward_window"], trend["reward_last"],
                            trend["reward_window"])
            return output

        def _generate_and_score_completions(self, inputs):
            output = super()._generate_and_score_completions(inputs)
            step = self.state.global_step + 1
            if self.model.training and step % self.lf_every == 0 and step != self.lf_last_sample:
                self.lf_last_sample = step
                try:
                    self._write_sample(step)
                except OSError as err:  # a full disk must not stop training; the next sample retries
                    logger.warning("Could not write %s: %s", COMPLETIONS_FILE, err)
            return output

        def _write_sample(self, step: int) -> None:
            if not self.accelerator.is_main_process:
                return
            logs = self._logs
            prompts, completions = list(logs["prompt"]), list(logs["completion"])
            rewards = {name: list(values) for name, values in logs["rewards"].items()}
            advantages = list(logs["advantages"])
            names = list(self.reward_func_names)
            weights = self.lf_weights or [1.0] * len(names)
            lines = []
            for i in range(min(len(completions), SAMPLE_ROWS)):
                per_func = {n: _finite(rewards.get(n, [None] * (i + 1))[i]) for n in names}
                lines.append(json.dumps({
                    "step": step, "prompt": str(prompts[i])[-2000:], "completion": str(completions[i])[:4000],
                    "rewards": per_func, "reward": weighted_total(weights, per_func.values()),
                    "advantage": _finite(advantages[i]) if i < len(advantages) else None,
                }, ensure_ascii=False))
            from engine.runs import open_append

            with open_append(Path(self.args.output_dir) / COMPLETIONS_FILE) as handle:  # never through a link
                handle.write(("\n".join(lines) + "\n").encode("utf-8", "backslashreplace"))

    RLTrainer.__name__ = f"LF{base.__name__}"
    return RLTrainer


def weighted_total(weights: list[float], values: Any) -> float | None:
    """The weighted sum of a completion's rewards, skipping those that do not apply (None); None when none
    applies (TRL then trains on 0 for it and warns)."""
    pairs = [(w, v) for w, v in zip(weights, values) if v is not None]
    return round(sum(w * v for w, v in pairs), 6) if pairs else None


def reward_trend(rewards: list[float]) -> dict[str, float]:
    """Mean reward over the first and the last logged steps (a third of them, at most 5): the run's summary."""
    if not rewards:
        return {}
    window = max(1, min(5, len(rewards) // 3))
    return {"reward_first": round(sum(rewards[:window]) / window, 4),
            "reward_last": round(sum(rewards[-window:]) / window, 4), "reward_window": window}


def _finite(value: Any) -> float | None:
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(value) or math.isinf(value) else round(value, 6)


def _set_stop_tokens(model: Any, tokenizer: Any, template: Any) -> None:
    """Generation stops at EOS and at every single-token stop word of the template."""
    target = model.get_base_model() if hasattr(model, "get_base_model") else model
    if getattr(target, "generation_config", None) is not None:
        target.generation_config.eos_token_id = template.get_stop_token_ids(tokenizer)


def _build(stage: str, cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    from engine.templates import get_template

    if stage == "grpo":
        from trl import GRPOConfig as config_cls
        from trl import GRPOTrainer as trainer_cls
    else:
        from trl import RLOOConfig as config_cls
        from trl import RLOOTrainer as trainer_cls
    ft = cfg.finetuning
    check_stage(cfg)
    refuse_adapted_head(model, stage)
    template = get_template(cfg.model.template, tokenizer)
    funcs, weights = build_reward_funcs(cfg, template)
    if os.environ.get("RANK", "0") == "0":
        from engine.rewards import reward_names
        from engine.rewards.user import keep_reward_code

        keep_reward_code(reward_names(ft), cfg.train.output_dir)
    specific: dict[str, Any] = {
        "num_generations": ft.num_generations, "max_completion_length": ft.max_completion_length,
        "temperature": cfg.generation.temperature, "reward_weights": weights, "log_completions": False,
        "include_num_input_tokens_seen": "no",  # TRL counts prompt + completion tokens itself (num_tokens)
    }
    specific.update(sampling_settings(cfg))
    if ft.beta is not None:
        specific["beta"] = ft.beta
    if ft.loss_type is not None:
        specific["loss_type"] = ft.loss_type
    prompt_ids = {p: ids for split in (bundle.train, bundle.eval) if split is not None
                  for p, ids in zip(split["prompt"], split["prompt_ids"])}
    train, evaluation = (split.remove_columns("prompt_ids") if split is not None and "prompt_ids" in split.column_names
                         else split for split in (bundle.train, bundle.eval))
    train = train if train is not None else evaluation
    if not cfg.train.do_train:  # evaluation alone: TRL still checks the generation batch against num_generations
        specific["per_device_train_batch_size"] = ft.num_generations
        specific["gradient_accumulation_steps"] = 1
    args = build_args(config_cls, cfg, has_eval=evaluation is not None, **specific)
    _set_stop_tokens(model, tokenizer, template)
    trainer_type = _rl_trainer(trainer_cls)
    trainer = trainer_type(
        model=model, reward_funcs=funcs, args=args, train_dataset=train, eval_dataset=evaluation,
        processing_class=tokenizer, callbacks=callbacks,
    )
    trainer.lf_prompt_ids = prompt_ids
    trainer.lf_every, trainer.lf_weights = ft.log_completions_steps, weights
    logger.info("%s: %s %s, %d completions per prompt, up to %d tokens each.", stage.upper(), counted(len(funcs), "reward"),
                ", ".join(trainer.reward_func_names), ft.num_generations, ft.max_completion_length)
    return trainer


def sampling_settings(cfg: RunConfig) -> dict[str, Any]:
    """TRL's sampling keys from the generation keys a config changed: ``top_p``, ``top_k`` and
    ``repetition_penalty`` at their chat defaults (0.7, 50, 1.0) leave TRL's sampling from the whole distribution;
    ``temperature`` always applies. ``do_sample: false`` and ``max_new_tokens`` are refused for RL
    (:func:`engine.train.rl_checks.check_rl`)."""
    from engine.config.schema import GenerationArgs

    gen, defaults = cfg.generation, GenerationArgs()
    return {key: getattr(gen, key) for key in ("top_p", "top_k", "repetition_penalty")
            if getattr(gen, key) != getattr(defaults, key)}


def build_grpo_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    return _build("grpo", cfg, model, tokenizer, bundle, callbacks)


def build_rloo_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    return _build("rloo", cfg, model, tokenizer, bundle, callbacks)
