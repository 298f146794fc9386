"""Evaluation: BLEU/ROUGE metrics for generated text, perplexity, and batch prediction (``run_predict``)."""

from engine.evaluate.metrics import compute_generation_metrics, perplexity, rouge_l, rouge_n, sentence_bleu, tokenize

__all__ = ["compute_generation_metrics", "perplexity", "rouge_l", "rouge_n", "sentence_bleu", "tokenize"]
