"""The loss divided by LLaMA-Factory's count of tokens, so the loss and its gradient are its own (sft and pt).

The loss of a batch is the sum of its tokens' cross-entropies over ``num_items_in_batch``. transformers 5.25 counts
the labels that the shifted loss scores (``labels[..., 1:]``); the transformers LLaMA-Factory 0.9.5 runs with (5.6,
and the 4.x releases before it) counts every label that is not -100, position 0 included. Where a row's first token
is not trained (sft, the usual prompt) nothing changes. Where it is, LLaMA-Factory divides by one more token per row
than it scores: pt, where every token of a block is a label (on 16-token blocks its loss is 15/16 of the mean:
checked, its eval_loss 4.6383 on the demo's 96 blocks, where the mean cross-entropy is 4.9476), and sft with
``train_on_prompt`` (64/63 on 64-token rows: an outside check found 9.4538 there against 9.6038 here before this).
Both count here as there, in training (so the gradients are its own) and in evaluation. In padding-free batches,
where the collator sets each row's first label to -100 so that no row predicts across its start, that label is
counted as LLaMA-Factory's padded batches count it: the row's first token (pt: unless it is the pad token, which
its collator leaves out of the loss; sft with ``train_on_prompt``: the prompt's first token, trained there).
"""

from __future__ import annotations

from typing import Any


def _first_labels_restored(batch: dict[str, Any], pad_id: int | None) -> dict[str, Any]:
    """The batch with each padding-free row's first label as LLaMA-Factory's padded batch would have it."""
    starts = batch.get("cu_seq_lens_q")
    labels = batch.get("labels")
    if starts is None or labels is None or labels.shape[0] != 1:
        return batch
    heads = starts[:-1].long().to(labels.device)
    restored = labels.clone()
    first = batch["input_ids"][0, heads].to(labels.device)
    restored[0, heads] = first if pad_id is None else first.masked_fill(first == pad_id, -100)
    return {**batch, "labels": restored}


class LFTokenCountMixin:
    """A Trainer mixin: with ``count_first_labels`` (sft, pt), ``num_items_in_batch`` counts every label; with
    ``rows_start_trained`` (pt; sft with train_on_prompt) a padding-free row's first token counts as a label."""

    count_first_labels: bool = False
    rows_start_trained: bool = False

    def _get_num_items_in_batch(self, batch_samples: list, device: Any) -> Any:
        if not self.count_first_labels:
            return super()._get_num_items_in_batch(batch_samples, device)
        views = batch_samples
        if self.rows_start_trained:
            pad_id = getattr(self.processing_class, "pad_token_id", None)
            views = [_first_labels_restored(batch, pad_id) if isinstance(batch, dict) else batch
                     for batch in batch_samples]
        shifts = self._loss_shifts_labels
        self._loss_shifts_labels = False  # count the labels themselves, as transformers 5.6 does
        try:
            return super()._get_num_items_in_batch(views, device)
        finally:
            self._loss_shifts_labels = shifts
