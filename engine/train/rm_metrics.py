"""The reward model's ``accuracy`` as LLaMA-Factory 0.9.5 reports it.

Its rm evaluation scores accuracy with ``ComputeAccuracy`` over the rows of the whole set (chosen score above the
rejected one), a ``compute_metrics`` that the Trainer names by the evaluation's prefix: ``eval_accuracy``, or
``eval_NAME_accuracy`` per set with ``eval_on_each_dataset``. TRL's RewardTrainer logs a mean of per-batch means under
a plain ``accuracy`` (the last, smaller batch counted like the others). Here it is the mean over the rows counted
since the last log, under the evaluation's prefix; TRL's ``margin``, ``min/mean/max_reward`` and ``num_tokens``
(which LLaMA-Factory has not) keep their plain keys and means of batch means.
"""

from __future__ import annotations


class RowAccuracyMixin:
    """Put over TRL's RewardTrainer: counts each batch's pairs and logs a row-weighted ``accuracy``."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        result = super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        import torch

        pairs = torch.as_tensor(inputs["input_ids"].shape[0] // 2, device=self.accelerator.device)
        pairs = self.accelerator.gather_for_metrics(pairs.reshape(1)).sum().item()  # as TRL gathers the accuracy
        mode = "train" if self.model.training else "eval"
        self.__dict__.setdefault("_rm_pairs", {"train": [], "eval": []})[mode].append(pairs)
        return result

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        self._rm_prefix = metric_key_prefix  # eval_NAME for each set of a dict (eval_on_each_dataset)
        try:
            return super().evaluate(eval_dataset=eval_dataset, ignore_keys=ignore_keys,
                                    metric_key_prefix=metric_key_prefix)
        finally:
            self._rm_prefix = "eval"

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        mode = "train" if self.model.training else "eval"
        counts = self.__dict__.get("_rm_pairs", {}).get(mode) or []
        values = self._metrics[mode].get("accuracy") or []
        accuracy = None
        if values and len(values) == len(counts) and sum(counts):
            accuracy = sum(v * c for v, c in zip(values, counts)) / sum(counts)
            self._metrics[mode]["accuracy"] = [accuracy]
        if counts:
            counts.clear()
        prefix = getattr(self, "_rm_prefix", "eval")
        if mode == "eval" and prefix != "eval" and "accuracy" in self._metrics[mode]:
            values = self._metrics[mode].pop("accuracy")  # LLaMA-Factory's per-set key
            logs[f"{prefix}_accuracy"] = sum(values) / len(values)
        super().log(logs, start_time)
