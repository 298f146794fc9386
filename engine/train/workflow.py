"""One training job from start to finish: load, train, save, evaluate, predict, plot."""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

from engine import collector
from engine.checkpoints import step_of
from engine.config import RunConfig
from engine.errors import UserError
from engine.evaluate.metrics import with_perplexity
from engine.lifecycle import JobContext
from engine.resumed_events import forget_steps_after
from engine.runs import write_provenance
from engine.train import phases, preference, rl, sft
from engine.train.output_dir import (
    check_output_dir,
    clear_replaced_run,
    clear_stale_staging,
    no_step_past_the_end,
    resolve_resume,
)
from engine.train.resume_fit import guard_loads
from engine.train.rl_checks import RL_STAGES, check_stage, refuse_ppo
from engine.train.save_targets import SaveTargetsCallback, clear_trainer_files, name_checkpoint_saves
from engine.train.tensorboard_folder import own_tensorboard_folder

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
    "ppo": refuse_ppo,
}

def _save_processor_files(cfg: RunConfig, out: Path) -> None:
    """A vision-language model's processor files beside the trained weights, so the output folder (a full or
    freeze fine-tune) loads for chat and in plain transformers like the base model; nothing for text models."""
    from engine.models.loader import resolve_model_path
    from engine.multimodal.processor import copy_processor_files

    try:
        source = resolve_model_path(cfg.model.model_name_or_path, cfg.model.cache_dir, cfg.model.model_revision)
    except Exception as err:  # the model loaded, so this is unexpected; the weights are saved already
        logger.warning("Processor files not copied to %s: %s", out, err)
        return
    from engine.multimodal.errors import MediaError

    try:
        copy_processor_files(source, out)
    except MediaError as err:  # the trained weights are saved all the same; the folder then lacks the processor
        logger.warning("Processor files not copied to %s: %s The trained weights are saved; copy the base model's "
                       "processor files into the output folder by hand so that it loads for chat.", out, err)
    except OSError as err:  # a full disk, a folder not writable: named with the fix, not a traceback
        named = _write_failure(err, out)
        if named is None:
            raise
        raise named from err


def _write_failure(err: OSError, out: Path) -> UserError | None:
    """The user error for a write into the final save's folder ``out`` that failed for lack of room or permissions,
    naming the output folder (the staging folder inside it is removed once the save fails) and what to do next:
    resume from the last checkpoint, which the failed save leaves as it was, else start again."""
    from engine.checkpoints import latest_complete
    from engine.diskfull import THEN
    from engine.train.final_save import STAGING_DIR
    from engine.write_denied import write_error

    folder = out.parent if out.name == STAGING_DIR else out
    return write_error(err, folder, then=THEN["resume" if latest_complete(folder)[0] else "start"])


def _beside_the_weights(cfg: RunConfig, trainer: Any, tokenizer: Any, folder: Path) -> None:
    """What the final save writes beside the weights (into its staging folder, see engine.train.final_save): a
    PiSSA adapter converted to LoRA, the tokenizer, a vision-language model's processor files, the provenance."""
    from engine.train.methods import PISSA_INIT_DIR, save_pissa_converted

    save_pissa_converted(trainer.model, folder, Path(cfg.train.output_dir) / PISSA_INIT_DIR)
    tokenizer.save_pretrained(folder)
    _save_processor_files(cfg, folder)
    save_provenance(cfg, folder)


def save_provenance(cfg: RunConfig, folder: Path) -> None:
    """House rule: the resolved config and package versions sit beside every adapter and checkpoint."""
    write_provenance(folder, cfg.to_yaml(minimal=False))


def check_launch(cfg: RunConfig) -> None:
    """Scale-out settings that cannot work here raise a UserError naming the fix (see engine.train.parallel)."""
    from engine import devices
    from engine.train.parallel import deepspeed, nd

    if cfg.data.streaming and cfg.train.do_train:  # one process, and nothing to save to tokenized_path: say so
        from engine.data.streaming import refuse_here  # before the model loads

        refuse_here(cfg)
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    device = devices.get_accelerator().type
    deepspeed.validate(cfg, world_size, device)
    problems = nd.check(cfg, world_size, device)
    if problems:
        raise UserError("N-D parallelism cannot run as set:\n" + "\n".join(f"  - {p}" for p in problems))


def load_components(cfg: RunConfig, *, trainable: bool) -> tuple[Any, Any, Any]:
    """Tokenizer, template and model for a job (the reward stage gets a scalar-head model)."""
    from engine.models import load_model
    from engine.models.tokenizer_setup import load_text_components

    tokenizer, template = load_text_components(cfg)
    model = load_model(
        cfg.model, cfg.finetuning, tokenizer, is_trainable=trainable, train_args=cfg.train, methods=cfg.methods,
        max_length=cfg.data.cutoff_len if trainable else None,
        **({"task": "reward"} if cfg.finetuning.stage == "rm" else {}),
    )
    return tokenizer, template, model


def _row_count(train: Any) -> int | None:
    """Training rows, or None for a stream (``streaming: true``: not counted before training)."""
    if train is None:
        return 0
    return len(train) if hasattr(train, "__len__") else None


def run_train(cfg: RunConfig, ctx: JobContext) -> dict[str, Any]:
    """Train (and optionally evaluate and predict) as the config says; returns all metrics."""
    from transformers import PrinterCallback, set_seed

    from engine.data import get_dataset
    from engine.models import count_parameters
    from engine.train.callbacks import AbortCallback, EventsCallback
    from engine.train.final_eval import final_evaluation, remember_evaluations
    from engine.train.final_save import save_final
    from engine.train.methods import configure_trainer, method_callbacks
    from engine.train.parallel.recorder import ParallelRecorder
    from engine.train.plotting import plot_loss

    phases.start()
    phases.mark("imports")
    check_output_dir(cfg)
    clear_replaced_run(cfg)
    clear_stale_staging(cfg)
    check_launch(cfg)  # DeepSpeed config and N-D sizes against the world size, before the model loads
    resume = resolve_resume(cfg, running=True) if cfg.train.do_train else None
    if resume:
        logger.info("Resuming from %s.", resume)
        step = step_of(Path(resume))
        if step is not None and os.environ.get("RANK", "0") == "0":
            forget_steps_after(Path(cfg.train.output_dir), step)
    check_stage(cfg)
    set_seed(cfg.train.seed)
    tokenizer, template, model = load_components(cfg, trainable=cfg.train.do_train)
    phases.mark("model")
    media = None
    if cfg.finetuning.stage in RL_STAGES:
        bundle = rl.get_prompt_dataset(cfg, tokenizer, template)
    else:
        from engine.multimodal import media_context

        media = media_context(cfg, tokenizer)
        bundle = get_dataset(cfg, tokenizer, template, media=media)
    if cfg.train.do_train and bundle.train is None:
        raise UserError("`do_train: true` but no training data: set `dataset`.")
    if cfg.finetuning.stage in ("kto", "dpo", "rm") and cfg.data.eval_on_each_dataset and cfg.data.eval_dataset and bundle.eval:
        from engine.data.each_eval import eval_sets_by_name  # TRL's trainer prepares and evaluates them one by one

        bundle.eval_sets = eval_sets_by_name(cfg, tokenizer, template, media)
    phases.mark("data")
    trainable, total = count_parameters(model)
    logger.info("Parameters: %s trainable of %s (%.4f%%)", f"{trainable:,}", f"{total:,}", 100 * trainable / max(total, 1))
    stats = dict(getattr(bundle, "stats", {}) or {})
    extra = {"trainable_params": trainable, "total_params": total, "num_examples": _row_count(bundle.train),
             "data": stats, "stage": cfg.finetuning.stage}
    recorder = ParallelRecorder(ctx, extra, launcher=os.environ.get("LF_LAUNCHER"))
    callbacks = [recorder, EventsCallback(ctx, extra), AbortCallback(ctx), *method_callbacks(cfg, ctx),
                 SaveTargetsCallback()]  # last: it sees every other callback's request for a checkpoint
    trainer = STAGES[cfg.finetuning.stage](cfg, model, tokenizer, bundle, callbacks)
    if cfg.finetuning.stage in ("sft", "pt"):
        sft.follow_llamafactory(trainer, cfg, tokenizer, template, bundle, media)
    recorder.trainer = trainer
    configure_trainer(trainer, cfg)
    remember_evaluations(trainer)
    no_step_past_the_end(trainer)
    name_checkpoint_saves(trainer)
    if resume:
        guard_loads(trainer, cfg, resume)
    if cfg.parallel.use_hyper_parallel:  # optional backend: HyperParallel prepares the model instead of accelerate
        from engine.train.parallel import hyper

        hyper.install(trainer, cfg)
    trainer.remove_callback(PrinterCallback)  # our EventsCallback logs one concise line per step instead
    own_tensorboard_folder(trainer)  # report_to: tensorboard writes into the run's own folder, never through a link
    phases.mark("trainer")
    metrics: dict[str, Any] = {}
    out = Path(cfg.train.output_dir)
    collector.settle()  # the model, data and trainer too, before the steps
    if cfg.train.do_train:
        result = trainer.train(resume_from_checkpoint=resume)
        phases.mark("steps")  # the first step is its own phase (EventsCallback marks it)
        save_final(trainer, out, lambda folder: _beside_the_weights(cfg, trainer, tokenizer, folder))
        clear_trainer_files(trainer, out)  # the Trainer writes these by opening the path: never through a planted link
        trainer.save_state()
        for ckpt in out.glob("checkpoint-*"):
            if not (ckpt / "lf_config.yaml").exists():
                save_provenance(cfg, ckpt)
        from engine.fileperms import match_umask

        match_umask(out)  # weights 0644 like the rest of the run folder
        metrics.update(result.metrics)
        clear_trainer_files(trainer, out)
        trainer.save_metrics("train", result.metrics)
        phases.mark("saving")
        if ctx.abort_requested:
            return metrics
    if cfg.train.do_eval and bundle.eval is not None:
        eval_metrics = final_evaluation(trainer, trained=cfg.train.do_train)
        if not cfg.train.do_train:
            from engine.train.callbacks import without_training_fields

            eval_metrics = without_training_fields(eval_metrics)
            from engine.train.self_reference import uses_itself, without_rewards

            if uses_itself(cfg):  # the model is its own reference: LLaMA-Factory drops the rewards it cannot compute
                eval_metrics = without_rewards(eval_metrics)
        eval_metrics = with_perplexity(eval_metrics, cfg.finetuning.stage)
        clear_trainer_files(trainer, out)
        trainer.save_metrics("eval", eval_metrics)
        metrics.update(eval_metrics)
    elif cfg.train.do_eval:
        logger.warning("do_eval is set but there is no evaluation data (set eval_dataset or val_size); skipped.")
    if cfg.train.do_predict:
        metrics.update(run_prediction(cfg, trainer.model, tokenizer, template, ctx, media))
    if cfg.finetuning.plot_loss and cfg.train.do_train:
        plot_loss(ctx.folder.events_path, out / "loss.png")
    if cfg.train.do_eval or cfg.train.do_predict:
        phases.mark("evaluation")
    phases.log_summary()
    ctx.metrics.update({k: v for k, v in metrics.items() if isinstance(v, (int, float, str))})
    return metrics


def run_prediction(cfg: RunConfig, model: Any, tokenizer: Any, template: Any, ctx: JobContext,
                   media: Any = None) -> dict[str, Any]:
    """Generate on the evaluation prompts (with their media for a multimodal model) and score BLEU/ROUGE."""
    from engine.data import load_eval_prompts
    from engine.evaluate.predict import run_predict

    rows = load_eval_prompts(cfg, tokenizer, template, media)
    return run_predict(cfg, model, tokenizer, template, rows, cfg.train.output_dir, event_writer=ctx.events)


def run_eval(cfg: RunConfig, ctx: JobContext) -> dict[str, Any]:
    """Evaluate or predict without training (``lf-engine eval``)."""
    cfg.train.do_train = False
    if not (cfg.train.do_eval or cfg.train.do_predict):
        cfg.train.do_eval = True
    return run_train(cfg, ctx)
