"""Rows with images, videos or audio for a model that takes text only, as LLaMA-Factory 0.9.5 treats them.

Its media plugin checks every conversation it formats (sft, rm/dpo pairs, kto, prediction prompts): a text template
refuses a row with an image ("ValueError: This model does not support image input. Please check whether the correct
`template` is used."; video and audio alike), and a media template on a text model refuses it for want of a processor.
Pre-training reads only the text of such rows there. Seen with tests/golden/sweep_gaps.py on LLaMA-Factory's
mllm_demo, mllm_video_demo, mllm_audio_demo and mllm_video_audio_demo (templates qwen, llama3, qwen3, mistral, gemma:
refused there; here the rows were trained as text, placeholders and all, with a warning).
"""

from __future__ import annotations

import json
import logging

import pytest

from engine.config import build_config
from engine.data import DatasetError, get_dataset, load_eval_prompts
from engine.templates import get_template


@pytest.fixture()
def data_dir(tmp_path):
    from PIL import Image

    folder = tmp_path / "data"
    folder.mkdir()
    Image.new("RGB", (8, 8), (200, 30, 30)).save(folder / "red.png")
    pictures = [{"messages": [{"role": "user", "content": f"<image>What colour is it? ({i})"},
                              {"role": "assistant", "content": "Red."}], "images": ["red.png"]} for i in range(3)]
    pairs = [{"conversations": [{"from": "human", "value": "<image>Colour?"}], "chosen": {"from": "gpt", "value": "Red."},
              "rejected": {"from": "gpt", "value": "Blue."}, "images": ["red.png"]}]
    kto = [{"messages": [{"role": "user", "content": "<image>Colour?"}, {"role": "assistant", "content": "Red."}],
            "label": True, "images": ["red.png"]}]
    text = [{"instruction": f"Say {i}", "input": "", "output": f"The number {i}."} for i in range(4)]
    files = {"pictures": pictures, "pairs": pairs, "kto": kto, "text": text}
    for name, rows in files.items():
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    messages = {"formatting": "sharegpt", "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                                   "assistant_tag": "assistant"}}
    info = {
        "pictures": {"file_name": "pictures.json", **messages, "columns": {"messages": "messages", "images": "images"}},
        "pairs": {"file_name": "pairs.json", "formatting": "sharegpt", "ranking": True,
                  "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected",
                              "images": "images"}},
        "kto": {"file_name": "kto.json", **messages,
                "columns": {"messages": "messages", "kto_tag": "label", "images": "images"}},
        "text": {"file_name": "text.json"},
    }
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


def _build(data_dir, tokenizer, **keys):
    cfg = build_config({"dataset_dir": str(data_dir), "template": "chatml", "cutoff_len": 64, **keys})
    return cfg, get_template("chatml", tokenizer)


@pytest.mark.parametrize(("stage", "dataset", "more"), [
    ("sft", "pictures", {}), ("sft", "text,pictures", {}), ("rm", "pairs", {}), ("dpo", "pairs", {}),
    ("kto", "kto", {}), ("sft", "text", {"eval_dataset": "pictures"}),
    ("sft", "text,pictures", {"val_size": 0.5}),
])
def test_media_rows_for_a_text_model_are_refused(data_dir, chat_tokenizer, monkeypatch, stage, dataset, more):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg, template = _build(data_dir, chat_tokenizer, stage=stage, dataset=dataset, **more)
    with pytest.raises(DatasetError) as err:
        get_dataset(cfg, chat_tokenizer, template)
    message = str(err.value)
    assert "images, videos or audio, but this model takes text only (template `chatml`" in message
    assert "LLaMA-Factory refuses such rows too" in message and "`template: qwen2_vl`" in message
    assert ("pairs" if stage in ("rm", "dpo") else "kto" if stage == "kto" else "pictures") in message


def test_media_rows_for_a_text_model_are_refused_for_each_eval_set(data_dir, chat_tokenizer, monkeypatch):
    from engine.data.each_eval import eval_sets_by_name

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg, template = _build(data_dir, chat_tokenizer, stage="sft", dataset="text", eval_dataset="text,pictures")
    with pytest.raises(DatasetError, match=r"\(pictures\) have images, videos or audio"):
        eval_sets_by_name(cfg, chat_tokenizer, template)


def test_media_rows_for_a_text_model_are_refused_for_prediction(data_dir, chat_tokenizer):
    cfg, template = _build(data_dir, chat_tokenizer, stage="sft", eval_dataset="pictures")
    with pytest.raises(DatasetError, match=r"3 of 3 rows \(pictures\) have images"):
        load_eval_prompts(cfg, chat_tokenizer, template)


def test_pretraining_reads_the_text_of_media_rows(data_dir, chat_tokenizer, monkeypatch, caplog):
    """LLaMA-Factory's pre-training takes each row's first turn as text and never looks at its media."""
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    caplog.set_level(logging.WARNING, logger="engine")
    cfg, template = _build(data_dir, chat_tokenizer, stage="pt", dataset="pictures")
    bundle = get_dataset(cfg, chat_tokenizer, template)
    assert "<image>What colour is it? (0)" in chat_tokenizer.decode(bundle.train[0]["input_ids"])
    assert any("pre-training reads the text only" in r.getMessage() and "pictures" in r.getMessage()
               for r in caplog.records)
