"""`preserve_thinking` reaches every template LLaMA-Factory applies it to: its get_template_and_fix_tokenizer sets it
on a reasoning template for training, prediction and its chat engines alike (data/template.py:663), so the dataset
preview and the generation path read it too (here both left it out, showing and prompting without the history
thoughts a run with `preserve_thinking: true` keeps)."""

from __future__ import annotations

import json

from golden.tokenizers import load

from engine.config import build_config
from engine.data import preview_dataset
from engine.templates import get_template

T = "<think>\n{}\n</think>\n\n"
TAGS = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant"}


def _turns(*texts: str) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant", "content": text} for i, text in enumerate(texts)]


def _config(folder, stage: str, dataset: str, **more):
    sft = [{"messages": _turns("Hi", T.format("old") + "Hello.", "Bye", "Bye.")}]
    pref = [{"messages": _turns("Hi", T.format("old") + "Hello.", "Bye"),
             "chosen": {"role": "assistant", "content": "Bye."}, "rejected": {"role": "assistant", "content": "Go."}}]
    info = {"sft": {"file_name": "sft.json", "formatting": "sharegpt", "columns": {"messages": "messages"},
                    "tags": TAGS},
            "pref": {"file_name": "pref.json", "formatting": "sharegpt", "ranking": True, "tags": TAGS,
                     "columns": {"messages": "messages", "chosen": "chosen", "rejected": "rejected"}}}
    for name, rows in (("sft", sft), ("pref", pref)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return build_config({"model_name_or_path": "unused", "dataset_dir": str(folder), "dataset": dataset,
                         "stage": stage, "template": "qwen3", **more})


def _preview_text(cfg, stage: str) -> str:
    tokenizer = load("family", "qwen3")
    row = preview_dataset(cfg.data, stage, tokenizer, get_template("qwen3"), n=1)["rows"][0]
    return "".join(text for text, _ in row["spans"])


def test_preview_of_preference_rows_follows_preserve_thinking(tmp_path):
    """Preference prompts are single-turn encodings: history thoughts stay only with preserve_thinking."""
    assert "old" not in _preview_text(_config(tmp_path, "dpo", "pref"), "dpo")
    assert T.format("old") + "Hello." in _preview_text(_config(tmp_path, "dpo", "pref", preserve_thinking=True), "dpo")


def test_preview_with_mask_history_follows_preserve_thinking(tmp_path):
    """sft with mask_history drops history thoughts unless preserve_thinking (processor/supervised.py:66)."""
    assert "old" not in _preview_text(_config(tmp_path, "sft", "sft", mask_history=True), "sft")
    kept = _preview_text(_config(tmp_path, "sft", "sft", mask_history=True, preserve_thinking=True), "sft")
    assert T.format("old") + "Hello." in kept
    assert T.format("old") + "Hello." in _preview_text(_config(tmp_path, "sft", "sft"), "sft")


def test_generation_template_reads_preserve_thinking(tmp_path):
    from engine.infer.generation import template_for

    tokenizer = load("family", "qwen3")
    history = [*_turns("Hi", T.format("old") + "Hello.", "Bye"), {"role": "assistant", "content": ""}]
    for preserve in (False, True):
        template = template_for(_config(tmp_path, "sft", "sft", preserve_thinking=preserve), tokenizer)
        assert template.preserve_thinking is preserve
        prompt, _ = template.encode_oneturn(tokenizer, history)
        assert ("old" in tokenizer.decode(prompt)) is preserve
