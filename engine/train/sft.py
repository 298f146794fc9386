"""Pre-training and supervised fine-tuning: transformers' Trainer over our tokenized, loss-masked batches."""

from __future__ import annotations

import logging
from typing import Any

import torch
import torch.nn.functional as F
from transformers import Trainer, TrainingArguments

from engine.config import RunConfig, packs_rows
from engine.train import empty_steps, token_weights
from engine.train.arguments import build_args
from engine.train.empty_steps import nothing_to_train, warn_empty_step
from engine.train.eval_loss import LFEvalMixin
from engine.train.generation_eval import GenerationEvalMixin, generation_eval
from engine.train.head_loss import chunked_head_loss
from engine.train.lf_token_count import LFTokenCountMixin
from engine.train.parallel.fsdp import ShardingMixin
from engine.train.row_passes import RowPassesMixin, settle_budget
from engine.train.stand_in_count import StandInTokensMixin
from engine.train.token_accuracy import AccuracyMixin, accuracy_wanted
from engine.train.token_budget import TokenBudgetMixin

logger = logging.getLogger(__name__)


def split_causal_lm(model: Any) -> tuple[Any, Any] | None:
    """(decoder backbone, output head) of a plain ``*ForCausalLM`` (PEFT-wrapped or not), else None."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    prefix = getattr(base, "base_model_prefix", None)
    backbone = getattr(base, prefix, None) if prefix else None
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    if backbone is None or head is None or not type(base).__name__.endswith("ForCausalLM"):
        return None
    if getattr(base.config, "final_logit_softcapping", None) or getattr(base.config, "logit_scale", None):
        return None  # heads with extra logit transforms keep the model's own loss path
    return backbone, head


class MuonMixin:
    """With ``use_muon``, the optimizer is Muon for block matrices plus AdamW for the rest."""

    use_muon = False

    def create_optimizer(self, model=None):
        if self.use_muon and self.optimizer is None:
            from engine.train.optimizers import build_muon_optimizer

            self.optimizer = build_muon_optimizer(model or self.model, self.args)
            return self.optimizer
        return super().create_optimizer(model)


class LabelPositionsTrainer(RowPassesMixin, StandInTokensMixin, ShardingMixin, MuonMixin, TokenBudgetMixin, AccuracyMixin, LFEvalMixin, GenerationEvalMixin,
                            LFTokenCountMixin, Trainer):
    """Applies the output head only where a label is trained.

    SFT masks the prompt, so the vocabulary projection and softmax of every prompt position is wasted work and
    memory. The loss equals the model's own (sum of token cross-entropies over ``num_items_in_batch``, or the
    mean), so gradient accumulation is scaled exactly once, as transformers does. ``token_weighting`` (DFT or EAFT,
    ``engine.train.token_weights``) scales each token's term.
    """

    token_weighting: Any = None
    ref_model: Any = None  # ASFT's reference model (None: the model with its adapters disabled)

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        weighting = self.token_weighting
        if weighting is not None and weighting.kind == "asft" and not return_outputs and "labels" in inputs:
            return self._asft_loss(model, inputs)
        parts = split_causal_lm(model) if self.args.world_size == 1 and not self.is_deepspeed_enabled else None
        # label_smoothing_factor: transformers' own label smoother over the full logits, as LLaMA-Factory trains it
        smoothing = self.label_smoother is not None and weighting is None
        if (return_outputs or parts is None or "labels" not in inputs or not self.model_accepts_loss_kwargs
                or smoothing):
            if (not return_outputs and model.training and "labels" in inputs
                    and nothing_to_train(inputs["labels"], num_items_in_batch)):
                warn_empty_step(self, empty_steps.NAN)
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        backbone, head = parts
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        targets = labels[:, 1:]
        keep = targets != -100
        # The parts are called directly, past the model's forward, which accelerate wraps in the mixed-precision
        # autocast (bf16/fp16): the same context here, or a model whose trained layers were upcast to float32
        # beside frozen bfloat16 ones (freeze tuning) fails on the dtypes, and LoRA computes in another precision.
        with self.accelerator.autocast():
            hidden = backbone(**{**inputs, "use_cache": False}).last_hidden_state  # packed batches carry it too
            selected, wanted = hidden[:, :-1][keep], targets[keep]
            loss = chunked_head_loss(head, selected, wanted, weighting)  # frozen head: chunked, no full logits
            if loss is None and weighting is None:
                loss = F.cross_entropy(head(selected).float(), wanted, reduction="sum")
            elif loss is None:
                loss = token_weights.token_losses(head(selected).float(), wanted, weighting).sum()
        if num_items_in_batch is None:
            if model.training and nothing_to_train(labels, None):
                warn_empty_step(self, empty_steps.ZERO)
            return loss / keep.sum().clamp(min=1)
        if torch.is_tensor(num_items_in_batch):
            num_items_in_batch = num_items_in_batch.to(loss.device)
        if not num_items_in_batch:  # a step whose rows have nothing to train on: a zero loss, not 0/0
            if model.training:
                warn_empty_step(self, empty_steps.ZERO)
            return loss * 0.0
        return loss / num_items_in_batch


    def one_pass_reason(self) -> str | None:
        weighting = self.token_weighting
        if weighting is not None and weighting.kind == "asft":
            return "ASFT's loss is a mean per pass"
        return super().one_pass_reason()

    def _asft_loss(self, model: Any, inputs: dict) -> Any:
        """LLaMA-Factory's ASFT loss of a batch (a mean over its trained tokens, as there): the policy's full
        logits against the reference's on the same batch (``ref_model``, else the model without its adapters)."""
        inputs = dict(inputs)
        labels = inputs.pop("labels")
        inputs["use_cache"] = False
        with torch.no_grad():
            if self.ref_model is not None:
                ref_logits = self.ref_model(**inputs).logits
            else:
                with self.accelerator.unwrap_model(model).disable_adapter():
                    ref_logits = model(**inputs).logits
        logits = model(**inputs).logits
        return token_weights.asft_loss(logits, labels, ref_logits, self.token_weighting.alpha)


def _asft_reference(cfg: RunConfig, model: Any, tokenizer: Any = None) -> Any:
    """ASFT's reference model: ``ref_model`` when set; with LoRA none (the adapters are disabled for it, where
    LLaMA-Factory's would fail), else a frozen copy of the model being trained, as LLaMA-Factory loads it."""
    from engine.models import load_model
    from engine.train.preference import load_ref_model

    ft = cfg.finetuning
    if ft.ref_model:
        reference = load_ref_model(cfg, tokenizer)
    elif ft.finetuning_type == "lora":
        return None
    else:
        reference = load_model(cfg.model, ft, is_trainable=False, train_args=cfg.train)  # in the training precision
    reference.eval()
    return reference.to(next(model.parameters()).device)


def _media_collator(tokenizer: Any, bundle: Any, model: Any = None) -> Any:
    from engine.multimodal.collator import MediaCollator
    from engine.multimodal.stand_in import stand_ins_for_ranks

    ctx = bundle.media
    return MediaCollator(tokenizer=tokenizer, type_ids_key=ctx.plugin.type_ids_key,
                         cross=ctx.plugin.cross_attention(ctx.processor),
                         flags=ctx.plugin.batch_flags(ctx.options, ctx.processor),
                         extra_types=ctx.plugin.extra_type_ids(ctx.processor),
                         stand_ins=stand_ins_for_ranks(ctx, tokenizer, model))


def _keep_packed_rows_apart(cfg: RunConfig, model: Any, bundle: Any) -> bool:
    """Whether the rows are packed, after refusing a model whose layers would carry one packed row into the next and
    giving a vision-language model per-row positions and masks for packed batches (engine.multimodal.packed_model).
    Rows are packed where the data holds packed rows (``position_ids``), which is where the config says so, or where
    a ``tokenized_path`` was saved with packing, whatever the config says now."""
    from engine.config.loader import ConfigError
    from engine.models.packing_support import packed_rows_problems

    splits = [split for split in (bundle.train, bundle.eval) if split is not None]
    packed_rows = any("position_ids" in (getattr(split, "column_names", None) or ()) for split in splits)
    configured = packs_rows(cfg.finetuning.stage, cfg.data)
    if configured and splits and not packed_rows:
        logger.warning("`packing` is set, but the tokenized data (tokenized_path) was saved without it: its rows train "
                       "unpacked; set `overwrite_cache: true` to tokenize them again, packed.")
    if not packed_rows:
        return False
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    problems = packed_rows_problems(cfg, getattr(base, "config", None), from_saved=not configured)
    if problems:
        raise ConfigError(problems)
    if not configured:
        logger.warning("The tokenized data (tokenized_path) holds packed rows: they train packed, as they were "
                       "saved; set `overwrite_cache: true` to tokenize them again without packing.")
    from engine.multimodal.packed_model import attach

    attach(model)  # a vision-language model, even on text-only rows (a no-op for a text model)
    return True


def build_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Trainer:
    """A Trainer for stage pt or sft; batches of similar length are grouped to cut padding."""
    from engine.data.collator import build_collator
    from engine.train.parallel.context import wrap_collator

    has_eval = bundle.eval is not None
    media = getattr(bundle, "media", None)
    packed = _keep_packed_rows_apart(cfg, model, bundle)
    padding_free = False
    if media is None and cfg.train.padding_free:
        from engine.models.row_attention import use_row_attention, why_not_padding_free

        reason = why_not_padding_free(cfg, model, packed)
        padding_free = reason is None and use_row_attention(model)
        if reason is not None:
            logger.info("Batches are padded (padding_free does not apply: %s).", reason)
    group = cfg.train.group_by_length if cfg.train.group_by_length is not None else not padding_free
    specific: dict[str, Any] = {}
    if (group and not packed and not cfg.train.max_tokens_per_batch
            and (bundle.train is None or hasattr(bundle.train, "__len__"))):  # a stream has no lengths to sort
        specific["train_sampling_strategy"] = "group_by_length"
    args = build_args(TrainingArguments, cfg, has_eval=has_eval, **specific)
    weighting = token_weights.from_config(cfg) if cfg.finetuning.stage == "sft" else None
    trainer = LabelPositionsTrainer(
        model=model,
        args=args,
        train_dataset=bundle.train,
        eval_dataset=bundle.eval,
        data_collator=wrap_collator(  # CP: shift, pad to 2 x cp
            build_collator(tokenizer, cfg, padding_free=padding_free) if media is None
            else _media_collator(tokenizer, bundle, model),
            cfg, tokenizer,
        ),
        processing_class=tokenizer,
        callbacks=callbacks,
        compute_loss_func=token_weights.lm_loss_func(weighting) if weighting is not None else None,
    )
    trainer.token_weighting = weighting
    if weighting is not None and weighting.kind == "asft":
        trainer.ref_model = _asft_reference(cfg, model, tokenizer)
    trainer.use_muon = cfg.finetuning.use_muon
    trainer.max_tokens_per_batch = cfg.train.max_tokens_per_batch
    trainer.budget_padded = not padding_free  # padding-free batches: the budget counts the rows' own tokens
    settle_budget(trainer, cfg.train.max_tokens_per_pass, args.device.type, padding_free)
    return trainer


def follow_llamafactory(trainer: Trainer, cfg: RunConfig, tokenizer: Any, template: Any, bundle: Any,
                        media: Any) -> None:
    """Evaluate and count the loss as LLaMA-Factory's sft and pt trainers do (each mixin's module says how, and
    what was checked against its output)."""
    stage, has_eval = cfg.finetuning.stage, bundle.eval is not None
    trainer.compute_accuracy = accuracy_wanted(cfg, has_eval)
    trainer.eval_in_data_order = cfg.train.group_by_length is None  # grouped by our default, not by the config
    trainer.eval_gathers_all = stage == "sft"  # its Seq2SeqTrainer's gather; pt's plain Trainer keeps its own
    trainer.count_first_labels = True  # its transformers counts every label (engine.train.lf_token_count)
    trainer.rows_start_trained = stage == "pt" or bool(cfg.data.train_on_prompt)
    trainer.flos_pad_multiple = 1 if stage == "pt" else trainer.flos_pad_multiple  # as LLaMA-Factory's collators pad
    if cfg.data.eval_on_each_dataset and cfg.data.eval_dataset and has_eval:
        from engine.data.each_eval import eval_sets_by_name  # the Trainer evaluates a dict one set at a time

        trainer.eval_dataset = eval_sets_by_name(cfg, tokenizer, template, media)
    if media is not None:  # a model with a multimodal processor: each micro-batch's own mean loss, divided by the
        # accumulation steps (not one mean over the tokens of all accumulated micro-batches)
        trainer.model_accepts_loss_kwargs = False
    if stage == "sft":  # predict_with_generate: the evaluation generates and scores
        trainer.generation_eval = generation_eval(cfg, tokenizer, template, bundle)
