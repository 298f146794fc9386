"""The built-in demo model (engine.demo) and the demo datasets in examples/data."""

from __future__ import annotations

import hashlib
import json
import threading
from pathlib import Path

import pytest
import torch

from engine import demo
from engine.models import default_template, family_of, resolve_model_path

DATA = Path(__file__).resolve().parents[2] / "examples" / "data"
QUICK = demo.DemoSpec(warmup_steps=3)  # same pipeline, a few warm-up steps: for behaviour checks


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_two_builds_are_byte_identical(tmp_path):
    first = demo.build_demo_model(tmp_path / "a", spec=QUICK)
    second = demo.build_demo_model(tmp_path / "b", spec=QUICK)
    names = sorted(p.name for p in first.iterdir())
    assert {"model.safetensors", "config.json", "tokenizer.json", "tokenizer_config.json", "generation_config.json",
            demo.STAMP_FILE} <= set(names)
    assert names == sorted(p.name for p in second.iterdir())
    for name in names:
        assert _sha(first / name) == _sha(second / name), name


def test_a_build_says_so_when_it_starts(tmp_path, caplog):
    """The first run of the demo (the board's Start, `lf-engine train`) builds it before training, for up to a minute
    or two on a busy machine: its log says so at once, not only when the build is done."""
    caplog.set_level("INFO", logger="engine.demo")
    demo.build_demo_model(tmp_path / "a", spec=demo.DemoSpec(warmup_steps=0))
    lines = [record.getMessage() for record in caplog.records if record.name == "engine.demo"]
    assert lines[0].startswith("Building the demo model") and lines[-1].startswith("Built the demo model")


def test_the_cached_demo_model_loads_chats_and_generates():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = demo.ensure_demo_model()
    assert resolve_model_path("demo") == str(path) == resolve_model_path("LF-Demo")
    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path)
    config = json.loads((path / "tokenizer_config.json").read_text())
    assert config["chat_template"] == demo.CHATML_TEMPLATE
    assert (tokenizer.eos_token, tokenizer.pad_token) == ("<|im_end|>", "<|endoftext|>")
    assert model.config.model_type == "llama" and model.config.lf_board_demo
    assert family_of(str(path)).name == "LF-Demo" and default_template(str(path)) == "chatml"
    text = tokenizer.apply_chat_template([{"role": "system", "content": "Be brief."},
                                          {"role": "user", "content": "Who are you?"}],
                                         tokenize=False, add_generation_prompt=True)
    assert text == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nWho are you?<|im_end|>\n"
                    "<|im_start|>assistant\n")
    for marker in demo.SPECIAL_TOKENS:
        assert len(tokenizer(marker, add_special_tokens=False)["input_ids"]) == 1
    inputs = tokenizer(text, return_tensors="pt")
    out = model.generate(**inputs, max_new_tokens=12, do_sample=False)
    assert out.shape[1] > inputs["input_ids"].shape[1]
    # the warm-up taught it the demo text: far below a random model's loss (about 7.4)
    sample = json.loads((DATA / "demo_pt.jsonl").read_text().splitlines()[0])["text"]
    ids = tokenizer(sample, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert model(input_ids=ids, labels=ids).loss.item() < 5.5


def test_ensure_builds_once_under_a_lock_and_rebuilds_on_a_new_stamp(tmp_path, monkeypatch):
    monkeypatch.setattr(demo, "SPEC", QUICK)
    builds = []
    real_build = demo.build_demo_model

    def counting_build(*args, **kwargs):
        builds.append(args[0])
        return real_build(*args, **kwargs)

    monkeypatch.setattr(demo, "build_demo_model", counting_build)
    folder = tmp_path / "demo-model"
    results = []
    threads = [threading.Thread(target=lambda: results.append(demo.ensure_demo_model(folder))) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results == [folder, folder] and len(builds) == 1
    assert demo.ensure_demo_model(folder) == folder and len(builds) == 1
    stamp = json.loads((folder / demo.STAMP_FILE).read_text())
    assert stamp["version"] == demo.DEMO_VERSION
    (folder / demo.STAMP_FILE).write_text(json.dumps({**stamp, "version": "old"}))
    demo.ensure_demo_model(folder)
    assert len(builds) == 2
    assert json.loads((folder / demo.STAMP_FILE).read_text()) == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo-model", "demo-model.lock"]  # no staging left
    # built under another torch (a second venv sharing the cache): used as it is, not rebuilt
    (folder / demo.STAMP_FILE).write_text(json.dumps({**stamp, "torch": "1.0.0"}))
    assert "torch" not in stamp and demo.ensure_demo_model(folder) == folder and len(builds) == 2


def test_missing_demo_data_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LF_DEMO_DATA_DIR", str(tmp_path))
    with pytest.raises(FileNotFoundError, match="demo datasets are missing .*demo_pt.jsonl.*LF_DEMO_DATA_DIR"):
        demo.ensure_demo_model(tmp_path / "model")


def test_warm_up_never_sees_the_identity_answers():
    corpus, documents = demo.load_demo_texts(DATA)
    assert any("I am LF Demo" in text for text in corpus)  # the tokenizer knows the words
    assert not any("I am LF Demo" in doc for doc in documents)
    assert any(doc.startswith("<|im_start|>system\n") for doc in documents)


# ---------------------------------------------------------------------------------------------------------
# examples/data


def _rows(name):
    text = (DATA / name).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()] if name.endswith(".jsonl") else json.loads(text)


def test_dataset_info_registers_every_demo_dataset():
    info = json.loads((DATA / "dataset_info.json").read_text())
    assert set(info) == {"demo_identity", "demo_alpaca", "demo_sharegpt", "demo_tools", "demo_dpo", "demo_kto",
                         "demo_pt", "demo_vlm"}
    for entry in info.values():
        assert (DATA / entry["file_name"]).is_file()
    assert info["demo_dpo"]["ranking"] is True
    assert info["demo_tools"]["columns"] == {"messages": "conversations", "tools": "tools"}
    assert info["demo_kto"]["columns"]["kto_tag"] == "kto_tag"
    assert info["demo_pt"]["columns"] == {"prompt": "text"}


@pytest.mark.parametrize(("name", "low", "high"), [("demo_identity.json", 20, 40), ("demo_alpaca.json", 60, 100)])
def test_alpaca_files(name, low, high):
    rows = _rows(name)
    assert low <= len(rows) <= high
    for row in rows:
        assert set(row) == {"instruction", "input", "output"} and row["instruction"] and row["output"]
    assert len({(r["instruction"], r["input"]) for r in rows}) == len(rows)
    if name == "demo_identity.json":
        assert sum("LF Demo" in r["output"] for r in rows) == len(rows)
        assert "Who are you?" in {r["instruction"] for r in rows}


def _check_turns(turns, user_roles, assistant_roles, key_role="from"):
    for i, turn in enumerate(turns):
        assert turn[key_role] in (user_roles if i % 2 == 0 else assistant_roles), turns


def test_sharegpt_files():
    chats = _rows("demo_sharegpt.json")
    assert 15 <= len(chats) <= 30
    for row in chats:
        assert row["system"] and len(row["conversations"]) >= 4
        _check_turns(row["conversations"], {"human"}, {"gpt"})
    tools = _rows("demo_tools.json")
    assert 8 <= len(tools) <= 15
    calls = 0
    for row in tools:
        declared = {tool["name"] for tool in json.loads(row["tools"])}
        _check_turns(row["conversations"], {"human", "observation"}, {"gpt", "function_call"})
        assert row["conversations"][-1]["from"] == "gpt"
        for i, turn in enumerate(row["conversations"]):
            if turn["from"] == "function_call":
                call = json.loads(turn["value"])
                assert call["name"] in declared and isinstance(call["arguments"], dict)
                assert row["conversations"][i + 1]["from"] == "observation"
                calls += 1
    assert calls >= 8


def test_preference_and_pretraining_files():
    dpo = _rows("demo_dpo.json")
    assert 25 <= len(dpo) <= 40
    for row in dpo:
        assert row["conversations"][-1]["from"] == "human"
        assert row["chosen"]["from"] == row["rejected"]["from"] == "gpt"
        assert row["chosen"]["value"] != row["rejected"]["value"]
    kto = _rows("demo_kto.json")
    assert 25 <= len(kto) <= 40
    assert {row["kto_tag"] for row in kto} == {True, False}
    for row in kto:
        assert [m["role"] for m in row["messages"]] == ["user", "assistant"]
    pt = _rows("demo_pt.jsonl")
    assert 40 <= len(pt) <= 60 and all(set(row) == {"text"} and len(row["text"]) > 40 for row in pt)


def test_demo_target_that_cannot_hold_the_model_is_refused_before_the_build(tmp_path, capsys, monkeypatch):
    """`lf-engine demo --target` on a file, a path under a file, or a folder of other files built the model for half a
    minute (minutes on a busy machine) and then ended in a traceback (FileExistsError), or overwrote the folder's
    files. Each is refused first, with the fix; an empty folder and an earlier build's folder are taken."""
    from engine.cli import EXIT_USER_ERROR, main

    monkeypatch.setattr(demo, "build_demo_model", lambda target: pytest.fail(f"built into {target}"))
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "others").mkdir()
    (tmp_path / "others" / "notes.txt").write_text("mine")
    for given, words in ((tmp_path / "a_file", "is a file, not a folder"),
                         (tmp_path / "a_file" / "sub", "cannot be made: Not a directory"),
                         (tmp_path / "others", "a folder with other files in it")):
        assert main(["demo", "--target", str(given)]) == EXIT_USER_ERROR
        err = capsys.readouterr().err
        assert words in err and "give a new or empty folder" in err and "Traceback" not in err, err
    assert (tmp_path / "others" / "notes.txt").read_text() == "mine"
    built = []
    monkeypatch.setattr(demo, "build_demo_model", lambda target: built.append(target) or target)
    (tmp_path / "earlier").mkdir()
    (tmp_path / "earlier" / demo.STAMP_FILE).write_text("{}")
    (tmp_path / "earlier" / "config.json").write_text("{}")
    for given in (tmp_path / "new" / "deeper", tmp_path / "earlier"):
        assert main(["demo", "--target", str(given)]) == 0
    assert built == [tmp_path / "new" / "deeper", tmp_path / "earlier"] and (tmp_path / "new" / "deeper").is_dir()
