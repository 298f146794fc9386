"""Checks across the keys of a run config: pairs that cannot go together, and keys that need another one.

Each key's own value is checked as :mod:`engine.config.loader` reads it; what lies between keys is checked here,
once the whole config is built, and every problem is reported with the others.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.config.limits import shorten
from engine.config.parallel import check_parallel
from engine.config.schema import packs_rows
from engine.wording import counted

logger = logging.getLogger(__name__)

VAL_SIZE_OFF = 1e-6  # LLaMA-Factory splits off evaluation rows only for a val_size above this


def cross_checks(cfg: Any) -> list[str]:
    """The problems of a built :class:`engine.config.loader.RunConfig` that lie between keys (each key's own value
    was checked as it was read), each naming the fix; fills the defaults that depend on other keys
    (``lora_alpha``, ``packing`` under ``neat_packing``)."""
    problems = []
    ft, tr = cfg.finetuning, cfg.train
    if tr.bf16 and tr.fp16:
        problems.append("`bf16` and `fp16` are both true; choose one.")
    if ft.lora_alpha is None:
        ft.lora_alpha = ft.lora_rank * 2
    if ft.pref_loss in ("orpo", "simpo") and ft.stage != "dpo":
        problems.append(f"`pref_loss: {ft.pref_loss}` applies to `stage: dpo` only (this config has `stage: {ft.stage}`).")
    if cfg.model.use_unsloth:
        problems.append("`use_unsloth: true` is not supported by this engine; remove it (sdpa attention is used).")
    if cfg.data.mask_history and cfg.data.train_on_prompt:  # LLaMA-Factory refuses the pair as well
        problems.append("`mask_history: true` cannot be combined with `train_on_prompt: true` (the prompts of every "
                        "turn would be trained, but the earlier replies not); set one of them to false.")
    if cfg.data.interleave_probs not in (None, ""):
        try:
            weights = [float(part) for part in str(cfg.data.interleave_probs).split(",")]
        except ValueError:
            problems.append(f"`interleave_probs: {shorten(str(cfg.data.interleave_probs), 60)}` must be comma-separated "
                            "numbers, one per dataset, like `0.3,0.7`.")
        else:
            problems += _interleave_problems(cfg.data, weights)
    if cfg.data.neat_packing and cfg.data.packing is None:
        cfg.data.packing = True
    if cfg.data.neat_packing and ft.stage not in ("pt", "sft"):  # LLaMA-Factory refuses it too
        problems.append(f"`neat_packing: true` packs rows of stages sft and pt only (this config has `stage: "
                        f"{ft.stage}`); remove it.")
    elif cfg.data.packing and ft.stage not in ("pt", "sft"):
        logger.info("`packing: true` with `stage: %s`: its rows are not packed, but cutoff_len counts one token less, "
                    "as in LLaMA-Factory.", ft.stage)
    problems += _cutoff_problems(cfg.data)
    problems += _val_size_problems(cfg.data)
    problems += _stage_key_problems(cfg)
    if tr.eval_strategy != "no" and not (cfg.data.eval_dataset or cfg.data.val_size):
        problems.append(f"`eval_strategy: {tr.eval_strategy}` needs evaluation data: set `eval_dataset` or `val_size`.")
    if tr.save_strategy == "best" and tr.eval_strategy == "no":
        problems.append("`save_strategy: best` needs `eval_strategy` steps or epoch.")
    problems += _schedule_problems(tr, cfg.extra)
    if ft.finetuning_type not in ("lora", "oft") and cfg.model.quantization_bit:
        problems.append("`quantization_bit` works with `finetuning_type: lora` only (QLoRA).")
    if ft.use_muon and ft.stage not in ("pt", "sft"):
        problems.append(f"`use_muon: true` works with stages pt and sft (this config has `stage: {ft.stage}`).")
    if tr.max_tokens_per_batch and (ft.stage not in ("pt", "sft") or packs_rows(ft.stage, cfg.data)):
        problems.append("`max_tokens_per_batch` (token-budget batches) works with stages pt and sft without packing; "
                        "unset it, or set `packing: false`." if packs_rows(ft.stage, cfg.data) else
                        f"`max_tokens_per_batch` (token-budget batches) works with stages pt and sft (this config has "
                        f"`stage: {ft.stage}`); unset it.")
    if tr.max_tokens_per_pass and ft.stage not in ("pt", "sft"):
        problems.append(f"`max_tokens_per_pass` (forward and backward in groups of whole rows) works with stages pt "
                        f"and sft (this config has `stage: {ft.stage}`); unset it.")
    if ft.stage == "rm" and tr.do_predict:  # the reward model has no generate(): a traceback after loading it
        problems.append("`do_predict: true` with `stage: rm`: a reward model scores answer pairs and does not generate "
                        "replies, and writing its scores as predictions is not implemented here. Use `do_eval: true` "
                        "(reward accuracy and margins on eval_dataset) instead of `do_predict`.")
    if cfg.data.streaming:
        from engine.config.streaming_checks import streaming_problems

        problems += streaming_problems(cfg)
    if ft.finetuning_type == "lora" and ft.use_dora and ft.pissa_init:
        problems.append("`use_dora` and `pissa_init` cannot be combined; choose one.")
    problems.extend(check_parallel(cfg))
    return problems


def _schedule_problems(tr: Any, extra: dict[str, Any]) -> list[str]:
    """Schedules and settings transformers takes in its TrainingArguments but fails on when the trainer starts,
    after the model has loaded: a schedule missing what it needs, and a best model that cannot be kept."""
    import json

    kwargs = json.loads(tr.lr_scheduler_kwargs) if tr.lr_scheduler_kwargs else {}  # the loader made it a mapping's JSON
    schedule, problems = tr.lr_scheduler_type, []
    if schedule == "reduce_lr_on_plateau" and tr.eval_strategy == "no":
        problems.append("`lr_scheduler_type: reduce_lr_on_plateau` lowers the rate when the eval loss stops falling, "
                        "so it needs `eval_strategy: steps` or `epoch` (with evaluation data); or choose another "
                        "schedule.")
    if schedule == "cosine_with_min_lr" and not {"min_lr", "min_lr_rate"} & set(kwargs):
        problems.append("`lr_scheduler_type: cosine_with_min_lr` needs its floor in `lr_scheduler_kwargs`, e.g. "
                        "`lr_scheduler_kwargs: {min_lr_rate: 0.1}` (a tenth of the peak) or `{min_lr: 1.0e-6}`.")
    if schedule == "warmup_stable_decay" and "num_decay_steps" not in kwargs:
        problems.append("`lr_scheduler_type: warmup_stable_decay` needs the length of its decay in "
                        "`lr_scheduler_kwargs`, e.g. `lr_scheduler_kwargs: {num_decay_steps: 100}`.")
    if extra.get("load_best_model_at_end") is True and tr.save_strategy not in ("best", tr.eval_strategy):
        problems.append(f"`load_best_model_at_end: true` keeps the best checkpoint, so checkpoints must be saved when "
                        f"the model is evaluated: set `save_strategy` and `eval_strategy` alike (now "
                        f"{tr.save_strategy} and {tr.eval_strategy}), or use `save_strategy: best`.")
    return problems


def _interleave_problems(data: Any, weights: list[float]) -> list[str]:
    """``interleave_probs`` weighs interleaved datasets only, and must give one weight per name in ``dataset`` and
    in ``eval_dataset`` (LLaMA-Factory's rules), and a name given twice cannot take one (LLaMA-Factory uses such a
    dataset once, and then fails on the extra weight)."""
    from engine.data.loader import split_names

    if data.mix_strategy == "concat":
        return ["`interleave_probs` weighs datasets that are interleaved, but `mix_strategy` is `concat` (the "
                "default: one after another); set `mix_strategy: interleave_under` or `interleave_over`, or remove "
                "`interleave_probs` (LLaMA-Factory refuses the pair too)."]
    evaluated = split_names(data.eval_dataset)
    if evaluated and len(evaluated) != len(weights):  # the same weights mix the evaluation datasets
        return [f"`interleave_probs` gives {counted(len(weights), 'weight')} for {counted(len(evaluated), 'dataset')} in `eval_dataset`, "
                "which it weighs too; give as many evaluation datasets as weights (LLaMA-Factory refuses it too)."]
    names = split_names(data.dataset)
    if not names:
        return []
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        return [f"`interleave_probs` weighs each name in `dataset`, but {', '.join(f'`{n}`' for n in twice)} is named "
                "more than once (it would be used once, and LLaMA-Factory fails on such a config); name each dataset "
                "once."]
    if len(weights) != len(names):
        return [f"`interleave_probs` gives {counted(len(weights), 'weight')} for {counted(len(names), 'dataset')} in `dataset`; give "
                "one per dataset, in the same order."]
    return []


TINY_CUTOFF = 8
"""Below this many tokens a row keeps little of its text: such a cutoff_len is taken (LLaMA-Factory takes it), with a
warning."""


def _cutoff_problems(data: Any) -> list[str]:
    """A tiny ``cutoff_len`` is LLaMA-Factory's too (it has no lower bound: each (prompt, reply) pair is cut by its
    ``infer_seqlen``, rows left without a trained token are kept), so it is taken with a warning; but packing takes
    one token off it there (``DataArguments.__post_init__``), and ``cutoff_len: 1`` with packing leaves none: pt
    blocks fail with a ZeroDivisionError there and every other row is empty."""
    packing = bool(data.packing or data.neat_packing)
    if data.cutoff_len < 2 and packing:
        return [f"`cutoff_len: {data.cutoff_len}` with `{'neat_packing' if data.neat_packing else 'packing'}: true` "
                "leaves no token per row: packing takes one token off cutoff_len, as in LLaMA-Factory (which fails "
                "on this config); raise cutoff_len to 2 or more, or turn packing off."]
    if 1 <= data.cutoff_len < TINY_CUTOFF:  # (below 1 it is refused by its bound: no warning that it is kept)
        logger.warning("`cutoff_len: %d` keeps at most %s of each row (less with packing), so most rows are "
                       "cut short and some may have no token left to train on (kept, as LLaMA-Factory keeps them); "
                       "raise cutoff_len to train on whole examples.", data.cutoff_len, counted(data.cutoff_len, "token"))
    return []


def _val_size_problems(data: Any) -> list[str]:
    """``val_size`` splits ``dataset``: LLaMA-Factory refuses it without one, and beside ``eval_dataset`` (it would
    not say which evaluation set is meant); one of at most 1e-6 (a negative one too) holds out nothing there, so it is
    set to 0 here."""
    if data.val_size <= VAL_SIZE_OFF:
        if data.val_size:
            logger.warning("`val_size: %s` holds out no rows (LLaMA-Factory splits off evaluation rows only for a "
                           "val_size above 1e-6); give a fraction such as 0.1 or a row count to evaluate.",
                           data.val_size)
            data.val_size = 0.0
        return []
    if not data.dataset:
        return [f"`val_size: {data.val_size}` holds out part of `dataset`, which is not set (LLaMA-Factory refuses "
                "this too); set `dataset`, or remove `val_size`."]
    if data.eval_dataset:
        return [f"`val_size: {data.val_size}` and `eval_dataset: {shorten(str(data.eval_dataset), 60)}` are both set; "
                "evaluation uses one of them (LLaMA-Factory refuses the pair too): remove `val_size` to evaluate on "
                "eval_dataset, or `eval_dataset` to hold out part of `dataset`."]
    return []


def _stage_key_problems(cfg: Any) -> list[str]:
    """What LLaMA-Factory 0.9.5 refuses as it reads a training or evaluation config (its get_train_args): keys of
    the sft stage elsewhere, predictions that would not be generated, a best-model reload for rm, and an evaluation
    with no data to evaluate on."""
    ft, tr, data = cfg.finetuning, cfg.train, cfg.data
    problems = []
    sft_only = [key for key, on in (("predict_with_generate", tr.predict_with_generate),
                                    ("train_on_prompt", data.train_on_prompt), ("mask_history", data.mask_history)) if on]
    if ft.stage != "sft" and sft_only:
        one = len(sft_only) == 1
        problems.append(f"{' and '.join(f'`{key}: true`' for key in sft_only)} {'applies' if one else 'apply'} to "
                        f"`stage: sft` only (this config has `stage: {ft.stage}`; LLaMA-Factory refuses "
                        f"{'it' if one else 'them'} too); remove {'it' if one else 'them'}.")
    if ft.stage == "sft" and tr.do_predict and not tr.predict_with_generate:
        problems.append("`do_predict: true` writes generated replies, which needs `predict_with_generate: true` "
                        "(LLaMA-Factory refuses it without); add it.")
    if ft.stage in ("rm", "ppo") and cfg.extra.get("load_best_model_at_end"):
        problems.append(f"`load_best_model_at_end: true` does not work with `stage: {ft.stage}` (LLaMA-Factory refuses "
                        "it too); remove it.")
    if (tr.do_eval or tr.do_predict or tr.predict_with_generate) and not data.eval_dataset \
            and data.val_size <= VAL_SIZE_OFF:
        wanted = next(key for key in ("do_eval", "do_predict", "predict_with_generate") if getattr(tr, key))
        problems.append(f"`{wanted}: true` needs evaluation data: set `eval_dataset`, or `val_size` to hold out part "
                        "of `dataset` (LLaMA-Factory refuses it without).")
    return problems

