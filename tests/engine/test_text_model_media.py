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
    kto_text = [{"messages": [{"role": "user", "content": f"Say {i}"}, {"role": "assistant", "content": f"{i}."}],
                 "label": i % 2 == 0} for i in range(4)]
    files = {"pictures": pictures, "pairs": pairs, "kto": kto, "text": text, "kto_text": kto_text}
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
        "kto_text": {"file_name": "kto_text.json", **messages, "columns": {"messages": "messages", "kto_tag": "label"}},
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


# ------------------------------------------------------------------ said before the run: lf-engine check, the board

def _checked(data_dir, **keys):
    """The media problems `lf-engine check` finds (engine.preflight.check's media part) for the demo text model."""
    from engine.multimodal.checks import check_media

    return check_media(build_config({"model_name_or_path": "demo", "dataset_dir": str(data_dir), "template": "chatml",
                                     **keys}))


@pytest.mark.parametrize(("stage", "dataset", "more", "head"), [
    ("sft", "pictures", {}, "3 rows of pictures have"), ("sft", "text,pictures", {"val_size": 0.5}, "3 rows of pictures"),
    ("sft", "text", {"eval_dataset": "pictures"}, "3 rows of pictures"), ("rm", "pairs", {}, "1 row of pairs has"),
    ("dpo", "pairs", {}, "1 row of pairs has"), ("kto", "kto", {}, "1 row of kto has"), ("ppo", "pictures", {}, ""),
    ("sft", "pictures,kto", {"max_samples": 2}, "3 rows of kto, pictures have"),
])
def test_the_check_says_it_before_the_run(data_dir, stage, dataset, more, head):
    """lf-engine check (and the board's check before Start) gives the data loader's refusal: the datasets, the
    template, the fix. Before, the check passed such a config and the run stopped once the data loaded."""
    problems = _checked(data_dir, stage=stage, dataset=dataset, **more)
    assert len(problems) == 1, problems
    assert head in problems[0]
    assert "images, videos or audio, but this model takes text only (template `chatml`, no image/video/audio " \
           "processor); LLaMA-Factory refuses such rows too. Use a multimodal model with its template (e.g. a " \
           "Qwen2-VL model with `template: qwen2_vl`), or a dataset without media." in problems[0]


def test_the_check_and_the_run_give_one_message(data_dir, chat_tokenizer, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg, template = _build(data_dir, chat_tokenizer, stage="sft", dataset="pictures", model_name_or_path="demo")
    with pytest.raises(DatasetError) as err:
        get_dataset(cfg, chat_tokenizer, template)
    from engine.multimodal.checks import check_media

    [said] = check_media(cfg)
    assert said.split(" images, videos or audio")[1] == str(err.value).split(" images, videos or audio")[1]
    assert said.startswith("3 rows of pictures have") and str(err.value).startswith("3 of 3 rows (pictures) have")


def test_the_check_leaves_what_the_run_trains(data_dir, chat_tokenizer, monkeypatch):
    """Pre-training reads the text; GRPO reads prompts; a KTO mix's untagged set is dropped before its media is
    read (and the run trains it: checked with get_dataset); rows without media pass."""
    assert _checked(data_dir, stage="pt", dataset="pictures") == []
    assert _checked(data_dir, stage="grpo", dataset="pictures", reward_funcs="length") == []
    assert _checked(data_dir, stage="sft", dataset="text") == []
    assert _checked(data_dir, stage="kto", dataset="kto_text,pictures") == []
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg, template = _build(data_dir, chat_tokenizer, stage="kto", dataset="kto_text,pictures")
    assert len(get_dataset(cfg, chat_tokenizer, template).train) == 4


def _model_folder(path, config):
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps(config), encoding="utf-8")
    return str(path)


def test_the_model_is_judged_from_its_config_without_loading_it(data_dir, tmp_path):
    """A local folder or a hub id in the cache: text only when config.json names no vision or audio tower (the
    run's own test); a vision-language model's rows go to its media checks; a hub id not in the cache is unknown."""
    text = _model_folder(tmp_path / "text", {"model_type": "qwen2", "hidden_size": 64})
    omni = _model_folder(tmp_path / "omni", {"model_type": "qwen2_5_omni",
                                             "thinker_config": {"audio_config": {}, "vision_config": {"depth": 1}}})
    vlm = _model_folder(tmp_path / "vlm", {"model_type": "qwen2_vl", "vision_config": {"depth": 1}})
    keys = {"dataset_dir": str(data_dir), "template": "qwen", "stage": "sft", "dataset": "pictures"}
    from engine.multimodal.checks import check_media

    def said(model, **more):
        return "\n".join(check_media(build_config({**keys, "model_name_or_path": model, **more})))

    assert "3 rows of pictures have images, videos or audio, but this model takes text only (template `qwen`" in \
        said(text)
    for model in (omni, vlm, "demo-vlm"):
        assert "takes text only" not in said(model, template="qwen2_vl")
    cache = tmp_path / "hub"
    assert said("someone/text-model", cache_dir=str(cache)) == ""  # not in the cache: not known here
    snapshot = cache / "models--someone--text-model" / "snapshots" / ("a" * 40)
    _model_folder(snapshot, {"model_type": "llama"})
    (cache / "models--someone--text-model" / "refs").mkdir()
    (cache / "models--someone--text-model" / "refs" / "main").write_text("a" * 40)
    assert "takes text only" in said("someone/text-model", cache_dir=str(cache))
