"""User mistakes through the real CLI (`engine.cli.main`): one clear message naming the problem and the fix, exit
status 2, no Python traceback. Models are tiny Llamas (2 layers, hidden 32) built here; nothing is downloaded."""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.cli import EXIT_USER_ERROR, main
from engine.errors import ModelError, UserError

REPO = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("library_logs_to_caplog")
GOOD_ROWS = [{"instruction": f"Question {i}?", "input": "", "output": f"Answer number {i}."} for i in range(12)]


def _write_json(path: Path, data) -> None:
    path.write_text(json.dumps(data, indent=1), encoding="utf-8")


def _tiny_model(folder: Path, tokenizer, hidden: int) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=hidden, intermediate_size=2 * hidden,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=256, tie_word_embeddings=True,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def _fake_70b(folder: Path) -> Path:
    """config.json, tokenizer and a safetensors header (no tensor data) describing a 70B Llama."""
    folder.mkdir()
    _write_json(folder / "config.json", {"model_type": "llama", "architectures": ["LlamaForCausalLM"],
                                         "hidden_size": 8192, "num_hidden_layers": 80, "vocab_size": 128256})
    header, offset = {}, 0

    def tensor(name: str, *shape: int) -> None:
        nonlocal offset
        size = 2 * int(torch.tensor(shape).prod())
        header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [offset, offset + size]}
        offset += size

    tensor("model.embed_tokens.weight", 128256, 8192)
    tensor("lm_head.weight", 128256, 8192)
    for i in range(80):
        for proj, rows in (("q_proj", 8192), ("k_proj", 1024), ("v_proj", 1024), ("o_proj", 8192)):
            tensor(f"model.layers.{i}.self_attn.{proj}.weight", rows, 8192)
        tensor(f"model.layers.{i}.mlp.gate_proj.weight", 28672, 8192)
        tensor(f"model.layers.{i}.mlp.up_proj.weight", 28672, 8192)
        tensor(f"model.layers.{i}.mlp.down_proj.weight", 8192, 28672)
    raw = json.dumps(header).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(raw)) + raw)
    os.truncate(folder / "model.safetensors", 8 + len(raw) + offset)  # sparse: the tensor bytes take no disk
    (folder / "tokenizer.json").write_text("{}", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def ws(tmp_path_factory, tokenizer_factory):
    """A workspace: tiny models, an adapter, datasets (good and broken) and a base config."""
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    root = tmp_path_factory.mktemp("user-errors")
    tokenizer = tokenizer_factory()  # knows the ChatML markers, has no chat template of its own
    model = _tiny_model(root / "model", tokenizer, 32)
    _tiny_model(root / "model48", tokenizer, 48)
    _tiny_model(root / "plain", tokenizer_factory(markers=[]), 32)  # no template markers: templates add tokens
    lora = get_peft_model(AutoModelForCausalLM.from_pretrained(model), LoraConfig(r=4, target_modules=["q_proj"]))
    lora.save_pretrained(root / "adapter32")
    _fake_70b(root / "big70")

    data = root / "data"
    data.mkdir()
    _write_json(data / "good.json", GOOD_ROWS)
    some_bad = [dict(row) for row in GOOD_ROWS[:10]]
    some_bad[2] = {"instruction": ["a list"], "output": "x"}
    some_bad[5] = {"instruction": "no answer", "output": None}
    some_bad[7] = {"unrelated": "columns"}
    some_bad[8] = {"instruction": "\ud800 a lone surrogate, escaped in the file", "output": "x"}
    some_bad[9] = {"instruction": "an emoji as an escaped pair \ud83d\ude00", "output": "kept"}
    _write_json(data / "some_bad.json", some_bad)
    _write_json(data / "all_bad.json", [{"instruction": ["x"], "output": "y"}, {"instruction": {"a": 1}, "output": "z"}])
    (data / "broken.json").write_text('[\n {"instruction": "a", "output": "b"},\n {"instruction": "c" "output": "d"}\n]\n',
                                      encoding="utf-8")
    _write_json(data / "pairs.json", [{"instruction": f"Pick {i}", "output": [f"good {i}", f"bad {i}"]}
                                      for i in range(8)])
    _write_json(data / "dataset_info.json", {
        "good": {"file_name": "good.json"},
        "some_bad": {"file_name": "some_bad.json"},
        "all_bad": {"file_name": "all_bad.json"},
        "broken": {"file_name": "broken.json"},
        "pairs": {"file_name": "pairs.json", "ranking": True},
    })
    (root / "empty").mkdir()
    config = root / "sft.yaml"
    config.write_text(
        f"model_name_or_path: {model}\ntemplate: chatml\nstage: sft\ndo_train: true\nfinetuning_type: lora\n"
        f"lora_target: all\ndataset: good\ndataset_dir: {data}\ncutoff_len: 64\nmax_steps: 1\n"
        "per_device_train_batch_size: 2\nsave_strategy: 'no'\nreport_to: none\nplot_loss: false\n"
        f"output_dir: {root / 'out'}\noverwrite_output_dir: true\n", encoding="utf-8")
    return root


def cli(capsys, *argv: str) -> tuple[int, str]:
    """Run the CLI in-process; return (exit code, stderr). Fails on a traceback."""
    code = main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


def user_error(capsys, *argv: str, words: tuple[str, ...]) -> str:
    code, err = cli(capsys, *argv)
    assert code == EXIT_USER_ERROR, err
    message = err[err.index("error: "):]
    for word in words:
        assert word in message, f"{word!r} not in {message!r}"
    return message


def train(ws: Path, capsys, *overrides: str, words: tuple[str, ...]) -> str:
    return user_error(capsys, "train", str(ws / "sft.yaml"), *overrides, words=words)


# ------------------------------------------------------------------------------------------------ config keys
def test_typo_in_a_key_names_the_nearest_one(ws, capsys):
    train(ws, capsys, "lora_rnak=8", words=("Unknown key `lora_rnak`", "Did you mean `lora_rank`?"))


def test_an_override_with_no_key_says_so(ws, capsys):
    """`=3` on the command line was answered "Unknown key ``" (an empty name in backticks)."""
    message = train(ws, capsys, "=3", words=("Override `=3` must look like `key=value` (no key before `=`)",))
    assert "Unknown key" not in message


def test_an_empty_chat_query_is_named_before_the_model_loads(ws, capsys, monkeypatch):
    """`lf-engine chat CONFIG --query ''` (an unset shell variable) loaded the model and answered nothing asked."""
    import engine.infer.chat as chat

    monkeypatch.setattr(chat.ChatModel, "__init__", lambda *a, **k: pytest.fail("the model loaded"))
    user_error(capsys, "chat", str(ws / "sft.yaml"), "--query", "  ", words=("--query is empty", "--query 'Who are"))


def test_bad_choice_lists_the_valid_ones(ws, capsys):
    train(ws, capsys, "finetuning_type=lorra", words=("`finetuning_type: 'lorra'` is not a valid choice", "'full'",
                                                      "Did you mean 'lora'?"))


def test_text_where_a_number_goes(ws, capsys):
    train(ws, capsys, "learning_rate=fast", words=("`learning_rate: 'fast'` must be a number",))


def test_every_config_problem_is_reported_at_once(ws, capsys):
    message = train(ws, capsys, "lora_rnak=8", "learning_rate=fast", "dataset=nope",
                    words=("3 problems", "lora_rank", "must be a number", "Unknown dataset 'nope'"))
    assert message.count("\n  - ") == 3


def test_under_torchrun_a_configs_problems_are_printed_by_each_nodes_first_process(ws, capsys, monkeypatch):
    import time

    from engine import cli as cli_module

    monkeypatch.setattr(cli_module, "PEER_REPORT_WAIT", 0.5)
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.setenv("RANK", "0")
    train(ws, capsys, "lora_rnak=8", words=("Unknown key `lora_rnak`",))
    monkeypatch.setenv("RANK", "2")  # the second node's first process
    monkeypatch.setenv("LOCAL_RANK", "0")
    train(ws, capsys, "lora_rnak=8", words=("Unknown key `lora_rnak`",))
    monkeypatch.setenv("RANK", "1")  # waits for torchrun to end it; prints only if it is still running
    monkeypatch.setenv("LOCAL_RANK", "1")
    started = time.monotonic()
    code, err = cli(capsys, "train", str(ws / "sft.yaml"), "lora_rnak=8")
    assert code == EXIT_USER_ERROR and time.monotonic() - started >= 0.5
    assert err.startswith("error (rank 1): ") and "Unknown key `lora_rnak`" in err


def test_another_ranks_own_error_names_the_rank(capsys, monkeypatch):
    from engine import cli as cli_module

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    cli_module._print_error(UserError("its device is busy"))
    assert capsys.readouterr().err == "error (rank 1): its device is busy\n"


def test_cutoff_len_below_the_minimum(ws, capsys):
    train(ws, capsys, "cutoff_len=0", words=("`cutoff_len: 0` is below the minimum 1; raise it",))


def test_overrides_after_an_option_are_applied(ws, capsys):
    user_error(capsys, "check", str(ws / "sft.yaml"), "--for", "train", "lora_rnak=8", words=("lora_rank",))
    code, _ = cli(capsys, "check", str(ws / "sft.yaml"), "--for", "train", "lora_rank=4")
    assert code == 0


# ------------------------------------------------------------------------------------------------------ model
def test_missing_model_folder(ws, capsys):
    train(ws, capsys, f"model_name_or_path={ws / 'nowhere'}", words=("does not exist", "check the path"))


def test_folder_without_config_json(ws, capsys):
    train(ws, capsys, f"model_name_or_path={ws / 'empty'}", words=("has no config.json",))


@pytest.mark.parametrize("damage, words", [
    ("weights", ("holds config.json but no weights", "model.safetensors")),
    ("tokenizer", ("has no tokenizer files", "tokenizer.json")),
    ("config", ("config.json is not valid JSON", "line 1")),
])
def test_incomplete_model_folder(ws, capsys, tmp_path, damage, words):
    import shutil

    folder = Path(shutil.copytree(ws / "model", tmp_path / "model"))
    if damage == "weights":
        (folder / "model.safetensors").unlink()
    elif damage == "tokenizer":
        for name in ("tokenizer.json", "tokenizer_config.json"):
            (folder / name).unlink()
    else:
        (folder / "config.json").write_text('{"model_type": "llama",', encoding="utf-8")
    train(ws, capsys, f"model_name_or_path={folder}", words=words)


def test_hub_id_without_network(ws, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for command in ("train", "chat"):
        user_error(capsys, command, str(ws / "sft.yaml"), "model_name_or_path=no-such-org/no-such-model",
                   words=("not in the local cache", "hf download no-such-org/no-such-model", "model_name_or_path"))


def test_the_loader_reports_a_hub_model_it_cannot_get_as_a_user_error(monkeypatch):
    from engine.models import resolve_model_path

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelError, match="not found locally and no network") as info:
        resolve_model_path("no-such-org/no-such-model")
    assert isinstance(info.value, UserError) and isinstance(info.value, ValueError)


def test_a_hub_model_that_cannot_be_downloaded_leaves_the_earlier_run_in_output_dir(ws, capsys, monkeypatch, tmp_path):
    """No HF_HUB_OFFLINE and no hub probe, so the pre-flight check lets a hub id through and only the download finds
    out: that must happen before an earlier run in output_dir (overwrite_output_dir: true) is replaced."""
    import huggingface_hub

    def no_network(*args, **kwargs):
        raise OSError("no network")

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("LF_HUB_PROBE_TIMEOUT", "0")  # no reachability probe: the download itself is what fails here
    monkeypatch.setattr(huggingface_hub, "snapshot_download", no_network)
    out = tmp_path / "earlier"
    (out / "checkpoint-4").mkdir(parents=True)
    (out / "checkpoint-4" / "trainer_state.json").write_text("{}", encoding="utf-8")
    (out / "config.yaml").write_text("model_name_or_path: earlier\n", encoding="utf-8")
    (out / "events.jsonl").write_text('{"event": "end", "status": "completed"}\n', encoding="utf-8")
    (out / "run.json").write_text(json.dumps({"id": "earlier", "kind": "train", "status": "completed"}), encoding="utf-8")
    before = {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()}
    train(ws, capsys, "model_name_or_path=no-such-org/no-such-model", f"output_dir={out}",
          words=("no-such-org/no-such-model", "no network", "hf download"))
    assert (out / "checkpoint-4" / "trainer_state.json").is_file()
    assert {path.name: path.read_bytes() for path in out.iterdir() if path.is_file()} == before
    fresh = tmp_path / "fresh"  # nothing to lose there (a board's new run folder): the run records why it failed
    train(ws, capsys, "model_name_or_path=no-such-org/no-such-model", f"output_dir={fresh}", words=("no network",))
    info = json.loads((fresh / "run.json").read_text(encoding="utf-8"))
    assert info["status"] == "failed" and info["error"].startswith("Model `no-such-org/no-such-model`")


def test_model_far_too_large_for_the_memory(ws, capsys):
    for command, words in (("train", ("70.55 B parameters", "for lora training", "GiB in all", "a smaller model")),
                           ("chat", ("70.55 B parameters", "for inference", "GiB in all"))):
        user_error(capsys, command, str(ws / "sft.yaml"), f"model_name_or_path={ws / 'big70'}", words=words)
    message = train(ws, capsys, f"model_name_or_path={ws / 'big70'}", "finetuning_type=full",
                    words=("for full training", "`finetuning_type: lora`"))
    assert message.count("70.55 B") == 1


# ---------------------------------------------------------------------------------------------------- adapters
def test_missing_adapter_folder(ws, capsys):
    train(ws, capsys, f"adapter_name_or_path={ws / 'no-adapter'}", words=("`adapter_name_or_path:", "does not exist"))
    user_error(capsys, "chat", str(ws / "sft.yaml"), "adapter_name_or_path=saves/not-trained-yet",  # examples/chat_demo's case
               words=("saves/not-trained-yet` does not exist (looked for in", "run that training first"))
    train(ws, capsys, f"adapter_name_or_path={ws / 'empty'}", words=("has no adapter_config.json",))


def test_adapter_of_another_base_model(ws, capsys):
    message = user_error(capsys, "chat", str(ws / "sft.yaml"), f"model_name_or_path={ws / 'model48'}",
                         f"adapter_name_or_path={ws / 'adapter32'}", "--query", "hi",
                         words=("does not fit this model", "shape", "It was trained on", "model_name_or_path"))
    assert str(ws / "model") in message


def test_adapter_whose_template_added_tokens(ws, capsys, tmp_path):
    """Training with a template whose markers the tokenizer lacks adds tokens; chat and export must resize the same
    way, and a different template is refused with the one the adapter was trained with."""
    adapter = tmp_path / "adapter"
    code, err = cli(capsys, "train", str(ws / "sft.yaml"), f"model_name_or_path={ws / 'plain'}",
                    f"output_dir={adapter}")
    assert code == 0, err
    assert json.loads((adapter / "adapter_config.json").read_text())["trainable_token_indices"]
    base = ["--query", "hi", f"model_name_or_path={ws / 'plain'}", f"adapter_name_or_path={adapter}",
            "max_new_tokens=4"]
    code, err = cli(capsys, "chat", str(ws / "sft.yaml"), *base)
    assert code == 0, err
    code, err = cli(capsys, "export", str(ws / "sft.yaml"), f"model_name_or_path={ws / 'plain'}",
                    f"adapter_name_or_path={adapter}", f"export_dir={tmp_path / 'merged'}")
    assert code == 0, err
    user_error(capsys, "chat", str(ws / "sft.yaml"), *base, "template=default",
               words=("differs from training", "Use `template: chatml`"))


# ------------------------------------------------------------------------------------------------------- data
def test_missing_dataset_dir_is_named_once(ws, capsys):
    message = train(ws, capsys, "dataset=good,pairs", f"dataset_dir={ws / 'no-data'}",
                    words=("`dataset_dir:", "does not exist", "dataset_info.json"))
    assert message.count("does not exist") == 1


def test_dataset_dir_without_dataset_info(ws, capsys):
    train(ws, capsys, f"dataset_dir={ws / 'empty'}", words=("no dataset_info.json", "`dataset_dir`"))


def test_unknown_dataset_name(ws, capsys):
    train(ws, capsys, "dataset=godo", words=("Unknown dataset 'godo'", "Did you mean 'good'"))


def test_dataset_file_that_is_not_json_names_file_and_line(ws, capsys):
    train(ws, capsys, "dataset=broken", words=("broken.json is not valid JSON", "line 3, column 22"))


ALIAS_BOMB = "".join([
    "x0: &b0 [y, y, y, y, y, y, y, y, y, y]\n",
    *(f"x{i}: &b{i} [" + ", ".join([f"*b{i - 1}"] * 10) + "]\n" for i in range(1, 9)),
    "interleave_probs: [" + ", ".join(["*b8"] * 10) + "]\n",
])  # 10**10 values once expanded, in well under a kilobyte


def test_a_yaml_alias_bomb_is_refused_before_it_is_expanded(ws, capsys, tmp_path):
    """A few hundred bytes of nested aliases used to fill the memory while the config was checked (it died with a
    MemoryError, or took a board down through submit_run); it is now refused as it is read."""
    bomb = tmp_path / "bomb.yaml"
    bomb.write_text((ws / "sft.yaml").read_text(encoding="utf-8") + ALIAS_BOMB, encoding="utf-8")
    assert len(bomb.read_bytes()) < 1500
    user_error(capsys, "check", str(bomb), words=("more than 100,000 values (each YAML alias", "Write the values"))
    selfish = tmp_path / "self.yaml"
    selfish.write_text((ws / "sft.yaml").read_text(encoding="utf-8") + "interleave_probs: &a [0.5, *a]\n")
    user_error(capsys, "train", str(selfish), words=("a value that holds itself",))
    shared = tmp_path / "anchors.yaml"  # an ordinary anchor still works
    shared.write_text((ws / "sft.yaml").read_text(encoding="utf-8").replace("dataset: good", "dataset: &d good")
                      + "eval_dataset: *d\nval_size: 0\n", encoding="utf-8")
    code, err = cli(capsys, "check", str(shared))
    assert code == 0, err


def test_a_refused_value_is_named_once_not_again_as_missing(ws, capsys, tmp_path):
    """`model_name_or_path: {a: 1}` was named twice: "must be text, not a mapping", then, from the checks of the
    config built without it, "`model_name_or_path` is empty" (which the user never wrote). The other checks still run."""
    odd = tmp_path / "odd.yaml"
    odd.write_text((ws / "sft.yaml").read_text(encoding="utf-8").replace("dataset: good", "dataset: nowhere")
                   + "model_name_or_path: {a: 1}\n", encoding="utf-8")
    message = user_error(capsys, "check", str(odd), words=("`model_name_or_path` must be text, not a mapping",
                                                            "nowhere"))
    assert "is empty" not in message and message.count("model_name_or_path") == 1, message


def test_a_config_or_registry_that_is_not_utf8_names_the_file_and_the_fix(ws, capsys, tmp_path):
    gbk = tmp_path / "gbk.yaml"
    gbk.write_bytes(("# 学习率\n" + (ws / "sft.yaml").read_text(encoding="utf-8")).encode("gbk"))
    user_error(capsys, "check", str(gbk), words=("gbk.yaml` is not UTF-8 text (byte 0xc2 at position 6)",
                                                  "re-save it as UTF-8"))
    folder = tmp_path / "data16"
    folder.mkdir()
    _write_json(folder / "good.json", GOOD_ROWS)
    (folder / "dataset_info.json").write_bytes(json.dumps({"good": {"file_name": "good.json"}}).encode("utf-16"))
    train(ws, capsys, f"dataset_dir={folder}", words=("dataset_info.json is not UTF-8 text", "re-save it as UTF-8"))


@pytest.mark.parametrize(("entry", "words"), [
    ({"file_name": "good.json", "columns": ["prompt"]}, ("`columns` must be an object of names",)),
    ({"file_name": 123}, ("`file_name` must be text",)),
    ({"file_name": "good.json", "columns": {"prompt": 1}}, ("`columns.prompt` must be a column name",)),
    ({"file_name": "good.json", "num_samples": "abc"}, ("`num_samples` must be a whole number of at least 1",)),
    ({"file_name": "good.json", "num_samples": -3}, ("not -3; remove it to use every row",)),
    ({"file_name": "good.json", "num_samples": 0}, ("`num_samples` must be a whole number",)),
    ({"file_name": "good.json", "ranking": "false"}, ('`ranking` must be true or false (without quotes), not "false"',)),
    ("good.json", ("is a str, not an object; write it as", '{"file_name": "good.json"}')),
])
def test_a_registry_entry_of_the_wrong_type_is_named_with_its_key(ws, capsys, tmp_path, entry, words):
    """These failed later with a traceback (a list of columns, a number as file name, a text num_samples), or did the
    wrong thing (num_samples 0 trained on every row, -3 reported missing training data, "false" read as true)."""
    folder = tmp_path / "data"
    folder.mkdir()
    _write_json(folder / "good.json", GOOD_ROWS)
    _write_json(folder / "dataset_info.json", {"good": {"file_name": "good.json"}, "odd": entry})
    for command in ("check", "train"):
        user_error(capsys, command, str(ws / "sft.yaml"), "dataset=odd", f"dataset_dir={folder}",
                   words=("dataset 'odd'", *words))


def test_a_misspelt_registry_key_is_named_with_the_key_meant(ws, capsys, caplog, tmp_path):
    """`formating: sharegpt` was ignored without a word (LLaMA-Factory ignores it too): the rows were read as alpaca.
    It is still ignored, as there, but a warning names `formatting`, once; a key near no entry key stays quiet."""
    folder = tmp_path / "data"
    folder.mkdir()
    _write_json(folder / "good.json", GOOD_ROWS)
    _write_json(folder / "dataset_info.json", {"typo": {"file_name": "good.json", "formating": "alpaca",
                                                        "note": "from the team drive"}})
    code, _ = cli(capsys, "check", str(ws / "sft.yaml"), "dataset=typo", f"dataset_dir={folder}")
    assert code == 0
    warned = [r.getMessage() for r in caplog.records if "formating" in r.getMessage()]
    assert warned == ["Dataset 'typo': `formating` is not a dataset_info.json key, so it is ignored (as in "
                      "LLaMA-Factory); did you mean `formatting`?"]
    assert "note" not in caplog.text


def test_check_reads_what_the_config_is_for(ws, capsys, tmp_path, monkeypatch):
    """`lf-engine check` without --for used to check every config as a training one (an export config got `dataset is
    empty`; a predict config passed as valid for train)."""
    export = tmp_path / "export.yaml"
    export.write_text(f"model_name_or_path: {ws / 'model'}\nadapter_name_or_path: {ws / 'nothing'}\n"
                      f"template: chatml\nexport_dir: {tmp_path / 'merged'}\n", encoding="utf-8")
    message = user_error(capsys, "check", str(export), words=("nothing` does not exist", "Checked for `export`",
                                                              "add `--for train`"))
    assert "dataset" not in message and message.startswith("error: Problem in the config:")
    chat = tmp_path / "chat.yaml"
    chat.write_text(f"model_name_or_path: {ws / 'model'}\ntemplate: chatml\ninfer_backend: huggingface\n")
    assert main(["check", str(chat)]) == 0 and "is valid for `chat`" in capsys.readouterr().out
    assert main(["check", str(ws / "sft.yaml"), "do_train=false", "do_predict=true",
                 "predict_with_generate=true", "eval_dataset=good"]) == 0
    assert "is valid for `eval`" in capsys.readouterr().out
    assert main(["check", str(chat), "--for", "train"]) == 2  # --for still decides
    # a config piped in is read for its purpose too (it was always checked for train: `dataset` is empty)
    import io

    monkeypatch.setattr("sys.stdin", io.StringIO(chat.read_text()))
    assert main(["check", "-"]) == 0 and "the config from standard input is valid for `chat`" in capsys.readouterr().out
    monkeypatch.setattr("sys.stdin", io.StringIO(export.read_text()))
    user_error(capsys, "check", "-", words=("nothing` does not exist", "Checked for `export`"))


def test_a_key_set_twice_warns_that_the_last_value_is_used(ws, capsys, caplog, tmp_path):
    """As in LLaMA-Factory (yaml.safe_load), the last value wins; it used to win silently."""
    caplog.set_level(logging.WARNING, logger="engine")
    twice = tmp_path / "twice.yaml"
    twice.write_text((ws / "sft.yaml").read_text(encoding="utf-8") + "cutoff_len: 48\n", encoding="utf-8")
    assert main(["check", str(twice)]) == 0
    assert "sets `cutoff_len` more than once (again at line" in caplog.text and "the last value is used" in caplog.text


def test_a_data_file_that_is_a_pipe_is_refused_instead_of_waiting_for_a_writer(ws, capsys, tmp_path):
    data = tmp_path / "pipe"
    data.mkdir()
    os.mkfifo(data / "d.json")
    (data / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "d.json"}}), encoding="utf-8")
    for command in ("check", "data"):
        user_error(capsys, command, str(ws / "sft.yaml"), f"dataset_dir={data}", "dataset=d",
                   words=("d.json is not a regular file (a pipe, device or socket)",))


@pytest.mark.parametrize("suffix", [".json", ".jsonl", "-wrapped.json", "-registry"])
def test_values_nested_deeper_than_json_can_read_are_named_not_a_traceback(ws, capsys, tmp_path, suffix):
    deep = "[" * 100_000 + "]" * 100_000
    row = '{"instruction": "a", "output": "b", "x": ' + deep + "}"
    data = tmp_path / "deep"
    data.mkdir()
    if suffix == "-registry":
        (data / "dataset_info.json").write_text('{"d": {"file_name": "d.json", "x": ' + deep + "}}", encoding="utf-8")
        words = ("dataset_info.json nests lists or objects too deeply to be read",)
    else:
        text = {".json": f"[{row}]", ".jsonl": row + "\n", "-wrapped.json": '{"rows": [' + row + "]}"}[suffix]
        (data / f"d{suffix}").write_text(text, encoding="utf-8")
        (data / "dataset_info.json").write_text(json.dumps({"d": {"file_name": f"d{suffix}"}}), encoding="utf-8")
        words = ("is not valid JSON: lists or objects nested too deeply to be read",)
    for command in ("check", "data"):
        user_error(capsys, command, str(ws / "sft.yaml"), f"dataset_dir={data}", "dataset=d", words=words)


@pytest.mark.parametrize("suffix", [".json", ".jsonl", "-wrapped.json", "-registry"])
def test_a_number_past_pythons_digit_limit_is_named_with_its_place_not_a_traceback(ws, capsys, tmp_path, suffix):
    """json raises a plain ValueError (no position) for a whole number past 4,300 digits: it ended lf-engine check
    and data with a traceback. A string of digits before it is no number, and the place named is the number's."""
    digits = "7" * 5000
    row = f'{{"instruction": "{digits}", "output": "b",\n "x": {digits}}}'
    data = tmp_path / "long"
    data.mkdir()
    if suffix == "-registry":
        (data / "dataset_info.json").write_text('{"d": {"file_name": "d.json",\n "x": ' + digits + "}}",
                                                encoding="utf-8")
        (data / "d.json").write_text('[{"instruction": "a", "output": "b"}]', encoding="utf-8")
        words = ("dataset_info.json is not valid JSON: a whole number of more than 4,300 digits",
                 "at line 2, column 7.")
    else:
        text = {".json": f"[{row}]", ".jsonl": row.replace("\n", "") + "\n", "-wrapped.json": '{"rows": [' + row + "]}"}
        (data / f"d{suffix}").write_text(text[suffix], encoding="utf-8")
        (data / "dataset_info.json").write_text(json.dumps({"d": {"file_name": f"d{suffix}"}}), encoding="utf-8")
        place = "line 1, column 5041" if suffix == ".jsonl" else "line 2, column 7"
        words = ("is not valid JSON: a whole number of more than 4,300 digits", place)
    for command in ("check", "data"):
        user_error(capsys, command, str(ws / "sft.yaml"), f"dataset_dir={data}", "dataset=d", words=words)


@pytest.mark.parametrize("where", ["model_config", "deepspeed", "ray_init_kwargs"])
def test_a_number_past_pythons_digit_limit_in_a_json_setting_is_named_not_a_traceback(ws, capsys, tmp_path, where):
    """A model's config.json, a DeepSpeed file or a setting given as inline JSON holding a whole number of more than
    4,300 digits ended lf-engine check with json's ValueError traceback; it is named as JSON that cannot be read."""
    digits = "9" * 5000
    if where == "model_config":
        model = tmp_path / "model"
        model.mkdir()
        (model / "config.json").write_text('{"model_type": "llama", "x": ' + digits + "}", encoding="utf-8")
        override, words = f"model_name_or_path={model}", ("config.json is not valid JSON", "at line 1, column 30")
    elif where == "deepspeed":
        (tmp_path / "ds.json").write_text('{"train_batch_size": ' + digits + "}", encoding="utf-8")
        override, words = f"deepspeed={tmp_path / 'ds.json'}", ("`deepspeed: ", "is not valid JSON")
    else:
        override, words = 'ray_init_kwargs={"a": ' + digits + "}", ("`ray_init_kwargs` is not valid JSON",)
    user_error(capsys, "check", str(ws / "sft.yaml"), override,
               words=(*words, "a whole number of more than 4,300 digits"))


@pytest.mark.parametrize(("line", "words"), [
    ("default_system: !!binary aGVsbG8=\n", "the `!!binary` tag makes bytes"),  # trained with system prompt "b'hello'"
    ("lora_target: !!set {q_proj, v_proj}\n", "the `!!set` tag makes a set"),  # "{'v_proj', 'q_proj'}"
    ("run_name: !!omap [a: 1]\n", "the `!!omap` tag makes a list of pairs"),  # "('a', 1)"
    ("run_name: !!pairs [a: 1]\n", "the `!!pairs` tag makes a list of pairs"),
])
def test_yaml_tags_for_values_no_setting_takes_are_refused_with_their_place(ws, capsys, tmp_path, line, words):
    """yaml.safe_load makes bytes, sets and lists of pairs of these tags; each was taken as its Python text."""
    config = tmp_path / "tagged.yaml"
    config.write_text((ws / "sft.yaml").read_text(encoding="utf-8") + line, encoding="utf-8")
    lines = config.read_text(encoding="utf-8").count("\n")
    user_error(capsys, "check", str(config), words=(f"is not valid YAML at line {lines}, column ", words,
                                                     "write the value out as text"))


def test_a_config_nested_deeper_than_yaml_can_read_is_named_not_a_traceback(ws, capsys, tmp_path):
    config = tmp_path / "deep.yaml"
    config.write_text((ws / "sft.yaml").read_text() + "x: " + "[" * 20000 + "]" * 20000 + "\n", encoding="utf-8")
    user_error(capsys, "check", str(config), words=("nests lists or mappings too deeply to be read",))


def test_some_malformed_rows_are_skipped_with_a_count(ws, capsys, caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="engine")
    code, err = cli(capsys, "train", str(ws / "sft.yaml"), "dataset=some_bad", f"output_dir={tmp_path / 'out'}")
    assert code == 0, err
    warning = next(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
    assert "skipped 4 of 10 rows" in warning and "rows 2 (" in warning and "5 (" in warning and "7 (" in warning
    assert "8 (messages[0].content holds a lone surrogate ('\\ud800' at character 0)" in warning  # not a TypeError
    assert json.loads((tmp_path / "out" / "run.json").read_text())["status"] == "completed"


def test_every_row_malformed(ws, capsys, tmp_path):
    train(ws, capsys, "dataset=all_bad", f"output_dir={tmp_path / 'out'}",
          words=("has no usable rows", "2 rows read", "is a list, not text"))
    run = json.loads((tmp_path / "out" / "run.json").read_text())
    assert run["status"] == "failed" and run["exit_code"] == EXIT_USER_ERROR and "no usable rows" in run["error"]


def test_stage_that_does_not_fit_the_dataset(ws, capsys):
    train(ws, capsys, "stage=dpo", words=("Stage dpo needs preference pairs", "'good'", "ranking: true"))
    train(ws, capsys, "stage=kto", words=("Stage kto needs", "kto_tag", "dataset_info.json"))


def test_small_cutoff_len_warns_that_rows_are_cut(ws, capsys, caplog, tmp_path):
    caplog.set_level(logging.WARNING, logger="engine")
    code, err = cli(capsys, "train", str(ws / "sft.yaml"), "cutoff_len=8", f"output_dir={tmp_path / 'out'}")
    assert code == 0, err
    assert any("were cut to cutoff_len=8" in r.getMessage() and "raise cutoff_len" in r.getMessage()
               for r in caplog.records)


# ------------------------------------------------------------------------------------------------ output, resume
def test_resume_from_a_checkpoint_that_is_not_there(ws, capsys, tmp_path):
    train(ws, capsys, f"resume_from_checkpoint={ws / 'nowhere'}", words=("does not exist", "`true`"))
    train(ws, capsys, f"resume_from_checkpoint={ws / 'empty'}", words=("is not a checkpoint", "trainer_state.json"))
    train(ws, capsys, f"output_dir={tmp_path / 'fresh'}", "resume_from_checkpoint=true",
          words=("holds no checkpoint-* folder", "remove `resume_from_checkpoint`"))


def test_output_dir_that_holds_a_trained_run(ws, capsys, tmp_path):
    out = tmp_path / "old"
    out.mkdir()
    (out / "adapter_config.json").write_text("{}", encoding="utf-8")
    train(ws, capsys, f"output_dir={out}", "overwrite_output_dir=false",
          words=("already holds a trained run", "new output_dir", "overwrite_output_dir: true"))


def test_output_dir_that_cannot_be_a_folder(ws, capsys, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    train(ws, capsys, f"output_dir={blocker}", words=("is a file", "give a folder"))
    train(ws, capsys, f"output_dir={blocker / 'run'}", words=("is inside the file",))


def test_run_folder_that_cannot_be_created(tmp_path):
    from engine.lifecycle import JobContext

    blocker = tmp_path / "a-file"
    blocker.write_text("x", encoding="utf-8")
    with pytest.raises(UserError, match="cannot be created .*set `output_dir` to a folder you can write to"):
        JobContext(blocker / "run", "train")


def test_config_file_that_is_a_folder(ws, capsys):
    user_error(capsys, "train", str(ws), words=("is a folder", "YAML file"))
    user_error(capsys, "train", str(ws / "missing.yaml"), words=("missing.yaml` does not exist",))


def test_export_without_export_dir(ws, capsys):
    user_error(capsys, "export", str(ws / "sft.yaml"), words=("`export_dir` is not set",))


# --------------------------------------------------------------------------------------------------- templates
def test_unknown_template(ws, capsys):
    train(ws, capsys, "template=chatmll", words=("Unknown template `chatmll`", "Did you mean `chatml`?"))
    train(ws, capsys, "tool_format=bogus", words=("Unknown `tool_format: bogus`", "qwen"))


def test_train_on_prompt_with_an_efficient_eos_template_is_refused_before_loading(ws, capsys):
    # LLaMA-Factory refuses it too ("Current template does not support `train_on_prompt`")
    train(ws, capsys, "template=glm4", "train_on_prompt=true",
          words=("Template `glm4` ends replies without EOS", "set train_on_prompt: false"))


def test_template_unset_with_a_tokenizer_without_chat_template(ws, capsys, caplog):
    """LLaMA-Factory falls back to its `empty` template there; so do we, and the log says how to choose one."""
    code, err = cli(capsys, "chat", str(ws / "sft.yaml"), "template=", "--query", "hi", "max_new_tokens=4")
    assert code == 0, err
    assert "no chat template: using the `empty` template" in caplog.text + err
    assert "Set `template`" in caplog.text + err


# ----------------------------------------------------------------------------------------------------- devices
@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU's answers")
def test_precision_on_the_cpu(ws, capsys, tmp_path):
    train(ws, capsys, "fp16=true", words=("`fp16: true` does not work on the CPU", "bf16"))
    code, err = cli(capsys, "train", str(ws / "sft.yaml"), "bf16=true", f"output_dir={tmp_path / 'bf16'}")
    assert code == 0, err  # bfloat16 mixed precision runs on the CPU


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU's answers")
def test_gpu_only_features_on_the_cpu(ws, capsys):
    train(ws, capsys, "flash_attn=flash_attention_2", words=("needs an NVIDIA GPU", "sdpa"))
    train(ws, capsys, "quantization_bit=4", words=("needs a GPU", "Remove `quantization_bit`"))


@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is not None, reason="DeepSpeed is installed")
def test_deepspeed_not_installed(ws, capsys):
    train(ws, capsys, f"deepspeed={REPO / 'examples/deepspeed/ds_z3_offload.json'}",
          words=("DeepSpeed is not installed", "lf-board[deepspeed]"))
    train(ws, capsys, f"deepspeed={ws / 'none.json'}", words=("none.json` does not exist",))


@pytest.mark.skipif(importlib.util.find_spec("wandb") is not None, reason="wandb is installed")
def test_tracker_that_is_not_installed(ws, capsys):
    train(ws, capsys, "report_to=wandb", words=("needs the `wandb` package", "report_to: none"))
    train(ws, capsys, "report_to=foo", words=("not a known tracker",))


@pytest.mark.skipif(importlib.util.find_spec("wandb") is None, reason="wandb is not installed")
def test_wandb_without_a_key_is_refused_before_the_start(ws, capsys, monkeypatch, tmp_path):
    """wandb cannot ask for a key in the engine's process: the run stopped at the trainer's start with a
    traceback; now the check names the fixes, and an offline W&B run passes it."""
    for name in ("WANDB_API_KEY", "WANDB_IDENTITY_TOKEN_FILE", "WANDB_MODE", "NETRC", "WANDB_CONFIG_DIR",
                 "WANDB_BASE_URL", "WANDB_DIR"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    train(ws, capsys, "report_to=wandb", words=("needs a W&B API key", "WANDB_API_KEY", "WANDB_MODE=offline"))
    train(ws, capsys, "report_to=all", words=("`report_to: all` (it includes W&B", "report_to: none"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    code, err = cli(capsys, "check", str(ws / "sft.yaml"), "report_to=wandb")
    assert code == 0, err


def test_zero_epochs_trains_nothing(ws, capsys):
    train(ws, capsys, "max_steps=-1", "num_train_epochs=0", words=("trains nothing", "num_train_epochs"))


# ------------------------------------------------------------------------------------------- evaluation alone
def test_eval_of_a_preference_stage_needs_no_training_data(ws, capsys, tmp_path):
    code, err = cli(capsys, "eval", str(ws / "sft.yaml"), "stage=dpo", "dataset=", "eval_dataset=pairs",
                    f"output_dir={tmp_path / 'eval'}")
    assert code == 0, err
    results = json.loads((tmp_path / "eval" / "all_results.json").read_text())
    assert results["eval_loss"] > 0


# ---------------------------------------------------------------------------------------------- a real process
def test_a_real_process_prints_one_line_and_exits_2(ws):
    proc = subprocess.run([sys.executable, "-m", "engine", "check", str(ws / "sft.yaml"), "lora_rnak=8"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == EXIT_USER_ERROR
    assert "Traceback" not in proc.stderr
    assert "error: Problem in the config:\n  - Unknown key `lora_rnak`. Did you mean `lora_rank`?" in proc.stderr


def _side_by_side(cwd: Path, *programs: str) -> list[subprocess.CompletedProcess]:
    """Run Python programs in child processes at the same time (each pays the imports); their outcomes in order."""
    procs = [subprocess.Popen([sys.executable, "-c", program], cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for program in programs]
    results = []
    for proc in procs:
        try:
            out, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            for other in procs:
                other.kill()
            raise
        results.append(subprocess.CompletedProcess(proc.args, proc.returncode, out, err))
    return results


@pytest.mark.skipif(importlib.util.find_spec("bitsandbytes") is None, reason="bitsandbytes not installed")
def test_the_engine_log_has_no_bitsandbytes_cpu_kernel_chatter():
    """bitsandbytes (pulled in by GaLore) warns on import that an optional 4-bit CPU kernel package is missing;
    the engine's log leaves that out (without the engine's setup the warning is there)."""
    root = Path(__file__).resolve().parents[2]
    probe = "import logging, sys; {setup}; import bitsandbytes"
    plain, ours = _side_by_side(root, probe.format(setup="logging.basicConfig(level=logging.INFO)"),
                                probe.format(setup="from engine.log_setup import setup_logging; setup_logging(False)"))
    assert ours.returncode == 0, ours.stderr[-2000:]
    if "kernels-community" not in plain.stderr:
        pytest.skip("this bitsandbytes build does not warn about its CPU kernels")
    assert "kernels-community" not in ours.stderr


@pytest.mark.skipif(importlib.util.find_spec("galore_torch") is None, reason="galore-torch not installed")
def test_the_engine_log_has_no_galore_adamw_deprecation_chatter():
    """galore-torch's AdamW warns on every construction that it is deprecated (a GaLore run has no other optimizer
    to use); the engine's setup leaves that out and keeps other FutureWarnings (in a child process: the setup
    changes process-wide settings)."""
    probe = ("import warnings, torch; {setup}; from galore_torch import GaLoreAdamW; "
             "GaLoreAdamW([torch.nn.Parameter(torch.zeros(2))]); "
             "warnings.warn('something else is deprecated', FutureWarning)")
    plain, ours = _side_by_side(REPO, probe.format(setup="pass"),
                                probe.format(setup="from engine.log_setup import setup_logging; setup_logging(False)"))
    assert plain.returncode == 0 and ours.returncode == 0, plain.stderr[-2000:] + ours.stderr[-2000:]
    assert "AdamW is deprecated" in plain.stderr
    assert "AdamW is deprecated" not in ours.stderr
    assert "something else is deprecated" in ours.stderr


def test_an_unreadable_adapter_config_or_export_dir_is_named_before_loading(ws, capsys, tmp_path, monkeypatch):
    """Both had passed `lf-engine check` and failed in export after the model had loaded and merged, with a
    traceback (a JSONDecodeError; an OSError from a read-only mount). Found by an outside review."""
    import errno
    import shutil

    from engine import export_checks

    broken = tmp_path / "broken"
    shutil.copytree(ws / "adapter32", broken)
    (broken / "adapter_config.json").write_text('{"peft_type": "LORA", "r": \n', encoding="utf-8")
    for command in ("export", "chat"):
        extra = [f"export_dir={tmp_path / 'out'}"] if command == "export" else ["--query", "hi"]
        user_error(capsys, command, str(ws / "sft.yaml"), f"adapter_name_or_path={broken}", *extra,
                   words=("adapter_config.json is not valid JSON", "pick another checkpoint"))

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(export_checks.tempfile, "TemporaryFile", read_only)
    user_error(capsys, "export", str(ws / "sft.yaml"), f"adapter_name_or_path={ws / 'adapter32'}",
               f"model_name_or_path={ws / 'model'}", f"export_dir={tmp_path / 'ro' / 'out'}",
               words=("cannot be written", "Read-only file system", "a folder you can write to"))


def test_a_model_folder_whose_weights_are_cut_off(ws, capsys, tmp_path):
    """A truncated model.safetensors had passed the checks and failed in chat with a SafetensorError traceback."""
    import shutil

    cut = tmp_path / "cut"
    shutil.copytree(ws / "model", cut)
    data = (cut / "model.safetensors").read_bytes()
    (cut / "model.safetensors").write_bytes(data[: len(data) // 2])
    user_error(capsys, "chat", str(ws / "sft.yaml"), f"model_name_or_path={cut}", "--query", "hi",
               words=(f"`model_name_or_path: {cut}` cannot be loaded", "cut off", "copy the weight files again"))


def test_a_path_too_long_for_the_system_is_a_user_error(tmp_path, capsys):
    """A dataset file name over 255 bytes crashed `check` and `train` with OSError's traceback (errno 36)."""
    (tmp_path / "dataset_info.json").write_text(json.dumps({"d": {"file_name": "a" * 5000 + ".json"}}))
    code = main(["check", str(REPO / "examples" / "sft_lora_demo.yaml"), "dataset=d", f"dataset_dir={tmp_path}",
                 f"output_dir={tmp_path / 'out'}"])
    err = capsys.readouterr().err
    assert code == 2 and "A file or folder name is too long for this system" in err and "Traceback" not in err


def test_hub_and_datasets_lines_are_printed_once_in_the_engines_format():
    """huggingface_hub and datasets add their own stderr handler on import and pass records on as well, so each of
    their lines came twice (a hub dataset without a network: twenty lines of retries for ten), whether they were
    imported before the engine's setup (as transformers imports the hub) or after it."""
    probe = ("import logging; {before}; {setup}; import datasets; "
             "logging.getLogger('huggingface_hub.utils._http').warning('hub says hi'); "
             "logging.getLogger('datasets.load').warning('datasets says hi')")
    setup = "from engine.log_setup import setup_logging; setup_logging(False, quiet_transformers=False)"
    plain, late, early = _side_by_side(
        REPO, probe.format(before="pass", setup="logging.basicConfig(level=logging.INFO)"),
        probe.format(before="pass", setup=setup), probe.format(before="import huggingface_hub", setup=setup))
    assert plain.stderr.count("hub says hi") == 2 and plain.stderr.count("datasets says hi") == 2  # the defect
    for done in (late, early):
        assert done.returncode == 0, done.stderr[-2000:]
        assert done.stderr.count("hub says hi") == 1 and done.stderr.count("datasets says hi") == 1, done.stderr
        assert " WARNING huggingface_hub.utils._http: hub says hi" in done.stderr
        assert " WARNING datasets.load: datasets says hi" in done.stderr


def test_dataset_dir_that_is_a_file_is_called_a_file(tmp_path):
    from engine.data.errors import DatasetError
    from engine.data.registry import resolve_dataset

    afile = tmp_path / "notes.txt"
    afile.write_text("x")
    with pytest.raises(DatasetError, match=r"`dataset_dir: .*notes.txt` is a file, not a folder"):
        resolve_dataset("mydata", str(afile))
