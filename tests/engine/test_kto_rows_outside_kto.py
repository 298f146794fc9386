"""A KTO dataset used by another stage trained on its undesirable answers (kto_tag false) as if they were right:
sft learned the wrong answers, prediction scored against them. LLaMA-Factory drops every KTO row outside stage kto;
here the desirable rows are used and the undesirable ones skipped with the usual skipped-rows warning."""

import json
import logging
from types import SimpleNamespace

from engine.data import load_examples


def test_undesirable_kto_rows_are_not_trained_outside_kto(tmp_path, caplog):
    rows = [{"messages": [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}],
             "kto_tag": i % 2 == 0} for i in range(4)]
    (tmp_path / "kto.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps({"kto": {
        "file_name": "kto.json", "formatting": "sharegpt", "columns": {"messages": "messages", "kto_tag": "kto_tag"},
        "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}}}))
    args = SimpleNamespace(dataset_dir=str(tmp_path), max_samples=None, mix_strategy="concat", interleave_probs=None)
    with caplog.at_level(logging.WARNING, logger="engine"):
        sft = list(load_examples(args, "kto", "sft"))
    assert [row["messages"][-1]["content"] for row in sft] == ["a0", "a2"]
    assert any("skipped 2 of 4 rows" in r.getMessage() and "kto_tag false" in r.getMessage() for r in caplog.records)
    assert [row["kto_tag"] for row in load_examples(args, "kto", "kto")] == [True, False, True, False]
