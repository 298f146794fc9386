"""Reward modelling, DPO (sigmoid/hinge/ipo) and KTO on TRL's trainers; ORPO and SimPO on LLaMA-Factory's losses.

Our data layer tokenizes with the chosen template and hands TRL pre-tokenized columns, so every stage sees
exactly the same prompt format as SFT and chat.
"""

from __future__ import annotations

import logging
from typing import Any

from engine.config import RunConfig
from engine.errors import UserError
from engine.train.arguments import build_args
from engine.train.fused_head import refuse_adapted_head
from engine.train.parallel.fsdp import ShardingMixin
from engine.train.self_reference import construction_stand_in, refer_to_itself, uses_itself

DPO_COLUMNS = ("prompt_ids", "chosen_ids", "rejected_ids")
KTO_COLUMNS = ("prompt_ids", "completion_ids", "label")

logger = logging.getLogger(__name__)


def _with_kl_pairs(dataset: Any, cfg: RunConfig | None) -> Any:
    """``dataset`` with LLaMA-Factory's KL pairs (:func:`engine.data.kto_pairs.with_kl_pairs`; get_dataset pairs
    its KTO sets already, a set loaded otherwise is paired here)."""
    from engine.data.kto_pairs import with_kl_pairs

    return with_kl_pairs(dataset, cfg.data if cfg is not None else None)


class KLPairCollator:
    """TRL's KTO collator for rows whose KL pair has a prompt of its own (``KL_prompt_ids``): TRL's builds the KL
    sequences from the row's ``prompt_ids``, here they come from the KL prompt LLaMA-Factory's cut gives."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __call__(self, features: list[dict[str, Any]]) -> dict[str, Any]:
        if not features or "KL_prompt_ids" not in features[0]:
            return self.inner(features)
        rows = [{k: v for k, v in feature.items() if not k.startswith("KL_")} for feature in features]
        batch = dict(self.inner(rows))
        pairs = self.inner([{**row, "prompt_ids": feature["KL_prompt_ids"], "completion_ids": feature["KL_completion_ids"]}
                            for row, feature in zip(rows, features)])
        batch.update({f"KL_{name}": pairs[name] for name in ("input_ids", "attention_mask", "completion_mask")})
        return batch


KL_MODEL_INPUTS = ("cross_attention_mask", "moe_mm_token_type_ids")
"""Model inputs the media collator builds for KTO's KL rows too (as ``KL_<name>``), which TRL does not pass itself."""


def _pretokenized(columns: tuple[str, ...], cfg: RunConfig | None = None) -> type:
    """TRL's DPO/KTO trainer that takes our template-tokenized rows as they are instead of re-tokenizing text."""
    from trl import DPOTrainer, KTOTrainer

    from engine.train.kto_metrics import RowMeansMixin
    from engine.train.lf_logits import PairLogitsMixin

    base = KTOTrainer if "completion_ids" in columns else DPOTrainer
    # LLaMA-Factory's metrics: kto's row means (rewards, logps, logits) and kl; dpo's logits of the padded batch
    means = (RowMeansMixin,) if base is KTOTrainer else (PairLogitsMixin,)

    class PretokenizedTrainer(ShardingMixin, *means, base):
        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            if not set(columns) <= set(dataset.column_names):
                return super()._prepare_dataset(dataset, processing_class, args, dataset_name)
            if base is KTOTrainer and self.calculate_KL:
                return _with_kl_pairs(dataset, cfg)
            if base is KTOTrainer:  # no KL term: the pairs are not needed
                from engine.data.kl_stand_ins import KEY
                from engine.data.kto_pairs import SOURCE_COLUMNS

                if KEY in dataset.column_names and any(dataset[KEY]):
                    dataset = dataset.select([row for row, kind in enumerate(dataset[KEY]) if not kind])
                unused = (*SOURCE_COLUMNS, KEY, "KL_prompt_ids", "KL_completion_ids")
                return dataset.remove_columns([name for name in unused if name in dataset.column_names])
            return dataset

        if base is KTOTrainer:
            # The KL rows' own model inputs that TRL does not know: Llama 3.2 Vision's cross-attention mask (as
            # LLaMA-Factory's KTO trainer gives them kl_cross_attention_mask) and ERNIE-4.5-VL's MoE routing types;
            # TRL would pass the rows' ones with the KL rows
            def _compute_loss(self, model, inputs, return_outputs):
                self._kl_inputs = {name: inputs.pop("KL_" + name) for name in KL_MODEL_INPUTS if "KL_" + name in inputs}
                return super()._compute_loss(model, inputs, return_outputs)

            def _compute_kl_logps(self, model, batch):
                extra = getattr(self, "_kl_inputs", None) or {}
                if extra and "KL_input_ids" in batch:
                    batch = {**batch, **{k: v.to(batch["KL_input_ids"].device) for k, v in extra.items()}}
                return super()._compute_kl_logps(model, batch)

    PretokenizedTrainer.__name__ = f"Pretokenized{base.__name__}"
    return PretokenizedTrainer


def _common(cfg: RunConfig) -> dict[str, Any]:
    return {"max_length": cfg.data.cutoff_len}


def _padded(cfg: RunConfig) -> dict[str, Any]:
    """rm, dpo and kto: :func:`_common`, batches padded as LLaMA-Factory's preference collators pad them (dpo's and
    kto's logits metrics count the padding, ``engine.train.lf_logits``; rm's head dropout masks follow the padded
    shape, ``engine.models.value_head``)."""
    from engine.train.lf_logits import PAD_MULTIPLE

    return {**_common(cfg), "pad_to_multiple_of": PAD_MULTIPLE}


def _train_set(bundle: Any) -> Any:
    """The training set; for evaluation alone (no training data) the evaluation set, since TRL's trainers need one
    to be built (it is never trained on: ``lf-engine eval`` only calls ``evaluate``)."""
    return bundle.train if bundle.train is not None else bundle.eval


def _at_construction(bundle: Any) -> Any:
    """The training set a TRL trainer is built with. TRL's trainers take ``datasets`` sets only, and a stream
    (``streaming: true``: engine.data.streaming's rows, reshuffled each epoch and split per loader worker as
    LLaMA-Factory's) is a torch IterableDataset: they are built with a set of its first row (already tokenized, with
    its columns), and :func:`_hand_over` gives them the stream before training."""
    train = _train_set(bundle)
    if train is None or hasattr(train, "__len__") or getattr(train, "first", None) is None:
        return train
    from datasets import Dataset

    return Dataset.from_list([train.first])


def _hand_over(trainer: Any, bundle: Any) -> Any:
    """``trainer`` training on the stream of ``bundle`` where it was built with its first row (:func:`_at_construction`)."""
    if bundle.train is not None and not hasattr(bundle.train, "__len__"):
        trainer.train_dataset = bundle.train
    return trainer


def build_rm_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    from trl import RewardConfig, RewardTrainer

    from engine.models.value_head import add_head_dropout, score_last_attended
    from engine.train.rm_metrics import RowAccuracyMixin

    # FSDP2 on CPU processes too; accuracy over rows, per set as eval_NAME_accuracy (LLaMA-Factory's)
    class ShardedRewardTrainer(ShardingMixin, RowAccuracyMixin, RewardTrainer):
        pass

    args = build_args(RewardConfig, cfg, has_eval=bundle.eval is not None, disable_dropout=False, **_padded(cfg))
    add_head_dropout(model)  # LLaMA-Factory's value head: dropout on its input in training,
    score_last_attended(model)  # and each row scored at its last attended token
    return _hand_over(ShardedRewardTrainer(
        model=model, args=args, train_dataset=_at_construction(bundle), eval_dataset=bundle.eval_sets or bundle.eval,
        processing_class=tokenizer, callbacks=callbacks,
    ), bundle)


def build_dpo_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    ft = cfg.finetuning
    if ft.pref_loss in ("orpo", "simpo"):
        return _build_odds_ratio_family(cfg, model, tokenizer, bundle, callbacks)
    from trl import DPOConfig

    loss_type, weights = [ft.pref_loss], None
    if ft.pref_ftx > 0:
        loss_type, weights = [ft.pref_loss, "sft"], [1.0, ft.pref_ftx]
    args = build_args(
        DPOConfig, cfg, has_eval=bundle.eval is not None, beta=ft.pref_beta, loss_type=loss_type,
        loss_weights=weights, label_smoothing=ft.dpo_label_smoothing, **_padded(cfg),
    )
    refuse_adapted_head(model, "dpo")
    itself = uses_itself(cfg)
    ref_model = construction_stand_in(cfg, model) if itself else load_ref_model(cfg, tokenizer)
    trainer = _pretokenized(DPO_COLUMNS)(  # eval_on_each_dataset: a dict of sets, each evaluated apart
        model=model, ref_model=ref_model, args=args, train_dataset=_at_construction(bundle),
        eval_dataset=bundle.eval_sets or bundle.eval,
        processing_class=tokenizer, callbacks=callbacks,
    )
    if itself:
        refer_to_itself(trainer)
    return _with_media(_hand_over(trainer, bundle), bundle, "dpo")


def _with_media(trainer: Any, bundle: Any, stage: str) -> Any:
    """Give a DPO/KTO trainer the media collator when the rows carry images, videos or audio."""
    if getattr(bundle, "media", None) is not None:
        from engine.multimodal.preference import build_preference_collator

        trainer.data_collator = build_preference_collator(trainer, bundle, stage)
    return trainer


def _build_odds_ratio_family(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    """ORPO and SimPO have no reference model: LLaMA-Factory's losses on our pairs (``engine.train.odds_ratio``)."""
    from transformers import TrainingArguments
    from trl.trainer.utils import disable_dropout_in_model

    from engine.train.odds_ratio import OddsRatioTrainer, PairCollator

    ft = cfg.finetuning
    disable_dropout_in_model(model)  # as LLaMA-Factory's preference trainer does (its disable_dropout)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    args = build_args(TrainingArguments, cfg, has_eval=bundle.eval is not None)
    return OddsRatioTrainer(
        model=model, args=args, train_dataset=_train_set(bundle), eval_dataset=bundle.eval_sets or bundle.eval,
        processing_class=tokenizer, data_collator=PairCollator(pad), callbacks=callbacks,
        loss=ft.pref_loss, beta=ft.pref_beta, gamma=ft.simpo_gamma, ftx=ft.pref_ftx,
    )


def build_kto_trainer(cfg: RunConfig, model: Any, tokenizer: Any, bundle: Any, callbacks: list) -> Any:
    from trl import KTOConfig

    ft = cfg.finetuning
    labels = _kto_labels(bundle)
    if all(labels) or not any(labels):
        raise UserError(
            "KTO needs both desirable (kto_tag true) and undesirable (kto_tag false) rows in the training data; "
            f"this data has only {'desirable' if all(labels) else 'undesirable'} ones."
        )
    batch = cfg.train.per_device_train_batch_size
    # TRL pairs KL completions within each batch, so it wants batches of two or more read in order; the pairs here
    # are LLaMA-Factory's, fixed per row before training (engine.data.kto_pairs), so a batch of one works and
    # batches are drawn at random each epoch, as in LLaMA-Factory (disable_shuffling keeps the order).
    specific: dict[str, Any] = {"per_device_train_batch_size": max(2, batch)}
    args = build_args(
        KTOConfig, cfg, has_eval=bundle.eval is not None, beta=ft.pref_beta,
        desirable_weight=ft.kto_chosen_weight, undesirable_weight=ft.kto_rejected_weight, **_padded(cfg), **specific,
    )
    refuse_adapted_head(model, "kto")
    itself = uses_itself(cfg)
    ref_model = construction_stand_in(cfg, model) if itself else load_ref_model(cfg, tokenizer)
    # eval_on_each_dataset: a dict of sets, each evaluated apart (eval_NAME_loss with that set's eval_rewards/...)
    evaluated = bundle.eval_sets or bundle.eval
    trainer = _pretokenized(KTO_COLUMNS, cfg)(
        model=model, ref_model=ref_model, args=args, train_dataset=_at_construction(bundle), eval_dataset=evaluated,
        processing_class=tokenizer, callbacks=callbacks,
    )
    if itself:
        refer_to_itself(trainer)
    _hand_over(trainer, bundle)
    trainer.data_collator = KLPairCollator(trainer.data_collator)
    trainer.args.train_sampling_strategy = "random"
    if batch != trainer.args.per_device_train_batch_size:
        trainer.args.per_device_train_batch_size = batch
        trainer._train_batch_size = trainer.args.train_batch_size
    return _with_media(trainer, bundle, "kto")


def _kto_labels(bundle: Any) -> list[bool]:
    """The desirable/undesirable labels of the training rows; of a stream, read from the examples of its training
    rows (those ``val_size`` holds out and stand-ins left out) until both kinds are seen, nothing tokenized."""
    train = _train_set(bundle)
    if hasattr(train, "__len__") or not hasattr(train, "training_examples"):
        return list(train["label"])
    from engine.data.kl_stand_ins import KEY

    kinds: set[bool] = set()
    for example in train.training_examples():
        if not example.get(KEY):
            kinds.add(bool(example["kto_tag"]))
            if len(kinds) == 2:
                break
    return sorted(kinds)


def load_ref_model(cfg: RunConfig, tokenizer: Any = None) -> Any:
    """An explicit reference model when configured; otherwise TRL uses the base (adapters disabled) or a copy.

    With ``tokenizer`` (the policy's) the reference must read its token ids as the same tokens: its own tokenizer
    is compared before the weights load, and its embedding table must have a row for each of them."""
    if not cfg.finetuning.ref_model:
        return None
    from dataclasses import replace

    from engine.errors import ModelError
    from engine.models import load_model, load_tokenizer
    from engine.models.vocab_match import too_few_rows, vocab_mismatch

    names = (cfg.model.model_name_or_path, cfg.finetuning.ref_model)
    ref_args = replace(cfg.model, model_name_or_path=cfg.finetuning.ref_model, adapter_name_or_path=None)
    if tokenizer is not None and (problem := vocab_mismatch(tokenizer.get_vocab(), load_tokenizer(ref_args).get_vocab(),
                                                            *names)):
        raise ModelError(problem)
    model = load_model(ref_args, cfg.finetuning, is_trainable=False, train_args=cfg.train)  # the training precision
    if tokenizer is not None and (problem := too_few_rows(model.get_input_embeddings().num_embeddings,
                                                          len(tokenizer), *names)):
        raise ModelError(problem)
    return model
