"""Handler tests: form values in, config, YAML and commands out (no browser; jobs run a fake engine)."""

from __future__ import annotations

import json
import os
import re
import time
from pathlib import Path

import gradio as gr
import pytest
import yaml

from app import catalog, dataset_preview, forms, widgets
from app.tabs import chat, evaluate, export, runs, train, train_data
from app.workspace import LAST_CONFIG

DEMO_DATA = Path(__file__).resolve().parents[2] / "examples" / "data"

pytestmark = pytest.mark.skipif(not (DEMO_DATA / "dataset_info.json").is_file(), reason="examples/data is missing")

TRAIN_KEYS = [
    "cutoff_len",
    "learning_rate",
    "num_train_epochs",
    "per_device_train_batch_size",
    "lora_rank",
    "lora_alpha",
    "packing",
    "pref_beta",
    "freeze_trainable_layers",
    "quantization_bit",
]


def train_values(**over):
    """Form values in the order train.mapping_of expects (top bar, stage, data, then TRAIN_KEYS)."""
    base = {
        "model": "demo",
        "ft": "lora",
        "checkpoint": "",
        "template": "chatml",
        "stage": "sft",
        "dataset_dir": str(DEMO_DATA),
        "dataset": ["demo_identity", "demo_alpaca"],
        "eval_dataset": [],
        "cutoff_len": 256,
        "learning_rate": 2e-3,
        "num_train_epochs": 1,
        "per_device_train_batch_size": 8.0,
        "lora_rank": 16,
        "lora_alpha": None,
        "packing": "auto",
        "pref_beta": 0.2,
        "freeze_trainable_layers": 2,
        "quantization_bit": "none",
    }
    base.update(over)
    head = [
        base[k] for k in ("model", "ft", "checkpoint", "template", "stage", "dataset_dir", "dataset", "eval_dataset")
    ]
    return head + [base[k] for k in TRAIN_KEYS]


def test_widget_kinds_follow_the_config_types():
    assert widgets.widget_kind("stage") == "dropdown"
    assert widgets.widget_kind("quantization_bit") == "dropdown"
    assert widgets.choices_of("quantization_bit") == ["none", "4", "8"]
    assert widgets.widget_kind("bf16") == "checkbox"
    assert widgets.widget_kind("packing") == "tristate"
    assert widgets.widget_kind("lora_rank") == "slider"
    assert widgets.widget_kind("lora_dropout") == "slider"
    assert widgets.widget_kind("learning_rate") == "number"
    assert widgets.widget_kind("lora_target") == "text"


def test_numeric_widgets_are_bounded_never_free_text():
    from engine.config import all_keys

    with gr.Blocks():
        for key, (_, f) in all_keys().items():
            kind = widgets.widget_kind(key)
            comp = widgets.make_widget(key)
            if kind == "slider":
                assert isinstance(comp, gr.Slider)
                assert (comp.minimum, comp.maximum) == (f.metadata.get("board_min", f.metadata["min"]),
                                                        f.metadata["max"])
            elif kind == "number":
                assert isinstance(comp, gr.Number), key
                optional = widgets.default_value(key) is None
                low = f.metadata.get("board_min", f.metadata.get("min"))  # cutoff_len: the box starts at 8, a
                # config may go down to 1 (LLaMA-Factory has no bound)
                assert comp.minimum == (min(0, low) if optional and low is not None else low), key
                assert comp.maximum == f.metadata.get("max")
            elif kind == "text":
                default = widgets.default_value(key)
                assert not isinstance(default, (int, float)) or isinstance(default, bool), key


def test_out_of_range_numbers_reach_the_check_that_names_them(board):
    """Typed out-of-range numbers (cutoff 0, epochs -3, batch size 1e11) used to be refused by gradio before any
    handler ran, with one English toast naming no field ("Value 0 is less than minimum value 8."), even on a
    Chinese page; they now reach Start, whose message names every key out of range at once."""
    with gr.Blocks():
        box = widgets.make_widget("cutoff_len")
        ints = widgets.make_widget("per_device_train_batch_size")
    assert box.get_block_name() == "number" and box.minimum == 8  # drawn as gradio's, its bounds for the arrows
    assert box.preprocess(0) == 0 and ints.preprocess(1e11) == 100_000_000_000 and box.preprocess(None) is None
    assert isinstance(box.preprocess(12.6), int)  # still rounded to the box's precision
    mapping = dict(model_name_or_path="demo", stage="sft", dataset="demo_identity", template="chatml",
                   dataset_dir=str(Path(__file__).resolve().parents[2] / "examples" / "data"),
                   cutoff_len=box.preprocess(0), num_train_epochs=-3.0,
                   per_device_train_batch_size=ints.preprocess(1e11))
    message, run_id = train.start_run(board, mapping, None, "zh")
    assert run_id is None
    assert message.startswith("运行未开始")
    for key in ("cutoff_len: 0", "num_train_epochs: -3.0", "per_device_train_batch_size: 100000000000"):
        assert key in message, message


def test_widget_value_round_trip():
    assert widgets.from_widget("quantization_bit", "none") is None
    assert widgets.to_widget("quantization_bit", 4) == "4"
    assert widgets.from_widget("packing", "auto") is None and widgets.from_widget("packing", "true") is True
    assert widgets.from_widget("lora_alpha", None) is None
    assert widgets.from_widget("max_samples", 0) is None and widgets.to_widget("max_samples", None) == 0
    assert widgets.from_widget("max_samples", 100.0) == 100
    assert widgets.from_widget("per_device_train_batch_size", 8.0) == 8
    assert type(widgets.from_widget("val_size", 1.0)) is int and widgets.from_widget("val_size", 0.1) == 0.1  # 1 row
    assert widgets.from_widget("adapter_name_or_path", "  ") is None
    assert widgets.from_widget("lora_target", " all ") == "all"
    assert widgets.fill(["lora_rank", "bf16"], {"lora_rank": 32}) == [32, False]


def test_train_form_to_mapping():
    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    assert mapping["model_name_or_path"] == "demo" and mapping["template"] == "chatml"
    assert mapping["dataset"] == "demo_identity,demo_alpaca" and mapping["eval_dataset"] is None
    assert mapping["per_device_train_batch_size"] == 8 and isinstance(mapping["per_device_train_batch_size"], int)
    assert mapping["packing"] is None and mapping["quantization_bit"] is None
    assert "pref_beta" not in mapping  # preference settings only for dpo/kto
    assert "freeze_trainable_layers" not in mapping  # freeze settings only for freeze
    freeze = train.mapping_of(TRAIN_KEYS, train_values(ft="freeze", stage="dpo"))
    assert "lora_rank" not in freeze and freeze["freeze_trainable_layers"] == 2 and freeze["pref_beta"] == 0.2


def test_relative_dataset_dir_becomes_absolute(tmp_path, monkeypatch):
    monkeypatch.chdir(DEMO_DATA.parent)
    mapping = train.mapping_of(TRAIN_KEYS, train_values(dataset_dir="data"))
    assert mapping["dataset_dir"] == str(DEMO_DATA)


def test_typed_model_paths_keep_their_slashes(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "models" / "m").mkdir(parents=True)
    monkeypatch.setenv("HOME", str(tmp_path))

    def model(text):
        return forms.absolute_paths(forms.model_mapping(forms.TopValues.of(text, "lora", "", "")))["model_name_or_path"]

    assert model("https://x") == "https://x"  # a URL stays a URL (the engine then says it is not a model)
    assert model("https://huggingface.co/Qwen/Qwen3-0.6B") == "https://huggingface.co/Qwen/Qwen3-0.6B"
    assert model(f"{tmp_path}//models//m") == f"{tmp_path}//models//m"  # as typed, not collapsed
    assert model("~//models/m") == f"{tmp_path}//models/m"
    assert model("models/m") == str(tmp_path / "models" / "m")  # a relative folder still becomes absolute
    assert model("Qwen/Qwen3-0.6B") == "Qwen/Qwen3-0.6B"


def test_checkpoint_picker_resolves_adapter_or_full_model(tmp_path):
    adapter = tmp_path / "a"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    full = tmp_path / "f"
    full.mkdir()
    (full / "config.json").write_text("{}")
    top = forms.TopValues.of("demo", "lora", str(adapter), "chatml")
    assert forms.model_mapping(top)["adapter_name_or_path"] == str(adapter)
    top = forms.TopValues.of("demo", "full", str(full), "")
    mapping = forms.model_mapping(top)
    assert mapping["model_name_or_path"] == str(full) and mapping["adapter_name_or_path"] is None
    assert mapping["template"] is None
    assert forms.model_mapping(top, with_adapter=False)["model_name_or_path"] == "demo"


def test_preview_shows_the_exact_yaml_and_command(board):
    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    command, text, pending = train.preview_command(board, mapping, "", "en")
    run_dir = board.jobs.runs_dir / pending
    assert command == f"lf-engine train - <<'LF_CONFIG'\n{text.rstrip()}\nLF_CONFIG"  # works before the folder exists
    cfg = yaml.safe_load(text)
    assert cfg["output_dir"] == str(run_dir) and cfg["learning_rate"] == 2e-3 and cfg["lora_rank"] == 16
    # Start writes exactly the previewed file into the previewed folder
    message, run_id = train.start_run(board, mapping, pending, "en")
    assert run_id == pending and run_id in message
    assert (run_dir / "config.yaml").read_text() == text
    assert board.jobs.wait(run_id, 30) == "completed"
    assert yaml.safe_load((board.workspace.configs_dir / f"{LAST_CONFIG}.yaml").read_text())["lora_rank"] == 16
    assert board.workspace.startup_settings()["dataset"] == "demo_identity,demo_alpaca"


def test_invalid_form_lists_every_problem(board):
    mapping = train.mapping_of(TRAIN_KEYS, train_values(cutoff_len=0, learning_rate=5.0))
    message, run_id = train.start_run(board, mapping, "", "en")
    assert run_id is None
    assert "cutoff_len: 0" in message and "learning_rate: 5.0" in message
    missing = train.mapping_of(TRAIN_KEYS, train_values(dataset=["no_such_set"]))
    message, run_id = train.start_run(board, missing, "", "en")
    assert run_id is None and "no_such_set" in message  # the engine's pre-flight check
    _, text, _ = train.preview_command(board, mapping, "", "zh")
    assert text.startswith("# 该配置暂时无法运行") and "cutoff_len" in text
    assert board.jobs.list() == []


def test_a_trained_run_in_the_boards_saves_run_does_not_refuse_start(board, tmp_path, monkeypatch):
    """The form has no output_dir, and a run writes to its own folder under runs/; the engine's default output_dir
    (saves/run, in the folder the board was started in) was checked instead: a trained run there, e.g. from
    `lf-engine train` of a config without output_dir, refused the preview and Start with "output_dir `saves/run`
    already holds a trained run ... Choose a new output_dir", a key the form does not have."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saves" / "run").mkdir(parents=True)
    (tmp_path / "saves" / "run" / "adapter_config.json").write_text("{}", encoding="utf-8")
    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    _, text, pending = train.preview_command(board, mapping, "", "en")
    assert yaml.safe_load(text)["output_dir"] == str(board.jobs.runs_dir / pending)
    message, run_id = train.start_run(board, mapping, "", "en")
    assert run_id, message
    assert board.jobs.wait(run_id, 30) == "completed"


def test_fresh_workspace_preselects_the_demo(workspace):
    settings = workspace.startup_settings()
    assert settings["model_name_or_path"] == "demo"
    assert settings["dataset"] == "demo_identity,demo_alpaca"
    assert Path(settings["dataset_dir"]) == DEMO_DATA
    assert workspace.is_fresh()


def test_queued_message_and_abort(board):
    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    first = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05})
    board.jobs.wait(first, 60, ("running",))
    message, run_id = train.start_run(board, mapping, "", "en")
    assert "queued (position 1)" in message
    assert train.abort_run(board, run_id, "en").startswith(f"Run `{run_id}` was cancelled")
    assert "Stopping run" in train.abort_run(board, first, "en")
    assert board.jobs.wait(first, 60) == "aborted"
    assert train.abort_run(board, "", "zh") == "这里没有可中止的运行。"


def test_evaluate_predict_mapping_and_results(board):
    values = [
        "demo",
        "lora",
        "",
        "chatml",
        "predict",
        str(DEMO_DATA),
        ["demo_identity"],
        256,
        20,
        4,
        64,
        0.5,
        0.7,
        50,
        1.0,
        False,
    ]
    keys = ["cutoff_len", "max_samples", "per_device_eval_batch_size", *forms.GENERATION_KEYS]
    message, run_id = evaluate.start_eval(board, values, keys, "en")
    assert run_id and run_id.split("-")[2] == "predict", message
    cfg = yaml.safe_load((board.jobs.runs_dir / run_id / "config.yaml").read_text())
    assert cfg["do_predict"] and cfg["predict_with_generate"] and cfg["eval_dataset"] == "demo_identity"
    assert cfg["do_train"] is False and cfg["max_new_tokens"] == 64
    assert board.jobs.wait(run_id, 30) == "completed"
    folder = board.jobs.runs_dir / run_id
    (folder / "generated_predictions.jsonl").write_text(
        json.dumps({"prompt": "p", "label": "l", "predict": "x"}) + "\n"
    )
    (folder / "predict_results.json").write_text(json.dumps({"predict_bleu-4": 12.5, "predict_rouge-l": 30.0}))
    assert evaluate.read_predictions(folder) == [["p", "l", "x"]]
    assert ["predict_bleu-4", 12.5] in evaluate.read_metrics(folder, {})
    no_data = values[:6] + [[]] + values[7:]
    assert evaluate.start_eval(board, no_data, keys, "en")[1] is None


def test_a_file_at_the_boards_saves_run_does_not_refuse_an_evaluation(board, tmp_path, monkeypatch):
    """Evaluate, as Start: the form has no output_dir and the run writes to its own folder, but the engine's default
    (saves/run in the board's folder) was checked: a file there refused the evaluation ("`output_dir: saves/run` is
    a file"), as would a board started in a folder it cannot write to."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "saves").mkdir()
    (tmp_path / "saves" / "run").write_text("not a folder", encoding="utf-8")
    values = ["demo", "lora", "", "chatml", "eval", str(DEMO_DATA), ["demo_identity"], 256, 20, 4]
    message, run_id = evaluate.start_eval(board, values, ["cutoff_len", "max_samples", "per_device_eval_batch_size"],
                                          "en")
    assert run_id, message
    assert board.jobs.wait(run_id, 30) == "completed"


def test_export_needs_a_checkpoint_and_writes_inside_the_workspace(board, tmp_path):
    keys = list(forms.EXPORT_KEYS)
    message, run_id = export.start_export(
        board, ["demo", "lora", "", "chatml", "", 1, "cpu", "auto", False], keys, "en"
    )
    assert run_id is None and "adapter or checkpoint" in message
    adapter = tmp_path / "ckpt"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(2, 2)}, str(adapter / "adapter_model.safetensors"))  # whole: torn ones are refused
    message, run_id = export.start_export(
        board, ["demo", "lora", str(adapter), "chatml", "", 1, "cpu", "auto", False], keys, "en"
    )
    assert run_id, message
    cfg = yaml.safe_load((board.jobs.runs_dir / run_id / "config.yaml").read_text())
    assert board.workspace.contains(cfg["export_dir"]) and cfg["adapter_name_or_path"] == str(adapter)
    assert board.jobs.folder(run_id).info()["command"][-2] == "export"


def test_chat_servers_start_and_unload(board):
    top = forms.TopValues.of("demo", "lora", "", "chatml")
    servers, problems = chat.start_servers(board, top, {"temperature": 0.5}, compare=False)
    assert problems == [] and set(servers) == {"main"}
    info = board.jobs.folder(servers["main"]).info()
    assert info["kind"] == "chat" and info["command"][-6:] == [
        "--host", "127.0.0.1", "--port", "0", "--board-lock", str(board.workspace.lock_path)]
    deadline = time.time() + 60
    while not chat.live_servers(board, servers).get("main", {}).get("ready"):
        assert time.time() < deadline
        time.sleep(0.05)
    assert chat.unload(board, servers) == [servers["main"]]
    convo = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": None, "tool_calls": [{"function": {"name": "add", "arguments": '{"a": 1}'}}]},
        {"role": "tool", "content": "2"},
    ]
    shown = chat.to_chatbot(convo, "en")
    assert shown[1]["metadata"]["title"] == "Tool call" and "add(" in shown[1]["content"]
    assert shown[2]["metadata"]["title"] == "Tool result"
    assert chat.openai_messages(convo, "be brief")[0] == {"role": "system", "content": "be brief"}


def test_upload_registers_into_the_workspace(board, tmp_path):
    data = tmp_path / "mine.json"
    data.write_text(json.dumps([{"instruction": "hi", "input": "", "output": "hello"}]))
    message, name = train.upload_dataset(board, str(data), "my_set", "en")
    assert name == "my_set", message
    info = json.loads((board.workspace.datasets_dir / "dataset_info.json").read_text())
    assert info["my_set"]["file_name"] == "my_set.json"
    choices, _ = train.dataset_choices(str(board.workspace.datasets_dir))
    assert ("my_set · sft", "my_set") in choices
    assert "`my_set` (sft) registered" in message.replace("Dataset ", "")
    assert train.upload_dataset(board, str(data), "../bad", "en")[1] is None


def test_a_refused_upload_leaves_the_data_preview_alone(board, tmp_path):
    """After Register dataset the preview follows the new dataset; when the file is refused (bad JSON) nothing was
    registered, and the preview must not be redrawn for the datasets still selected (it showed the demo data's 125
    rows under the error, as if they were the uploaded file's)."""
    from app.ui import build_ui

    demo = build_ui(board)
    button = next(b for b in demo.blocks.values() if "\"train_upload_btn\"" in str(getattr(b, "value", "")))
    chain = [next(f for f in demo.fns.values() if (button._id, "click") in f.targets)]
    while nxt := [f for f in demo.fns.values() if f.trigger_after == chain[-1]._id]:
        chain.append(nxt[0])
    upload, preview = chain[0], chain[-1]
    broken = tmp_path / "broken.json"
    broken.write_text('[{"instruction": "hi" "output": }]')
    values = {upload.inputs[0]: str(broken), upload.inputs[1]: "", upload.inputs[-1]: "en"}  # lang comes last
    out = upload.fn(*[values.get(b) for b in upload.inputs])
    assert "not valid JSON" in out[0]["value"]
    registered = out[upload.outputs.index(preview.inputs[0])]
    shown = preview.fn(registered, *[None] * (len(preview.inputs) - 1))
    assert all(isinstance(v, type(gr.skip())) for v in shown), shown


def test_the_data_preview_follows_a_switch_of_the_page_language(board):
    """The preview's summary ("125 rows; 0 of them ..."), its legend ("trained tokens") and the chart's axes were
    composed once, in the language of the click: after a switch to Chinese they stayed English (and the reverse).
    The page now keeps what the preview found and shows it again in the new language."""
    from app.ui import build_ui

    demo = build_ui(board)
    button = next(b for b in demo.blocks.values() if "\"train_preview_btn\"" in str(getattr(b, "value", "")))
    click = next(f for f in demo.fns.values() if (button._id, "click") in f.targets)
    lang = next(b for b in demo.blocks.values() if getattr(b, "elem_id", None) == "lf-lang-code")
    previewed = click.outputs[:3]
    follow = [f for f in demo.fns.values() if (lang._id, "change") in f.targets and f.outputs == previewed]
    assert len(follow) == 1, "no handler shows the preview again when the page's language changes"
    kept = click.outputs[3]  # what the click found, in no language
    assert follow[0].inputs == [kept, lang]
    made = train_data.preview_made(board, {"dataset": ["demo_identity"], "dataset_dir": str(DEMO_DATA),
                                           "model_name_or_path": "demo", "template": "chatml", "cutoff_len": 256,
                                           "stage": "sft", "finetuning_type": "lora"})
    assert "result" in made, made
    rows = len(dataset_preview.lengths_of(made["result"]))
    for code, summary, legend, axis in (("zh", f"共 {rows} 行", "参与训练的 token", "行数"),
                                        ("en", f"{rows} rows;", "trained tokens", "rows"),
                                        ("zh", f"共 {rows} 行", "参与训练的 token", "行数")):
        text, html_rows, chart = follow[0].fn(made, code)
        assert text.startswith(summary), text
        assert legend in html_rows and (code == "zh") == ("trained tokens" not in html_rows), html_rows[:300]
        assert chart["y_title"] == train_data.t(code, "axis_rows") and axis in chart["y_title"]
    assert all(isinstance(v, type(gr.skip())) for v in follow[0].fn(None, "zh"))  # no preview yet: nothing to redo
    failed = {"key": "preview_failed", "error": "`x.json` is not valid JSON"}
    assert follow[0].fn(failed, "zh")[0] == "预览失败：`x.json` is not valid JSON"


def test_an_upload_never_replaces_or_removes_a_file_it_did_not_write(board, tmp_path):
    """A reused name or a file called dataset_info.json is refused before anything is copied: the dataset already
    there and the workspace's registry stay as they were (they used to be overwritten, then deleted)."""
    folder = board.workspace.datasets_dir
    good = tmp_path / "good.json"
    good.write_text(json.dumps([{"instruction": "hi", "input": "", "output": "hello"}]))
    assert train.upload_dataset(board, str(good), "mydata", "en")[1] == "mydata"
    registry, kept = (folder / "dataset_info.json").read_bytes(), (folder / "mydata.json").read_bytes()
    other = tmp_path / "other.json"
    other.write_text(json.dumps([{"instruction": "x", "input": "", "output": "y"}]))
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    lf_registry = tmp_path / "dataset_info.json"
    lf_registry.write_text(json.dumps({"alpaca": {"file_name": "alpaca.json"}}))
    for upload, name in ((other, "mydata"), (broken, "mydata"), (other.with_suffix(".jsonl"), "mydata"),
                         (lf_registry, ""), (lf_registry, "dataset_info")):
        if not upload.exists():
            upload.write_text(json.dumps({"instruction": "x", "input": "", "output": "y"}) + "\n")
        message, got = train.upload_dataset(board, str(upload), name, "en")
        assert got is None and "pick another name (nothing was changed)" in message, message
        assert (folder / "dataset_info.json").read_bytes() == registry
        assert (folder / "mydata.json").read_bytes() == kept
    assert sorted(p.name for p in folder.iterdir()) == ["dataset_info.json", "mydata.json"]
    # a file that cannot be registered is removed again: the one this upload wrote, nothing else
    message, got = train.upload_dataset(board, str(broken), "fresh", "en")
    assert got is None and "could not be registered" in message
    assert sorted(p.name for p in folder.iterdir()) == ["dataset_info.json", "mydata.json"]
    zh, _ = train.upload_dataset(board, str(other), "mydata", "zh")
    assert "请换一个名称" in zh
    _, note = catalog.datasets(folder / "mydata.json")  # a file given as the folder
    assert note and "is a file, not a folder" in note


def test_llamafactorys_hub_dataset_dirs_in_the_board(monkeypatch, tmp_path):
    """`dataset_dir: ONLINE` explains that names are typed; `REMOTE:owner/repo` lists that repository's registry, or
    says why it cannot (here: offline, not cached)."""
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr("huggingface_hub.constants.HF_HUB_OFFLINE", True)
    found, note = catalog.datasets("ONLINE")
    assert found == {} and "type its name" in note
    found, note = catalog.datasets("REMOTE:nobody/nothing")
    assert found == {} and "cannot be fetched" in note
    # a folder name too long for the system, and a folder without dataset_info.json, each get a note
    assert "cannot be read" in catalog.datasets("/tmp/" + "b" * 5000)[1]
    assert "has no dataset_info.json" in catalog.datasets(tmp_path)[1]
    # one that is a pipe (or a folder) is named as such, and never opened (a pipe would block the page)
    piped = tmp_path / "piped"
    piped.mkdir()
    os.mkfifo(piped / "dataset_info.json")
    assert "is not a regular file" in catalog.datasets(piped)[1]
    assert "不是普通文件" in catalog.datasets(piped, "zh")[1]
    # switching to ONLINE keeps typed hub names, not the local names of the folder left behind
    assert catalog.kept_datasets("ONLINE", [], ["demo_alpaca", "llamafactory/alpaca_en"]) == ["llamafactory/alpaca_en"]
    assert catalog.kept_datasets("/data", [("a", "a")], ["a", "b"]) == ["a"]


def test_history_diff_overlay_and_delete(board):
    a = board.jobs.submit("train", {"fake_steps": 3, "learning_rate": 0.1, "stage": "sft"})
    b = board.jobs.submit("train", {"fake_steps": 4, "learning_rate": 0.2, "stage": "sft"})
    assert board.jobs.wait(b, 30) == "completed" and board.jobs.wait(a, 30) == "completed"
    frame, ids = runs.table_frame(board, "en")
    assert set(ids) == {a, b} and list(frame.columns)[0] == "run" and "completed" in set(frame["status"])
    overlay = runs.overlay_frame(board, [a, b])
    assert len(overlay) == 7 and set(overlay["run"]) == {a, b}
    diff = runs.diff_frame(board, [a, b], "en")
    keys = list(diff.iloc[:, 0])
    assert "learning_rate" in keys and "stage" not in keys and "output_dir" not in keys
    assert runs.delete_runs(board, [a], "en") == "Deleted 1 run."  # it read "1 run(s)"
    assert not (board.jobs.runs_dir / a).exists()


def test_history_compare_leaves_out_keys_a_run_kind_never_reads(board):
    """The engine writes each run's config complete (defaults included): a predict run's lora_rank 8 and learning
    rate 5e-05 were listed against a training run's although it trains nothing."""
    import yaml

    from app.config_compare import config_diff
    from engine.config.loader import RunConfig

    def complete(run_id, **keys):  # the config.yaml the engine leaves in a run folder: every key
        cfg = RunConfig().to_dict() | keys | {"output_dir": str(board.jobs.runs_dir / run_id)}
        (board.jobs.runs_dir / run_id / "config.yaml").write_text(yaml.safe_dump(cfg), encoding="utf-8")

    train = board.jobs.submit("train", {"fake_steps": 1, "stage": "sft"})
    predict = board.jobs.submit("predict", {"fake_steps": 1, "stage": "sft"})
    assert board.jobs.wait(train, 30) == "completed" and board.jobs.wait(predict, 30) == "completed"
    complete(train, lora_rank=16, learning_rate=1e-4, per_device_eval_batch_size=2, cutoff_len=512)
    complete(predict, do_train=False, do_predict=True, predict_with_generate=True, temperature=0.5, cutoff_len=256)
    diff = runs.diff_frame(board, [train, predict], "en")
    rows = {row[0]: list(row[1:]) for row in diff.itertuples(index=False)}
    # keys both kinds read are compared as before; defaults of keys one kind never reads are left out
    assert rows["cutoff_len"] == ["512", "256"] and rows["per_device_eval_batch_size"] == ["2", "8"]
    assert rows["do_predict"] == ["False", "True"]
    assert "num_train_epochs" not in rows and "lora_alpha" not in rows and "top_p" not in rows
    # a key one run set but the other's kind never reads is listed, with that run's cell saying so
    assert rows["lora_rank"] == ["16", "— not used by predict runs"]
    assert rows["learning_rate"] == ["0.0001", "— not used by predict runs"]
    assert rows["temperature"] == ["— not used by train runs", "0.5"]
    zh = runs.diff_frame(board, [train, predict], "zh")
    assert list(zh[zh.iloc[:, 0] == "lora_rank"].iloc[0])[1:] == ["16", "—（预测任务不使用此项）"]
    # between two training runs every key counts, defaults included, as before
    assert config_diff({"a": {"lora_rank": 8}, "b": {"lora_rank": 16}}, {"a": "train", "b": "train"}) == [
        ["lora_rank", "8", "16"]]


def test_history_says_why_a_run_failed(board):
    ok = board.jobs.submit("train", {"fake_steps": 2, "stage": "sft"})
    bad = board.jobs.submit("train", {"fake_steps": 1, "fake_fail": True, "stage": "sft"})
    silent = board.jobs.submit("train", {"fake_steps": 1, "fake_silent_exit": True, "stage": "sft"})
    for run_id in (ok, bad, silent):
        board.jobs.wait(run_id, 30)
    frame, ids = runs.table_frame(board, "zh")
    assert list(frame.columns)[-1] == "原因"
    assert set(frame["类型"]) == {"训练"}  # the kind reads in the page's language too
    reasons = dict(zip(ids, frame.iloc[:, -1]))
    assert reasons[ok] == ""
    # the engine's words, headed by their kind in the page's language (this fake engine records no code)
    assert reasons[bad] == "【引擎提示】ValueError: the fake engine was told to fail"
    # an error quoting the end of the run's log: its first line (the board's own words: in the page's language) and
    # the log's last line, on one line
    assert reasons[silent].startswith("【进程异常退出】进程以退出码 3 结束。")
    assert reasons[silent].endswith("… something went badly wrong") and "\n" not in reasons[silent]


def test_history_says_an_aborted_run_was_stopped(board):
    """The engine records no error for a run stopped with Abort: its reason was empty, as for a completed run."""
    run_id = board.jobs.submit("train", {"fake_steps": 400, "fake_sleep": 0.05, "stage": "sft"})
    board.jobs.wait(run_id, 30, statuses=("running",))
    board.jobs.abort(run_id)
    assert board.jobs.wait(run_id, 30) == "aborted"
    board.jobs.folder(run_id).update(error=None)  # as the engine writes it (the fake engine writes one)
    for lang, words in (("en", "stopped on request"), ("zh", "已按要求停止")):
        frame, ids = runs.table_frame(board, lang)
        assert frame.iloc[ids.index(run_id), -1] == words


def test_history_reason_is_one_bounded_line():
    from app.history import REASON_CHARS, reason

    assert reason({"status": "completed", "error": "x"}) == ""
    assert reason({"status": "failed", "error": None}) == ""
    assert reason({"status": "aborted", "error": "stopped by request"}) == "stopped by request"
    long = reason({"status": "failed", "error": "E" * 1000 + "\nlast"})
    assert len(long) == REASON_CHARS and long.endswith("…")


def test_a_dataset_info_with_a_name_written_twice_gets_a_note_in_the_board(tmp_path):
    """The engine warns in its log only; the board's dataset picker says it too (found by an outside test), and an
    upload into that folder is refused rather than rewriting the file without the earlier entry."""
    (tmp_path / "rows.json").write_text(json.dumps([{"instruction": "x", "input": "", "output": "y"}]))
    (tmp_path / "dataset_info.json").write_text('{"mine": {"file_name": "rows.json", "formatting": "sharegpt"},\n'
                                                ' "mine": {"file_name": "rows.json"}}')
    found, note = catalog.datasets(tmp_path)
    assert list(found) == ["mine"] and found["mine"]["formatting"] == "alpaca"  # the last entry, as LLaMA-Factory
    assert note and "`mine` written more than once" in note and "Remove or rename the duplicates" in note
    assert catalog.datasets(DEMO_DATA)[1] is None


def test_the_history_table_scrolls_sideways_in_a_narrow_window():
    """The History table's columns have widths in pixels, about a wide window's width in all: shares of the window
    left 30 px for `queue` and 37 px for `kind` in an 800 px window, and gradio broke headers and values letter by
    letter ("q/u/e/u/e", "0:1/0", "0.6/694"); in pixels a narrow window scrolls the table instead."""
    widths = [runs.WIDTHS[c] for c in runs.COLUMNS]
    assert all(w.endswith("px") for w in widths), widths
    total = sum(int(w[:-2]) for w in widths)
    assert 1200 <= total <= 1340, total  # the whole table in a 1400 px window
    assert all(int(runs.WIDTHS[c][:-2]) >= 60 for c in runs.COLUMNS)


def test_generation_settings_show_only_for_predict(board):
    """Eval (loss, perplexity) generates nothing, yet the Evaluate tab showed its generation settings (max new
    tokens, temperature, top-p, ...) in that mode too, as if they changed the result."""
    from app.ui import build_ui

    demo = build_ui(board)
    mode = next(b for b in demo.blocks.values() if isinstance(b, gr.Radio) and '"eval_mode"' in str(b.label))
    fns = [f for f in demo.fns.values() if (mode._id, "change") in f.targets]
    accordions = [o for f in fns for o in f.outputs if isinstance(o, gr.Accordion)]
    assert len(accordions) == 1 and '"eval_generation"' in str(accordions[0].label)
    fn = next(f for f in fns if accordions[0] in f.outputs)
    assert fn.fn("eval")["visible"] is False and fn.fn("predict")["visible"] is True


def test_a_file_named_in_chinese_asks_for_a_typed_dataset_name(board, tmp_path):
    data = tmp_path / "客服 数据.json"
    data.write_text(json.dumps([{"instruction": "hi", "input": "", "output": "hello"}]))
    message, name = train.upload_dataset(board, str(data), "", "zh")
    assert name is None and "`客服 数据`" in message and "数据集名称" in message and "my_data" in message
    message, name = train.upload_dataset(board, str(data), "kefu", "zh")
    assert name == "kefu", message


def test_saving_a_config_says_when_it_replaces_one_and_keeps_off_the_last_used_name(board):
    from app.ui import build_ui

    demo = build_ui(board)
    block_fn = next(f for f in demo.fns.values() if "on_save" in getattr(f.fn, "__qualname__", ""))
    values = [block.value for block in block_fn.inputs[1:-1]]
    first, _ = block_fn.fn("mine", *values, "en")
    again, _ = block_fn.fn("mine", *values, "en")
    assert "replacing" not in first and "replacing the one saved there before" in again
    reserved, update = block_fn.fn("last-used", *values, "zh")
    assert "last-used" in reserved and "请换一个名称" in reserved and not board.workspace.config_path("last-used").exists()


def test_a_config_name_is_trimmed_and_may_end_in_its_extension(board):
    from app.ui import build_ui

    demo = build_ui(board)
    block_fn = next(f for f in demo.fns.values() if "on_save" in getattr(f.fn, "__qualname__", ""))
    values = [block.value for block in block_fn.inputs[1:-1]]
    configs = board.workspace.configs_dir
    for typed in ("x.yaml", "  y  ", " z.YML ", "w.yml"):
        message, update = block_fn.fn(typed, *values, "en")
        assert "Config saved to" in message, message
        assert update["value"] == typed.strip().rsplit(".", 1)[0] if "." in typed else typed.strip()
    assert sorted(p.name for p in configs.glob("*.y*ml") if p.stem != "last-used") == \
        ["w.yaml", "x.yaml", "y.yaml", "z.yaml"]
    refused, _ = block_fn.fn(" last-used.yaml ", *values, "zh")
    assert "请换一个名称" in refused
    refused, _ = block_fn.fn(".yaml", *values, "en")  # the extension alone names nothing
    assert "not a usable config name" in refused


def test_an_empty_data_file_is_named_as_empty_not_as_an_unknown_layout(board, tmp_path):
    for file_name, text in (("blank.json", ""), ("spaces.jsonl", " \n\n"), ("none.json", "[]")):
        data = tmp_path / file_name
        data.write_text(text)
        for lang, words in (("en", "is empty"), ("zh", "是空文件")):
            message, name = train.upload_dataset(board, str(data), "", lang)
            assert name is None and f"`{file_name}`" in message and words in message, message
            assert "layout" not in message and "格式" not in message
    assert not list(board.workspace.datasets_dir.glob("blank*"))  # nothing was copied or registered


def test_the_dataset_folder_notes_come_in_the_pages_language(board, tmp_path):
    """The notes under the dataset folder are locale text (framed by a translated heading), not English inside it."""
    from app.ui import build_ui

    (tmp_path / "a.json").write_text("[]")
    han = re.compile(r"[\u4e00-\u9fff]")
    folders = {"ONLINE": "Hub", "/tmp/" + "b" * 5000: "无法读取", str(tmp_path / "a.json"): "是文件而不是文件夹",
               str(tmp_path / "nope"): "不存在", str(tmp_path): "没有 dataset_info.json"}
    for folder, words in folders.items():
        zh, en = catalog.datasets(folder, "zh")[1], catalog.datasets(folder, "en")[1]
        assert words in zh and han.search(zh) and not han.search(en), (zh, en)
    demo = build_ui(board)
    block_fn = next(f for f in demo.fns.values() if "on_dataset_dir" in getattr(f.fn, "__qualname__", ""))
    *_, note = block_fn.fn(str(tmp_path / "nope"), [], [], None, "zh")  # folder, picks, what an upload said, lang
    assert "不存在" in note["value"] and "does not exist" not in note["value"]


def test_a_double_click_on_start_starts_one_run(board):
    """Both clicks send the page's one pending run id, side by side (Start's handlers run concurrently): the
    second used to claim a fresh folder and queue the same run again. Now it says the run was already started and
    follows it; a later Start (the page's next pending id) starts another run."""
    import threading

    mapping = train.mapping_of(TRAIN_KEYS, train_values())
    _, _, pending = train.preview_command(board, mapping, "", "zh")
    answers: list[tuple[str, str | None]] = []
    both = threading.Barrier(2)

    def click():
        both.wait()
        answers.append(train.start_run(board, mapping, pending, "zh"))

    clicks = [threading.Thread(target=click) for _ in range(2)]
    for thread in clicks:
        thread.start()
    for thread in clicks:
        thread.join()
    assert [run_id for _, run_id in answers] == [pending, pending]
    assert sorted(p.name for p in board.jobs.runs_dir.iterdir()) == [pending]
    assert any("已由此表单开始" in message for message, _ in answers)
    assert board.jobs.wait(pending, 30) == "completed"
    # run.json says completed a moment before the process has exited and given the device back: a Start in that
    # moment queues (position 1) and starts at the next tick, which is right (a GPU's memory is still held then)
    deadline = time.time() + 30
    while board.jobs.busy() and time.time() < deadline:
        time.sleep(0.1)
    message, again = train.start_run(board, mapping, board.jobs.new_run_id("train"), "en")
    assert again not in (None, pending) and "started" in message
    assert board.jobs.wait(again, 30) == "completed"


def test_the_evaluate_picker_lists_the_datasets_registered_since_the_board_started(board, tmp_path):
    """Evaluate's dataset list was read as the board started: a reloaded page, or the tab opened after an upload on
    Train, did not offer the new dataset. It is read again as a page loads and as the tab opens."""
    from app.ui import build_ui

    demo = build_ui(board)
    (refresh,) = [f for f in demo.fns.values() if getattr(f.fn, "__name__", "") == "on_refresh"
                  and f.fn.__module__ == "app.tabs.evaluate"]
    assert {t[1] for t in refresh.targets} == {"load", "select"}
    data = tmp_path / "mine.json"
    data.write_text(json.dumps([{"instruction": "hi", "input": "", "output": "hello"}]))
    assert train.upload_dataset(board, str(data), "my_set", "en")[1] == "my_set"
    folder = str(board.workspace.datasets_dir)
    update = refresh.fn(folder, ["gone"])
    assert ("my_set · sft", "my_set") in update["choices"] and update["value"] == []  # a pick that went away
    update = refresh.fn(folder, ["my_set"])
    assert ("my_set · sft", "my_set") in update["choices"] and "value" not in update  # the pick left as it is
