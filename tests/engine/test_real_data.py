"""LLaMA-Factory's own demo data files (../shared/data, registered by its dataset_info.json) end to end: every stage
trains the demo model for 2 steps through the CLI, and tool calls and thinking render in each template's format.

Skipped when ../shared/data is absent (a fresh clone has no ../shared).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
SHARED_DATA = REPO.parent / "shared" / "data"  # as in tests/conftest.py
REASON_FILE = SHARED_DATA / "reason_tool_use_demo_50.jsonl"

pytestmark = [
    pytest.mark.skipif(not (SHARED_DATA / "dataset_info.json").is_file(),
                       reason="needs LLaMA-Factory's demo data in ../shared/data"),
    pytest.mark.usefixtures("library_logs_to_caplog"),
]

FAST = ["model_name_or_path=demo", "max_steps=2", "max_samples=16", "logging_steps=1", "save_strategy=no",
        "plot_loss=false", "cutoff_len=128", "per_device_train_batch_size=4", f"dataset_dir={SHARED_DATA}",
        "overwrite_output_dir=true"]


def _reason_dataset() -> str:
    """reason_tool_use_demo_50 by name when dataset_info.json registers it, else by its file path."""
    info = json.loads((SHARED_DATA / "dataset_info.json").read_text(encoding="utf-8"))
    return "reason_tool_use_demo_50" if "reason_tool_use_demo_50" in info else str(REASON_FILE)


def _train(tmp_path: Path, capsys, example: str, *overrides: str) -> list[dict]:
    out = tmp_path / "run"
    code = main(["train", str(REPO / "examples" / example), f"output_dir={out}", *FAST, *overrides])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "Traceback" not in err
    run = json.loads((out / "run.json").read_text())
    assert run["status"] == "completed"
    events = [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines() if line.strip()]
    logs = [e for e in events if e["event"] == "log"]
    assert [e["step"] for e in logs] == [1, 2]
    assert all(e["loss"] is not None and e["loss"] == e["loss"] for e in logs)  # present and not NaN
    assert (out / "adapter_model.safetensors").is_file()
    return events


@pytest.mark.parametrize("dataset", ["alpaca_en_demo", "alpaca_zh_demo", "identity"])
def test_sft_on_alpaca_files(tmp_path, capsys, dataset):
    events = _train(tmp_path, capsys, "sft_lora_demo.yaml", f"dataset={dataset}", "template=chatml")
    start = next(e for e in events if e["event"] == "start")
    assert start["num_examples"] == 16


@pytest.mark.parametrize("template, tool_format", [("chatml", None), ("qwen", None), ("gemma4", "gemma4")])
def test_sft_with_tools(tmp_path, capsys, template, tool_format):
    extra = [f"tool_format={tool_format}"] if tool_format else []
    _train(tmp_path, capsys, "sft_lora_demo.yaml", "dataset=glaive_toolcall_en_demo", f"template={template}", *extra)


def test_sft_with_reasoning_and_tool_calls(tmp_path, capsys):
    _train(tmp_path, capsys, "sft_lora_demo.yaml", f"dataset={_reason_dataset()}", "template=qwen3")


@pytest.mark.parametrize("stage", ["dpo", "rm"])
def test_preference_pairs(tmp_path, capsys, stage):
    _train(tmp_path, capsys, "dpo_lora_demo.yaml", "dataset=dpo_en_demo", f"stage={stage}", "template=chatml")


def test_kto_labels(tmp_path, capsys):
    _train(tmp_path, capsys, "kto_lora_demo.yaml", "dataset=kto_en_demo", "template=chatml")


def test_kto_with_a_batch_of_one_as_llama_factorys_example_has(tmp_path, capsys):
    # examples/train_lora/qwen3_lora_kto.yaml of LLaMA-Factory 0.9.5: batch 1, 16 preprocessing workers
    events = _train(tmp_path, capsys, "kto_lora_demo.yaml", "dataset=kto_en_demo", "template=chatml",
                    "per_device_train_batch_size=1", "gradient_accumulation_steps=2", "preprocessing_num_workers=16")
    logs = [e for e in events if e["event"] == "log"]
    assert all(e.get("kl") is None or e["kl"] == e["kl"] for e in logs)


@pytest.mark.parametrize("dataset", ["c4_demo", "wiki_demo"])
def test_pretraining_text(tmp_path, capsys, dataset):
    events = _train(tmp_path, capsys, "pt_lora_demo.yaml", f"dataset={dataset}", "template=chatml", "max_samples=4")
    start = next(e for e in events if e["event"] == "start")
    assert start["num_examples"] >= 4  # long documents give several blocks of cutoff_len tokens


def test_images_for_a_text_model_are_refused(tmp_path, capsys):
    """As LLaMA-Factory 0.9.5 refuses them ("This model does not support image input. Please check whether the
    correct `template` is used."): tests/engine/test_text_model_media.py has the stages. The pre-flight check says it,
    before the model or the data loads."""
    out = tmp_path / "run"
    code = main(["train", str(REPO / "examples" / "sft_lora_demo.yaml"), f"output_dir={out}", *FAST,
                 "dataset=mllm_demo", "template=chatml", "max_samples=4"])
    err = capsys.readouterr().err
    assert code != 0 and "Traceback" not in err
    assert "4 rows of mllm_demo have images, videos or audio, but this model takes text only" in err
    assert "Problem in the config" in err and not out.exists()


# ------------------------------------------------------------------------------------ what the model is trained on
def _trained_text(template: str, dataset: str, row: int) -> tuple[str, str]:
    """(whole text, the trained part) of one tokenized row of a shared dataset, with the demo tokenizer."""
    from engine.config import load_config
    from engine.data import get_dataset
    from engine.models import load_tokenizer
    from engine.templates import get_template

    cfg = load_config(None, {"model_name_or_path": "demo", "template": template, "dataset": dataset,
                             "dataset_dir": str(SHARED_DATA), "max_samples": row + 1, "cutoff_len": 8192,
                             "output_dir": "unused"})
    tokenizer = load_tokenizer(cfg.model)
    chosen = get_template(template, tokenizer)
    chosen.fix_tokenizer(tokenizer)
    columns = get_dataset(cfg, tokenizer, chosen).train[row]
    trained = [t for t, label in zip(columns["input_ids"], columns["labels"]) if label != -100]
    return tokenizer.decode(columns["input_ids"]), tokenizer.decode(trained)


def test_glaive_tool_calls_in_each_format():
    call = '{"name": "search_recipes", "arguments": {"ingredients": ["chicken", "bell peppers", "rice"]}}'
    text, trained = _trained_text("qwen", "glaive_toolcall_en_demo", 0)
    assert '<tools>\n{"type": "function", "function": {"name": "search_recipes"' in text
    assert f"<tool_call>\n{call}\n</tool_call><|im_end|>" in trained
    assert "<tool_response>" in text and "<tool_response>" not in trained
    text, trained = _trained_text("gemma4", "glaive_toolcall_en_demo", 0)
    assert "declaration:search_recipes{" in text
    assert ('<|tool_call>call:search_recipes{ingredients:[<|"|>chicken<|"|>,<|"|>bell peppers<|"|>,<|"|>rice<|"|>]}'
            '<tool_call|>') in trained
    assert "<|turn>tool\n" in text and "<|turn>tool" not in trained


def test_reasoning_and_tool_calls_from_typed_content_parts():
    text, trained = _trained_text("qwen3", _reason_dataset(), 1)
    assert '<tool_call>\n{"name": "get_movie_details", "arguments": {"title": "The Dark Knight"}}\n</tool_call>' in trained
    assert "<think>\nThe user is asking about another movie" in trained
    assert "<|im_start|>user\n<tool_response>\n" in text
    text, trained = _trained_text("gemma4", _reason_dataset(), 1)
    assert "<|channel>thought\nThe user is asking about another movie" in trained
    assert '<|tool_call>call:get_movie_details{title:<|"|>The Dark Knight<|"|>}<tool_call|>' in trained
