"""A required number box the browser sends nothing for (emptied, or holding 5,000 digits, which the browser reads as
infinity and sends as nothing) is refused by name before anything runs; it ran with the field's default unseen.
An optional number's empty box keeps meaning "not set"."""

from __future__ import annotations

from pathlib import Path

import pytest

from app import forms, widgets
from app.tabs import chat, evaluate, export

DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"

pytestmark = pytest.mark.skipif(not (DEMO_DATA / "dataset_info.json").is_file(), reason="examples/data is missing")


def test_only_a_required_number_s_empty_box_is_a_problem():
    assert widgets.is_empty("learning_rate", None) and widgets.is_empty("cutoff_len", "")
    assert widgets.is_empty("temperature", None)  # a slider's box
    assert not widgets.is_empty("learning_rate", 0) and not widgets.is_empty("max_steps", -1)
    assert not widgets.is_empty("max_samples", None) and not widgets.is_empty("lora_alpha", None)  # "not set"
    assert not widgets.is_empty("lora_target", "") and not widgets.is_empty("packing", None)  # no number
    (en,) = widgets.empty_problems(["learning_rate", "max_samples"], [None, None], "en")
    assert en.startswith("**Learning rate** (`learning_rate`) is empty") and "default is 5e-05" in en
    (zh,) = widgets.empty_problems(["learning_rate"], [None], "zh")
    assert zh.startswith("**学习率**（`learning_rate`）为空")


def _handler(demo, module: str, name: str):
    return next(f for f in demo.fns.values()
                if getattr(f.fn, "__qualname__", "").endswith(f".{name}") and f.fn.__module__ == module)


def _values(block_fn, lang: str, **by_id):
    """The page's values of ``block_fn``'s inputs as it opens, the page's language, and ``by_id`` (elem_id -> value)."""
    out = []
    for block in block_fn.inputs:
        elem = getattr(block, "elem_id", None)
        out.append(lang if elem == "lf-lang-code" else by_id.get(elem, getattr(block, "value", None)))
    return out


def test_train_start_and_its_live_check_refuse_an_empty_learning_rate(board):
    from app.ui import build_ui

    demo = build_ui(board)
    start, form = _handler(demo, "app.tabs.train", "on_start"), _handler(demo, "app.tabs.train", "on_form")
    for lang, words in (("en", "**Learning rate** (`learning_rate`) is empty"), ("zh", "**学习率**（`learning_rate`）为空")):
        message, watched, pending, follow, started = start.fn(*_values(start, lang, **{"cfg-learning_rate": None}))
        assert words in message and ("default is" in message or "默认值" in message), message
        assert watched == pending == follow == {"__type__": "update"}  # gr.skip(): nothing started
        assert started is None  # no line under Start to follow
        command, text, _ = form.fn(*_values(form, lang, **{"cfg-learning_rate": None}))
        assert command == "" and words.replace("**", "") in text, text  # a code view: no bold
    assert not list(board.jobs.runs_dir.iterdir())
    # an emptied optional box (max_samples: "not set") is no problem: the run starts
    message, watched, *_ = start.fn(*_values(start, "en", **{"cfg-max_samples": None}))
    assert watched and "empty" not in message, message


def test_evaluate_export_and_chat_refuse_an_empty_number_box(board, tmp_path, monkeypatch):
    keys = ["cutoff_len", "max_samples", "per_device_eval_batch_size", *forms.GENERATION_KEYS]
    values = ["demo", "lora", "", "chatml", "predict", str(DEMO_DATA), ["demo_identity"], 256, 20, 4, None, 0.5, 0.7,
              50, 1.0, False]
    message, run_id = evaluate.start_eval(board, values, keys, "zh")
    assert run_id is None and "**最大生成长度**（`max_new_tokens`）为空" in message, message
    # Eval generates nothing: its generation settings are not asked for
    message, run_id = evaluate.start_eval(board, values[:4] + ["eval"] + values[5:], keys, "en")
    assert run_id and "empty" not in message, message

    adapter = tmp_path / "ckpt"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    message, run_id = export.start_export(
        board, ["demo", "lora", str(adapter), "chatml", "", None, "cpu", "auto", False], list(forms.EXPORT_KEYS), "en")
    assert run_id is None and "(`export_size`) is empty" in message, message

    from app.ui import build_ui

    demo = build_ui(board)
    load, send = _handler(demo, "app.tabs.chat", "on_load"), _handler(demo, "app.tabs.chat", "on_send")
    *_, last = load.fn(*_values(load, "en", **{"cfg-chat-max_new_tokens": None}))
    assert "(`max_new_tokens`) is empty" in last[0], last
    assert not [r for r in board.jobs.runs_dir.iterdir() if "-chat" in r.name]
    inputs = _values(send, "zh", **{"cfg-chat-temperature": None})
    inputs[0] = {"text": "hi", "files": []}
    monkeypatch.setattr(chat, "live_servers", lambda board, servers: {"main": {"id": "r1", "ready": True}})
    *_, last = send.fn(*inputs)
    assert "**温度**（`temperature`）为空" in last[-1], last
