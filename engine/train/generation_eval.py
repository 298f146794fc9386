"""Evaluation that generates: ``predict_with_generate`` with ``do_eval`` (or an ``eval_strategy``), as in
LLaMA-Factory, scores the evaluation rows' generated replies (BLEU-4, ROUGE-1/2/L: ``eval_bleu-4``, ...) instead of
their loss. Its evaluation then passes no labels to the model, so there is no ``eval_loss``; the replies are
generated and scored exactly as ``do_predict`` does it (:func:`engine.evaluate.predict.run_predict`: the same
prompts, cut the same way, the same batches), without writing a predictions file.
"""

from __future__ import annotations

from typing import Any


class GenerationEvalMixin:
    """A Trainer mixin: ``evaluate`` generates and scores when ``generation_eval`` is set."""

    generation_eval: tuple[Any, Any, Any, list[dict[str, Any]]] | None = None  # cfg, tokenizer, template, rows

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        if self.generation_eval is None:
            return super().evaluate(eval_dataset, ignore_keys, metric_key_prefix)
        from engine.evaluate.predict import run_predict

        cfg, tokenizer, template, rows = self.generation_eval
        metrics = run_predict(cfg, self.model, tokenizer, template, rows, cfg.train.output_dir,
                              prefix=metric_key_prefix, write=False)
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


def generation_eval(cfg: Any, tokenizer: Any, template: Any, bundle: Any) -> tuple | None:
    """What an evaluation that generates needs, when the config asks for one (else None)."""
    if not cfg.train.predict_with_generate or bundle.eval is None:
        return None
    from engine.data import load_eval_prompts

    return cfg, tokenizer, template, load_eval_prompts(cfg, tokenizer, template, getattr(bundle, "media", None))
