"""One training job from start to finish: load, train, save, evaluate, predict, plot."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.lifecycle import JobContext
from engine.runs import package_versions
from engine.train import preference, rl, sft

logger = logging.getLogger(__name__)

# stage -> trainer builder (the one dispatch table for training)
STAGES = {
    "pt": sft.build_trainer,
    "sft": sft.build_trainer,
    "rm": preference.build_rm_trainer,
    "dpo": preference.build_dpo_trainer,
    "kto": preference.build_kto_trainer,
    "grpo": rl.build_grpo_trainer,
    "rloo": rl.build_rloo_trainer,
    "ppo": rl.refuse_ppo,
}

OUTPUT_MARKERS = ("adapter_config.json", "model.safetensors", "model.safetensors.index.json", "pytorch_model.bin")


def check_output_dir(cfg: RunConfig) -> None:
    """Refuse to silently mix a new run into an old one's outputs."""
    out = Path(cfg.train.output_dir)
    if not out.is_dir() or cfg.train.overwrite_output_dir or cfg.train.resume_from_checkpoint:
        return
    old = sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-") or p.name in OUTPUT_MARKERS)
    if old and cfg.train.do_train:
        raise UserError(
            f"output_dir `{out}` already holds a trained run ({', '.join(old[:3])}). Choose a new output_dir, "
            "set `resume_from_checkpoint: true` to continue it, or `overwrite_output_dir: true` to replace it."
        )


def resolve_resume(cfg: RunConfig) -> str | bool | None:
    value = cfg.train.resume_from_checkpoint
    if value is None or str(value).lower() in ("false", "no", ""):
        return None
    out = Path(cfg.train.output_dir)
    if str(value).lower() in ("true", "yes", "last"):
        checkpoints = _checkpoints(out)
        if not checkpoints:
            raise UserError(f"`resume_from_checkpoint: true` but `{out}` holds no checkpoint-* folder yet; remove "
                            "`resume_from_checkpoint` to start a new run, or set `output_dir` to the run to continue.")
        return str(checkpoints[-1])
    folder = Path(value).expanduser()
    if not folder.is_dir():
        raise UserError(f"`resume_from_checkpoint: {value}` does not exist; give a checkpoint folder or `true`.")
    if not (folder / "trainer_state.json").is_file():
        inside = _checkpoints(folder)
        hint = f" Did you mean `{inside[-1]}`?" if inside else ""
        raise UserError(f"`resume_from_checkpoint: {value}` is not a checkpoint (it has no trainer_state.json); give "
                        f"a checkpoint-N folder saved by a run, or `true` for the latest one in output_dir.{hint}")
    return str(folder)


def _checkpoints(folder: Path) -> list[Path]:
    """The checkpoint-N folders inside ``folder``, oldest first."""
    found = [p for p in folder.glob("checkpoint-*") if p.is_dir() and p.name.split("-")[-1].isdigit()]
    return sorted(found, key=lambda p: int(p.name.split("-")[-1]))


def save_provenance(cfg: RunConfig, folder: Path) -> None:
    """House rule: the resolved config and package versions sit beside every adapter and checkpoint."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "lf_config.yaml").write_text(cfg.to_yaml(minimal=False), encoding="utf-8")
    (folder / "lf_versions.json").write_text(json.dumps(package_versions(), indent=2), encoding="utf-8")


def load_components(cfg: RunConfig, *, trainable: bool) -> tuple[Any, Any, Any]:
    """Tokenizer, template and model for a job (the reward stage gets a scalar-head model)."""
    from engine.models import load_model, load_tokenizer
    from engine.templates import get_template

    tokenizer = load_tokenizer(cfg.model)
    template = get_template(cfg.model.template, tokenizer)
    if template.fix_tokenizer(tokenizer) and not cfg.model.resize_vocab:
        logger.warning("The template added special tokens to the tokenizer; the embeddings are resized to match.")
        cfg.model.resize_vocab = True
    model = load_model(
        cfg.model, cfg.finetuning, tokenizer, is_trainable=trainable, train_args=cfg.train,
        **({"task": "reward"} if cfg.finetuning.stage == "rm" else {}),
    )
    return tokenizer, template, model


def run_train(cfg: RunConfig, ctx: JobContext) -> dict[str, Any]:
    """Train (and optionally evaluate and predict) as the config says; returns all metrics."""
    import torch
    from transformers import PrinterCallback, set_seed

    from engine.data import get_dataset
    from engine.models import count_parameters
    from engine.train.callbacks import AbortCallback, EventsCallback
    from engine.train.plotting import plot_loss

    check_output_dir(cfg)
    resume = resolve_resume(cfg) if cfg.train.do_train else None
    rl.check_stage(cfg)
    set_seed(cfg.train.seed)
    tokenizer, template, model = load_components(cfg, trainable=cfg.train.do_train)
    bundle = (rl.get_prompt_dataset if cfg.finetuning.stage in rl.RL_STAGES else get_dataset)(cfg, tokenizer, template)
    if cfg.train.do_train and bundle.train is None:
        raise UserError("`do_train: true` but no training data: set `dataset`.")
    trainable, total = count_parameters(model)
    logger.info("Parameters: %s trainable of %s (%.4f%%)", f"{trainable:,}", f"{total:,}", 100 * trainable / max(total, 1))
    stats = dict(getattr(bundle, "stats", {}) or {})
    extra = {"trainable_params": trainable, "total_params": total, "num_examples": len(bundle.train) if bundle.train is not None else 0,
             "data": stats, "stage": cfg.finetuning.stage}
    callbacks = [EventsCallback(ctx, extra), AbortCallback(ctx)]
    trainer = STAGES[cfg.finetuning.stage](cfg, model, tokenizer, bundle, callbacks)
    trainer.remove_callback(PrinterCallback)  # our EventsCallback logs one concise line per step instead
    metrics: dict[str, Any] = {}
    out = Path(cfg.train.output_dir)
    if cfg.train.do_train:
        result = trainer.train(resume_from_checkpoint=resume)
        trainer.save_model()
        tokenizer.save_pretrained(out)
        trainer.save_state()
        save_provenance(cfg, out)
        for ckpt in out.glob("checkpoint-*"):
            if not (ckpt / "lf_config.yaml").exists():
                save_provenance(cfg, ckpt)
        metrics.update(result.metrics)
        trainer.save_metrics("train", result.metrics)
        if ctx.abort_requested:
            return metrics
    if cfg.train.do_eval and bundle.eval is not None:
        eval_metrics = trainer.evaluate()
        if "eval_loss" in eval_metrics:
            eval_metrics["perplexity"] = float(torch.exp(torch.tensor(min(eval_metrics["eval_loss"], 50.0))))
        trainer.save_metrics("eval", eval_metrics)
        metrics.update(eval_metrics)
    elif cfg.train.do_eval:
        logger.warning("do_eval is set but there is no evaluation data (set eval_dataset or val_size); skipped.")
    if cfg.train.do_predict:
        metrics.update(run_prediction(cfg, trainer.model, tokenizer, template, ctx))
    if cfg.finetuning.plot_loss and cfg.train.do_train:
        plot_loss(ctx.folder.events_path, out / "loss.png")
    ctx.metrics.update({k: v for k, v in metrics.items() if isinstance(v, (int, float, str))})
    return metrics


def run_prediction(cfg: RunConfig, model: Any, tokenizer: Any, template: Any, ctx: JobContext) -> dict[str, Any]:
    """Generate on the evaluation prompts and score BLEU/ROUGE."""
    from engine.data import load_eval_prompts
    from engine.evaluate.predict import run_predict

    rows = load_eval_prompts(cfg, tokenizer, template)
    return run_predict(cfg, model, tokenizer, template, rows, cfg.train.output_dir, event_writer=ctx.events)


def run_eval(cfg: RunConfig, ctx: JobContext) -> dict[str, Any]:
    """Evaluate or predict without training (``lf-engine eval``)."""
    cfg.train.do_train = False
    if not (cfg.train.do_eval or cfg.train.do_predict):
        cfg.train.do_eval = True
    return run_train(cfg, ctx)
