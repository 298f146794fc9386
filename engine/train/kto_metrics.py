"""KTO's metrics as LLaMA-Factory 0.9.5 logs them.

TRL's KTO trainer logs ``rewards/chosen``, ``logps/chosen`` (and the ``rejected`` ones) as a mean of per-batch means;
LLaMA-Factory 0.9.5's sums each over the batches since the last log and divides by the rows counted, and its
``rewards/margins`` is the difference of those two means. An evaluation with batches of unequal mixes (the last one
short, or sets whose desirable rows cluster) gave other values (-0.5052 vs its -0.5234 on a 20-row set); with these
means they are its values. ``logits/chosen`` (``rejected``) is LLaMA-Factory's too: each row's logits summed over its
padded positions and the whole vocabulary (``engine.train.lf_logits``), over the rows counted (TRL logs a mean per
answer token). ``kl`` is the sum of the batches' KL estimates since the last log, times the number of processes (its
sum over ranks of a value each rank holds already averaged), logged unprefixed in evaluation as well (TRL's mean under
``eval_kl``). TRL's ``entropy`` and ``num_tokens`` stay TRL's.
"""

from __future__ import annotations

from collections import defaultdict

ROW_MEANS = {"rewards/chosen": "chosen", "logps/chosen": "chosen", "rewards/rejected": "rejected",
             "logps/rejected": "rejected"}


class RowMeansMixin:
    """Put over TRL's KTOTrainer: counts each batch's rows per kind, and logs row-weighted means and sums."""

    def _compute_loss(self, model, inputs, return_outputs):
        import torch

        from engine.train.lf_logits import policy_hidden, vocab_means, vocab_size

        labels = inputs["label"]
        policy = self.accelerator.unwrap_model(model)
        with policy_hidden(policy, inputs["input_ids"]) as seen:
            result = super()._compute_loss(model, inputs, return_outputs)
        kinds = torch.as_tensor(labels, device=self.accelerator.device).bool()
        chosen = kinds.sum()
        rejected = len(labels) - chosen
        chosen = self.accelerator.gather_for_metrics(chosen).sum().item()  # as TRL counts them, over all ranks
        rejected = self.accelerator.gather_for_metrics(rejected).sum().item()
        state = self.__dict__.setdefault("_kto_rows", defaultdict(lambda: defaultdict(list)))
        mode = "train" if self.model.training else "eval"
        for kind, count in (("chosen", chosen), ("rejected", rejected)):
            if count > 0:  # TRL appends its batch mean under the same condition
                state[mode][kind].append(count)
        if seen.hidden is not None:  # each row's logits summed over positions and vocabulary, per kind
            rows = vocab_means(policy, seen.hidden).sum(-1) * vocab_size(policy)
            sums = torch.stack([rows[kinds].nansum(), rows[~kinds].nansum(),
                                kinds.sum().float(), (~kinds).sum().float()]).reshape(1, 4)
            sums = self.accelerator.gather(sums).sum(0).tolist()
            logits = state[mode].setdefault("logits", [0.0, 0.0, 0.0, 0.0])
            state[mode]["logits"] = [a + b for a, b in zip(logits, sums)]
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
        if rows.get("logits"):
            totals = rows["logits"]
            for index, kind in enumerate(("chosen", "rejected")):
                if totals[2 + index] > 0:
                    metrics[f"logits/{kind}"] = [totals[index] / totals[2 + index]]
                else:
                    metrics.pop(f"logits/{kind}", None)
        kl = metrics.pop("kl", None)
        if kl:
            total = sum(kl) * self.accelerator.num_processes
            if mode == "train":
                metrics["kl"] = [total]
            else:
                logs["kl"] = total  # unprefixed, as LLaMA-Factory's evaluation logs it
        if mode in self.__dict__.get("_kto_rows", {}):
            self._kto_rows[mode].clear()
        super().log(logs, start_time)
