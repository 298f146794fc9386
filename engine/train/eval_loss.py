"""The evaluation loss as LLaMA-Factory reports it: batches in data order, and (sft) the plain mean of their losses.

transformers' evaluation loop repeats each batch's mean loss by the configured batch size and averages the copies;
how the last, smaller batch counts depends on the gather. LLaMA-Factory's sft trainer is transformers'
``Seq2SeqTrainer``, whose ``evaluate`` gathers with accelerate's plain ``gather`` ("we don't want to drop samples"),
so every batch counts in full and ``eval_loss`` is the mean of the batch means (4.8478 on 93 rows in batches of 2,
where the mean weighted by each batch's rows is 4.8737). Its pt trainer is the plain ``Trainer``, whose
``gather_for_metrics`` cuts the last batch's copies down to its real rows. An sft evaluation here gathers as the
``Seq2SeqTrainer`` does; pt keeps the ``Trainer``'s gather.

The batches are the same ones when they hold the same rows: transformers groups evaluation rows by length whenever
training batches are grouped so, and training here groups padded batches by default (for speed) where
LLaMA-Factory does not. Evaluation keeps the data's order then, as there; an explicit ``group_by_length: true``
groups both, as it does there.
"""

from __future__ import annotations

from typing import Any


class LFEvalMixin:
    """A Trainer mixin: evaluation batches and weighs rows as LLaMA-Factory's trainer for the stage does."""

    eval_in_data_order: bool = False  # set when training batches are grouped by length by our default only
    eval_gathers_all: bool = False  # sft: Seq2SeqTrainer's plain gather (the last batch counted in full)

    def _get_eval_sampler(self, eval_dataset: Any) -> Any:
        if self.eval_in_data_order and self.args.world_size <= 1 and eval_dataset is not None:
            from torch.utils.data import SequentialSampler

            return SequentialSampler(eval_dataset)
        return super()._get_eval_sampler(eval_dataset)

    def evaluation_loop(self, *args, **kwargs):
        if self.eval_gathers_all:
            self.gather_function = self.accelerator.gather  # transformers sets gather_for_metrics back at the end
        return super().evaluation_loop(*args, **kwargs)
