"""KTO's reward metrics averaged over rows as LLaMA-Factory averages them.

TRL's KTO trainer logs ``rewards/chosen``, ``logps/chosen`` (and the ``rejected`` ones) as a mean of per-batch means;
LLaMA-Factory 0.9.5's sums each over the batches since the last log and divides by the rows counted, and its
``rewards/margins`` is the difference of those two means. An evaluation with batches of unequal mixes (the last one
short, or sets whose desirable rows cluster) gave other values (-0.5052 vs its -0.5234 on a 20-row set); with these
means they are its values. ``logits/*`` (TRL's per-token mean, LLaMA-Factory's sum over the padded vocabulary
logits), ``kl`` (``eval_kl`` here, its unprefixed sum of batch values) and TRL's ``entropy`` and ``num_tokens`` stay
TRL's.
"""

from __future__ import annotations

from collections import defaultdict

ROW_MEANS = {"rewards/chosen": "chosen", "logps/chosen": "chosen", "rewards/rejected": "rejected",
             "logps/rejected": "rejected"}


class RowMeansMixin:
    """Put over TRL's KTOTrainer: counts each batch's rows per kind, and logs row-weighted means."""

    def _compute_loss(self, model, inputs, return_outputs):
        labels = inputs["label"]
        result = super()._compute_loss(model, inputs, return_outputs)
        import torch

        chosen = torch.as_tensor(labels, device=self.accelerator.device).bool().sum()
        rejected = len(labels) - chosen
        chosen = self.accelerator.gather_for_metrics(chosen).sum().item()  # as TRL counts them, over all ranks
        rejected = self.accelerator.gather_for_metrics(rejected).sum().item()
        rows = self.__dict__.setdefault("_kto_rows", defaultdict(lambda: defaultdict(list)))
        mode = "train" if self.model.training else "eval"
        for kind, count in (("chosen", chosen), ("rejected", rejected)):
            if count > 0:  # TRL appends its batch mean under the same condition
                rows[mode][kind].append(count)
        return result

    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        mode = "train" if self.model.training else "eval"
        rows = self.__dict__.get("_kto_rows", {}).get(mode, {})
        metrics = self._metrics[mode]
        means: dict[str, float] = {}
        for key, kind in ROW_MEANS.items():
            values, counts = metrics.get(key) or [], rows.get(kind) or []
            if values and len(values) == len(counts):
                means[key] = sum(v * c for v, c in zip(values, counts)) / sum(counts)
                metrics[key] = [means[key]]
        if "rewards/chosen" in means and "rewards/rejected" in means:
            metrics["rewards/margins"] = [means["rewards/chosen"] - means["rewards/rejected"]]
        elif means:
            metrics.pop("rewards/margins", None)
        if mode in self.__dict__.get("_kto_rows", {}):
            self._kto_rows[mode].clear()
        super().log(logs, start_time)

