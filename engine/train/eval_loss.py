"""The evaluation loss as LLaMA-Factory reports it: batches in data order, and the plain mean of their losses.

transformers' evaluation loop repeats each batch's mean loss by the configured batch size and averages the copies.
In LLaMA-Factory 0.9.5's runs every batch counts in full, the last, smaller one too, so its ``eval_loss`` is the
mean of the batch means (checked against its output: 4.8478 on 93 rows in batches of 2, which is that mean; the mean
weighted by each batch's rows is 4.8737). Here accelerate's ``gather_for_metrics`` cuts the last batch's copies down
to its real rows, which weights the last batch by its rows and gave the second number. A single-process evaluation
therefore gathers with accelerate's plain ``gather`` (which, on one process, only returns the losses as they are),
so the same batches give LLaMA-Factory's number. Several processes keep ``gather_for_metrics``: there it also
drops the samples the distributed sampler repeats to even out the processes.

The batches are the same ones when they hold the same rows: transformers groups evaluation rows by length whenever
training batches are grouped so, and training here groups padded batches by default (for speed) where
LLaMA-Factory does not. Evaluation keeps the data's order then, as there; an explicit ``group_by_length: true``
groups both, as it does there.
"""

from __future__ import annotations

from typing import Any


class LFEvalMixin:
    """A Trainer mixin: single-process evaluation batches and weighs rows as LLaMA-Factory does."""

    eval_in_data_order: bool = False  # set when training batches are grouped by length by our default only

    def _get_eval_sampler(self, eval_dataset: Any) -> Any:
        if self.eval_in_data_order and self.args.world_size <= 1 and eval_dataset is not None:
            from torch.utils.data import SequentialSampler

            return SequentialSampler(eval_dataset)
        return super()._get_eval_sampler(eval_dataset)

    def evaluation_loop(self, *args, **kwargs):
        if self.args.world_size == 1:
            self.gather_function = self.accelerator.gather  # transformers sets gather_for_metrics back at the end
        return super().evaluation_loop(*args, **kwargs)
