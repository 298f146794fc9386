"""Regenerate tests/golden/lf_metrics.json: LLaMA-Factory 0.9.5's BLEU-4 / ROUGE scores of fixed predictions.

    /path/to/llamafactory-venv/bin/python -m tests.golden.generate_metrics TOKENIZER_FOLDER

Runs LLaMA-Factory's own ``ComputeSimilarity`` (its ``metrics`` extra installed: jieba, nltk, rouge-chinese) on
each (prediction, label) pair below, encoded with the tokenizer given and decoded by it as LLaMA-Factory decodes
them; the file keeps the pairs as decoded and the scores, for tests/engine/test_metrics.py. Nothing of
LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

PATH = Path(__file__).with_name("lf_metrics.json")

PAIRS = [
    ("Paris is the capital of France.", "The capital of France is Paris.\n"),
    ("I am an AI assistant.", "Hello! I am an AI assistant developed by the team. How can I assist you today?\n"),
    ("", "An answer nobody gave.\n"),
    ("Something said.", ""),
    ("今天天气很好，我们去公园散步吧。", "今天天气不错，我们一起去公园散步。\n"),
    ("我是一个人工智能助手。", "您好，我是人工智能助手，很高兴为您服务。"),
    ("The model outputs 42, then stops!", "The answer is 42."),
    ("Mixed 中文 and English words 123", "Mixed English and 中文 words 12345"),
    ("!!! ...", "?"),
    ("repeat repeat repeat repeat", "repeat"),
]


def main() -> None:
    import numpy as np
    from llamafactory.train.sft.metric import ComputeSimilarity
    from transformers import AutoTokenizer
    from transformers.trainer_utils import EvalPrediction

    tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
    out = {"pairs": [], "scores": []}
    for pred, label in PAIRS:
        ids = [tokenizer(text, add_special_tokens=False)["input_ids"] or [tokenizer.pad_token_id]
               for text in (pred, label)]
        width = max(len(x) for x in ids)
        padded = [x + [-100] * (width - len(x)) for x in ids]
        metric = ComputeSimilarity(tokenizer=tokenizer)
        scores = metric(EvalPrediction(predictions=np.array([padded[0]]), label_ids=np.array([padded[1]])))
        decoded = [tokenizer.decode([t if t != -100 else tokenizer.pad_token_id for t in x], skip_special_tokens=True)
                   for x in padded]
        out["pairs"].append(decoded)
        out["scores"].append(scores)
    everything = ComputeSimilarity(tokenizer=tokenizer)
    preds, labels = zip(*out["pairs"])
    encoded = [tokenizer(list(texts), add_special_tokens=False)["input_ids"] for texts in (preds, labels)]
    width = max(len(x) for group in encoded for x in group) or 1
    arrays = [np.array([(x or [tokenizer.pad_token_id]) + [-100] * (width - len(x or [0])) for x in group])
              for group in encoded]
    out["mean"] = everything(EvalPrediction(predictions=arrays[0], label_ids=arrays[1]))
    PATH.write_text(json.dumps(out, ensure_ascii=False, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {PATH}")


if __name__ == "__main__":
    main()
