"""The final evaluation, run once: when training's last step was itself an evaluation step, its results are kept.

With ``eval_strategy: steps`` and ``eval_steps`` dividing the run's steps (or ``eval_strategy: epoch``), the Trainer
evaluates at the last step, and the workflow's final evaluation would then score the same weights on the same rows a
second time. LLaMA-Factory 0.9.5 does run it twice: its trainer_log.jsonl and trainer_state.json hold one evaluation
at the last step (the second comes after they are written), and its eval_results.json / all_results.json hold the
second's numbers, which equal the first's but for the timings. Here the first one's metrics are written to those
files and the second is not run: the same keys and values, and one evaluation event at the last step, as in its log.

It is run again where the weights may have changed since: ``load_best_model_at_end`` (``save_strategy: best``,
early stopping) loads the best checkpoint after the last step.
"""

from __future__ import annotations

import logging
from typing import Any

logger = logging.getLogger(__name__)


def remember_evaluations(trainer: Any) -> None:
    """Wrap ``trainer.evaluate`` so that each whole evaluation (not the per-set calls it makes for a dict of
    evaluation sets) leaves its metrics and the step it ran at on the trainer (``_last_evaluation``)."""
    evaluate = trainer.evaluate
    depth = [0]

    def remembering(*args: Any, **kwargs: Any) -> dict[str, float]:
        depth[0] += 1
        try:
            metrics = evaluate(*args, **kwargs)
        finally:
            depth[0] -= 1
        if depth[0] == 0 and not args and not kwargs.get("eval_dataset"):  # the trainer's own evaluation set(s)
            trainer._last_evaluation = (trainer.state.global_step, dict(metrics))
        return metrics

    trainer.evaluate = remembering


def final_evaluation(trainer: Any, trained: bool) -> dict[str, float]:
    """The metrics of the evaluation after training (``trained``) or alone: those of the evaluation training ran at
    its last step where the weights have not changed since, else a new evaluation."""
    last = getattr(trainer, "_last_evaluation", None)
    if trained and last is not None and last[0] == trainer.state.global_step and last[0] > 0 \
            and not trainer.args.load_best_model_at_end:
        logger.info("Final evaluation: the one at the last step (%d) is kept, not run again.", last[0])
        return dict(last[1])
    return trainer.evaluate()
