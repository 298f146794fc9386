"""Text-similarity metrics for generated predictions: BLEU-4 and ROUGE-1/2/L, plus perplexity.

The scores are LLaMA-Factory's (:func:`lf_generation_metrics`, computed with the libraries it uses: jieba, NLTK,
rouge-chinese, all lf-board dependencies). Where one of them is missing, this module's own scores stand in (with a
warning), described next.

Both fallback metrics work on tokens. Text is split so that Chinese, Japanese and Korean characters count one token each
(those scripts do not separate words with spaces), runs of letters and digits of other scripts count as one word,
and each punctuation mark is its own token. Scores are case-sensitive and reported as percentages (0-100),
averaged over the examples, under LLaMA-Factory's names (``predict_bleu-4``, ``predict_rouge-1``, ...).
"""

from __future__ import annotations

import logging
import math
import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger(__name__)

# CJK ideographs (with extensions and compatibility blocks), kana, Hangul syllables and jamo, and CJK/full-width
# punctuation: each character is one token.
_CJK_RANGES = (
    "\u2e80-\u2fdf"  # CJK radicals, Kangxi radicals
    "\u3000-\u303f"  # CJK symbols and punctuation
    "\u3040-\u30ff"  # Hiragana, Katakana
    "\u3100-\u312f"  # Bopomofo
    "\u3130-\u318f"  # Hangul compatibility jamo
    "\u31f0-\u31ff"  # Katakana phonetic extensions
    "\u3400-\u4dbf"  # CJK extension A
    "\u4e00-\u9fff"  # CJK unified ideographs
    "\uac00-\ud7af"  # Hangul syllables
    "\uf900-\ufaff"  # CJK compatibility ideographs
    "\uff00-\uffef"  # half-width and full-width forms
    "\U00020000-\U0002fa1f"  # CJK extensions B-F, compatibility supplement
)
_TOKEN_RE = re.compile(rf"[{_CJK_RANGES}]|[^\W_{_CJK_RANGES}]+|[^\w\s]|_+")


def tokenize(text: str) -> list[str]:
    """Split text into metric tokens: one per CJK character, one per word elsewhere, one per punctuation mark.

    Args:
        text: Any text.

    Returns:
        The tokens in order; an empty list for blank text.
    """
    return _TOKEN_RE.findall(text or "")


def _ngrams(tokens: Sequence[str], n: int) -> Counter:
    return Counter(tuple(tokens[i : i + n]) for i in range(len(tokens) - n + 1))


def sentence_bleu(hypothesis: Sequence[str], reference: Sequence[str], max_order: int = 4) -> float:
    """Smoothed sentence-level BLEU of one hypothesis against one reference, in [0, 1].

    Orders longer than the hypothesis are left out (the "effective order"), so a short exact match still scores 1.
    An order with no matching n-gram gets the geometric smoothing of Chen & Cherry (2014, method 3): the k-th such
    order counts as ``1 / (2**k * candidate n-grams)`` matches instead of zero.

    Args:
        hypothesis: Tokens of the generated text.
        reference: Tokens of the expected text.
        max_order: Longest n-gram order (4 for BLEU-4).

    Returns:
        The BLEU score; 0.0 when either side is empty or no token matches at all.
    """
    hyp_len, ref_len = len(hypothesis), len(reference)
    if hyp_len == 0 or ref_len == 0:
        return 0.0
    if not set(hypothesis) & set(reference):
        return 0.0  # nothing in common: smoothing must not invent a score
    log_precisions = []
    zero_orders = 0
    for n in range(1, min(max_order, hyp_len) + 1):
        hyp_counts = _ngrams(hypothesis, n)
        ref_counts = _ngrams(reference, n)
        matches = sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items())
        total = sum(hyp_counts.values())
        if matches == 0:
            zero_orders += 1
            precision = 1.0 / (2**zero_orders * total)
        else:
            precision = matches / total
        log_precisions.append(math.log(precision))
    brevity = 1.0 if hyp_len > ref_len else math.exp(1.0 - ref_len / hyp_len)
    return brevity * math.exp(sum(log_precisions) / len(log_precisions))


def _f_score(overlap: int, hyp_total: int, ref_total: int) -> float:
    if overlap == 0 or hyp_total == 0 or ref_total == 0:
        return 0.0
    precision, recall = overlap / hyp_total, overlap / ref_total
    return 2 * precision * recall / (precision + recall)


def rouge_n(hypothesis: Sequence[str], reference: Sequence[str], n: int) -> float:
    """ROUGE-N F1 (clipped n-gram overlap), in [0, 1].

    Args:
        hypothesis: Tokens of the generated text.
        reference: Tokens of the expected text.
        n: The n-gram order (1 or 2 for ROUGE-1/ROUGE-2).

    Returns:
        The F1 score of n-gram overlap; 0.0 when either side has no n-gram of that order.
    """
    hyp_counts, ref_counts = _ngrams(hypothesis, n), _ngrams(reference, n)
    overlap = sum(min(count, ref_counts[gram]) for gram, count in hyp_counts.items())
    return _f_score(overlap, sum(hyp_counts.values()), sum(ref_counts.values()))


def _lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    if len(a) < len(b):
        a, b = b, a
    previous = [0] * (len(b) + 1)
    for token in a:
        current = [0]
        for j, other in enumerate(b):
            current.append(previous[j] + 1 if token == other else max(previous[j + 1], current[j]))
        previous = current
    return previous[-1]


def rouge_l(hypothesis: Sequence[str], reference: Sequence[str]) -> float:
    """ROUGE-L F1 (longest common subsequence), in [0, 1].

    Args:
        hypothesis: Tokens of the generated text.
        reference: Tokens of the expected text.

    Returns:
        The F1 score of the longest common subsequence; 0.0 when either side is empty.
    """
    return _f_score(_lcs_length(hypothesis, reference), len(hypothesis), len(reference))


def lf_metric_libraries() -> tuple[Any, Any, Any, Any] | None:
    """(jieba, sentence_bleu, SmoothingFunction, Rouge): the libraries LLaMA-Factory scores predictions with (its
    ``metrics`` extra; dependencies of lf-board), or None where one is missing."""
    try:
        import jieba
        from nltk.translate.bleu_score import SmoothingFunction, sentence_bleu
        from rouge_chinese import Rouge
    except ImportError:
        return None
    jieba.setLogLevel(logging.WARNING)  # its dictionary-loading lines
    return jieba, sentence_bleu, SmoothingFunction, Rouge


def lf_generation_metrics(preds: Sequence[str], labels: Sequence[str], libraries: tuple) -> dict[str, float]:
    """LLaMA-Factory 0.9.5's scores (``ComputeSimilarity``): ROUGE-1/2/L F over jieba's words (``rouge_chinese``),
    BLEU-4 over characters with NLTK's smoothing method 3; each pair's score a percentage rounded to 4 places, then
    their mean. A pair where either side has no word scores 0 for ROUGE (BLEU still counts)."""
    jieba, bleu, smoothing, rouge = libraries
    method3 = smoothing().method3
    scores: dict[str, list[float]] = {"rouge-1": [], "rouge-2": [], "rouge-l": [], "bleu-4": []}
    for pred, label in zip(preds, labels):
        hypothesis, reference = " ".join(jieba.cut(pred)), " ".join(jieba.cut(label))
        if not hypothesis.split() or not reference.split():
            found = {name: {"f": 0.0} for name in ("rouge-1", "rouge-2", "rouge-l")}
        else:
            found = rouge().get_scores(hypothesis, reference)[0]
        for name, value in found.items():
            scores[name].append(round(value["f"] * 100, 4))
        scores["bleu-4"].append(round(bleu([list(label)], list(pred), smoothing_function=method3) * 100, 4))
    import numpy as np

    # numpy's mean, as there (its pairwise sum can differ from a plain sum in the last digit)
    return {f"predict_{name}": (float(np.mean(values)) if values else 0.0) for name, values in scores.items()}


def compute_generation_metrics(preds: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """Average BLEU-4 and ROUGE-1/2/L F1 over prediction/label pairs, as percentages: LLaMA-Factory's own scores
    (:func:`lf_generation_metrics`) where its metric libraries are installed (they are lf-board dependencies),
    else this module's (word-level BLEU, a note says so).

    Args:
        preds: Generated texts.
        labels: Expected texts, one per prediction.

    Returns:
        ``{"predict_bleu-4", "predict_rouge-1", "predict_rouge-2", "predict_rouge-l"}``, each a percentage
        rounded to 4 decimals (all 0.0 for no examples).

    Raises:
        ValueError: When the two lists differ in length.
    """
    if len(preds) != len(labels):
        raise ValueError(f"Got {len(preds)} predictions but {len(labels)} labels; they must pair up one to one.")
    libraries = lf_metric_libraries()
    if libraries is not None:
        return lf_generation_metrics(preds, labels, libraries)
    logger.warning("jieba, nltk or rouge-chinese is not installed: BLEU-4 and ROUGE are LF Board's own word-level "
                   "scores, not LLaMA-Factory's (pip install jieba nltk rouge-chinese).")
    return own_generation_metrics(preds, labels)


def own_generation_metrics(preds: Sequence[str], labels: Sequence[str]) -> dict[str, float]:
    """This module's BLEU-4 and ROUGE-1/2/L F1 (word-level, CJK by character), averaged, as percentages."""
    if len(preds) != len(labels):
        raise ValueError(f"Got {len(preds)} predictions but {len(labels)} labels; they must pair up one to one.")
    sums = {"predict_bleu-4": 0.0, "predict_rouge-1": 0.0, "predict_rouge-2": 0.0, "predict_rouge-l": 0.0}
    for pred, label in zip(preds, labels):
        hyp, ref = tokenize(pred), tokenize(label)
        sums["predict_bleu-4"] += sentence_bleu(hyp, ref)
        sums["predict_rouge-1"] += rouge_n(hyp, ref, 1)
        sums["predict_rouge-2"] += rouge_n(hyp, ref, 2)
        sums["predict_rouge-l"] += rouge_l(hyp, ref)
    count = max(1, len(preds))
    return {name: round(100.0 * total / count, 4) for name, total in sums.items()}


def perplexity(eval_loss: float) -> float:
    """Perplexity from a mean token cross-entropy loss (natural log): ``exp(loss)`` in double precision, as
    LLaMA-Factory's pt workflow computes its ``eval_perplexity`` (``math.exp``; ``inf`` where that overflows, NaN for
    a NaN loss). The one function behind every perplexity written here: the ``eval`` events' and the results'.

    Args:
        eval_loss: The mean evaluation loss.

    Returns:
        ``exp(eval_loss)``, or ``inf`` when that overflows.
    """
    try:
        return math.exp(eval_loss)
    except OverflowError:
        return math.inf


def with_perplexity(eval_metrics: dict[str, Any], stage: str) -> dict[str, Any]:
    """``eval_metrics`` of a final evaluation with its perplexity: LLaMA-Factory's ``eval_perplexity`` for ``pt``
    (its key and value), our ``perplexity`` for the other stages (LLaMA-Factory writes none there); as they are
    without an ``eval_loss``."""
    if "eval_loss" not in eval_metrics:
        return eval_metrics
    key = "eval_perplexity" if stage == "pt" else "perplexity"
    return {**eval_metrics, key: perplexity(eval_metrics["eval_loss"])}
