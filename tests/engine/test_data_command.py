"""`lf-engine data`: tokenize a config's datasets without the model, report them, and find them again from the files
alone (no tokenizer, no torch) once a run has tokenized them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from engine.cli import main

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

PROBE = """
import sys
from engine.cli import main
rc = main(sys.argv[1:])
print("IMPORTED", "torch" in sys.modules, "transformers" in sys.modules)
raise SystemExit(rc)
"""


@pytest.fixture()
def model_dir():
    from engine.demo import ensure_demo_model

    return ensure_demo_model()


@pytest.fixture()
def data_dir(tmp_path):
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [{"instruction": f"Say {i}", "input": "", "output": f"The number {i}."} for i in range(30)]
    rows.append({"instruction": "long " * 300, "input": "", "output": "cut"})
    (folder / "rows.json").write_text(json.dumps(rows))
    (folder / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "rows.json"}}))
    return folder


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("LF_ENGINE_CACHE", str(folder))
    return folder


def _args(model_dir, data_dir, *extra):
    return [str(EXAMPLES / "sft_lora_demo.yaml"), f"model_name_or_path={model_dir}", "dataset=rows",
            f"dataset_dir={data_dir}", "cutoff_len=64", *extra]


def _probe(args, cache):
    """`lf-engine data` in a fresh process: whether it answered without importing torch or transformers."""
    env = {**__import__("os").environ, "LF_ENGINE_CACHE": str(cache), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", PROBE, "data", *args], capture_output=True, text=True, env=env,
                          cwd=REPO, timeout=300)
    return done.returncode, done.stdout, done.stderr


@pytest.fixture()
def full_way(monkeypatch, capsys):
    """`lf-engine data` in this process (a fresh process costs seconds of imports): its exit code, its output, and
    whether it loaded the tokenizer (the full way) instead of answering from the files alone."""
    from engine.models import tokenizer_setup

    real = tokenizer_setup.load_text_components

    def run(args):
        loaded = []
        monkeypatch.setattr(tokenizer_setup, "load_text_components",
                            lambda cfg: loaded.append(cfg) or real(cfg))
        capsys.readouterr()
        rc = main(["data", *args])
        return rc, capsys.readouterr().out, bool(loaded)

    return run


def test_tokenizes_reports_and_then_finds_it_from_the_files_alone(model_dir, data_dir, cache, capsys):
    assert main(["data", *_args(model_dir, data_dir)]) == 0
    out = capsys.readouterr().out
    assert "train: 31 rows -> 30 sequences (1 cut to cutoff_len 64, 1 dropped)" in out or \
        "train: 31 rows -> 31 sequences (1 cut to cutoff_len 64)" in out
    assert "Tokenized and cached in" in out
    entry = out.split("Tokenized and cached in ")[1].split(";")[0]
    assert (Path(entry) / "lf_stats.json").is_file()
    stats_line = out.splitlines()[0]
    # A second ask: the same report and entry, found without importing torch or transformers.
    rc, stdout, stderr = _probe(_args(model_dir, data_dir), cache)
    assert rc == 0, stderr
    assert stdout.splitlines()[0] == stats_line
    assert f"Already tokenized: cache entry {entry}." in stdout
    assert "IMPORTED False False" in stdout


def test_a_training_run_loads_what_the_command_tokenized_and_records_it(model_dir, data_dir, cache, tmp_path,
                                                                         monkeypatch):
    monkeypatch.chdir(REPO)
    out = tmp_path / "run"
    common = _args(model_dir, data_dir)[1:]
    train = ["train", str(EXAMPLES / "sft_lora_demo.yaml"), *common, f"output_dir={out}", "max_steps=1",
             "save_strategy=no", "plot_loss=false"]
    assert main(train) == 0  # tokenizes (the template adds tokens: resize_vocab turns on during the run)
    entries = list((cache / "tokenized").iterdir())
    assert len(entries) == 1
    rc, stdout, _ = _probe(_args(model_dir, data_dir), cache)  # the run's record is found by the config as written
    assert rc == 0 and f"Already tokenized: cache entry {entries[0]}." in stdout and "IMPORTED False False" in stdout
    from engine.data import cache as data_cache

    found = []
    real = data_cache.load_entry
    monkeypatch.setattr(data_cache, "load_entry", lambda key: found.append(real(key)) or found[-1])
    assert main([*train, f"output_dir={tmp_path / 'run2'}"]) == 0
    assert len(found) == 1 and found[0] is not None and len(found[0].train) == 31  # loaded, not tokenized


def test_without_a_change_this_process_answers_from_the_files_alone_too(model_dir, data_dir, cache, full_way):
    """The control for the tests below, which run the second ask in this process: with nothing changed it loads no
    tokenizer here either."""
    assert full_way(_args(model_dir, data_dir))[::2] == (0, True)
    rc, stdout, loaded = full_way(_args(model_dir, data_dir))
    assert rc == 0 and not loaded and "Already tokenized: cache entry" in stdout


@pytest.mark.parametrize("change", ["file", "setting", "tokenizer_file", "overwrite_cache", "entry_evicted"])
def test_any_change_goes_the_full_way(change, model_dir, data_dir, cache, tmp_path, full_way):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    assert main(["data", *_args(model, data_dir)]) == 0
    extra: list[str] = []
    if change == "file":
        time.sleep(0.01)
        rows = json.loads((data_dir / "rows.json").read_text())[:10]
        (data_dir / "rows.json").write_text(json.dumps(rows))
    elif change == "setting":
        extra = ["cutoff_len=32"]
    elif change == "tokenizer_file":
        config = json.loads((model / "tokenizer_config.json").read_text())
        config["model_max_length"] = 123
        (model / "tokenizer_config.json").write_text(json.dumps(config))
    elif change == "overwrite_cache":
        extra = ["overwrite_cache=true"]
    else:
        shutil.rmtree(cache / "tokenized")
    rc, stdout, loaded = full_way(_args(model, data_dir, *extra))
    assert rc == 0 and loaded  # the tokenizer was loaded
    if change == "file":
        assert stdout.startswith("train: 10 rows -> 10 sequences") and "Tokenized and cached in" in stdout
    elif change == "tokenizer_file":
        assert "Already tokenized: cache entry" in stdout  # the same tokens: the full key finds the entry
    if change == "entry_evicted":
        assert "Tokenized and cached in" in stdout
        assert len(list((cache / "quick").iterdir())) == 1  # the stale record was replaced, not kept beside


def test_tokenized_path_is_written_then_named(model_dir, data_dir, cache, tmp_path, capsys):
    saved = tmp_path / "tokenized"
    assert main(["data", *_args(model_dir, data_dir, f"tokenized_path={saved}")]) == 0
    assert f"Tokenized and saved in tokenized_path {saved}" in capsys.readouterr().out
    assert main(["data", *_args(model_dir, data_dir, f"tokenized_path={saved}")]) == 0
    assert f"Already tokenized: tokenized_path {saved}." in capsys.readouterr().out
    assert not (cache / "tokenized").exists()  # the user's own copy, not the cache


def test_a_saved_tokenized_path_needs_no_raw_data(model_dir, data_dir, cache, tmp_path, capsys):
    """As in LLaMA-Factory, a saved tokenized_path is what the rows load from: data tokenized on one machine checks
    and trains on another without the dataset files (they were required, and `dataset` could not be left out)."""
    import shutil

    saved = tmp_path / "tokenized"
    moved = tmp_path / "data_copy"
    shutil.copytree(data_dir, moved)
    assert main(["data", *_args(model_dir, moved, f"tokenized_path={saved}")]) == 0
    shutil.rmtree(moved)  # the raw data is gone
    capsys.readouterr()
    assert main(["check", *_args(model_dir, moved, f"tokenized_path={saved}")]) == 0, capsys.readouterr().err
    assert main(["check", *_args(model_dir, moved, f"tokenized_path={saved}", "dataset=")]) == 0
    assert main(["check", *_args(model_dir, moved, f"tokenized_path={saved}", "overwrite_cache=true")]) == 2


def test_cache_off_says_it_is_not_kept(model_dir, data_dir, monkeypatch, capsys):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    assert main(["data", *_args(model_dir, data_dir)]) == 0
    assert "Tokenized, but not kept: the cache is off (LF_ENGINE_CACHE)" in capsys.readouterr().out


def test_rl_prompts_are_counted(model_dir, cache, capsys, monkeypatch):
    monkeypatch.chdir(REPO)
    assert main(["data", str(EXAMPLES / "grpo_demo.yaml"), f"model_name_or_path={model_dir}"]) == 0
    out = capsys.readouterr().out
    assert " prompts (" in out.splitlines()[0] and "nothing is kept" in out


def test_problems_are_reported_before_anything_loads(model_dir, cache, tmp_path, capsys):
    assert main(["data", str(EXAMPLES / "sft_lora_demo.yaml"), f"model_name_or_path={model_dir}", "dataset=",
                 f"dataset_dir={tmp_path}"]) == 2
    err = capsys.readouterr().err
    assert "There is no data to tokenize: set `dataset`" in err
    assert main(["data", str(EXAMPLES / "sft_lora_demo.yaml"), "dataset=nope", "cutof_len=3"]) == 2
    err = capsys.readouterr().err
    assert "cutof_len" in err and "cutoff_len" in err and "nope" in err


def test_an_unwritable_record_costs_only_the_quick_lookup(model_dir, data_dir, cache, capsys):
    cache.mkdir()
    (cache / "quick").write_text("not a folder")
    assert main(["data", *_args(model_dir, data_dir)]) == 0
    assert "Tokenized and cached in" in capsys.readouterr().out
    assert main(["data", *_args(model_dir, data_dir)]) == 0
    assert "Already tokenized: cache entry" in capsys.readouterr().out  # found after loading the tokenizer


def test_cache_clear_forgets_the_records_of_what_it_removed(model_dir, data_dir, cache, capsys):
    assert main(["data", *_args(model_dir, data_dir)]) == 0
    assert len(list((cache / "quick").glob("*.json"))) == 1
    assert main(["cache", "--clear"]) == 0
    assert not list((cache / "quick").glob("*.json"))


def test_a_folder_named_demo_here_is_not_the_demo(model_dir, data_dir, cache, tmp_path, monkeypatch, full_way):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(model_dir, tmp_path / "demo")  # the loader still uses the built-in demo for `demo`
    args = [str(EXAMPLES / "sft_lora_demo.yaml"), "model_name_or_path=demo", "dataset=rows",
            f"dataset_dir={data_dir}", "cutoff_len=64"]
    assert main(["data", *args]) == 0
    rc, _, loaded = full_way(args)
    assert rc == 0 and loaded  # found after loading the tokenizer, never from ./demo's files


def test_a_chat_template_in_a_subfolder_is_part_of_the_quick_key(model_dir, data_dir, cache, tmp_path, full_way):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(model_dir, model)
    assert main(["data", *_args(model, data_dir)]) == 0
    (model / "additional_chat_templates").mkdir()
    (model / "additional_chat_templates" / "tool_use.jinja").write_text("{% for m in messages %}{{ m['content'] }}"
                                                                        "{% endfor %}")
    rc, _, loaded = full_way(_args(model, data_dir))
    assert rc == 0 and loaded  # transformers reads it: the tokenizer is loaded again


def test_columns_that_the_rows_lack_are_named(model_dir, cache, tmp_path, capsys):
    folder = tmp_path / "mapped"
    folder.mkdir()
    (folder / "rows.json").write_text(json.dumps([{"instruction": "hi", "input": "", "output": "yo"}] * 3))
    (folder / "dataset_info.json").write_text(json.dumps(
        {"rows": {"file_name": "rows.json", "columns": {"prompt": "question", "response": "answer"}}}))
    assert main(["data", *_args(model_dir, folder)]) == 2
    err = capsys.readouterr().err
    # named by the pre-flight check, before anything is tokenized (the column, the key mapping it, the fix)
    assert "its rows have no column `question` (`columns: {\"prompt\": \"question\"}` in dataset_info.json)" in err
    assert "the first row has instruction, input, output" in err and 'Set `columns: {"prompt": "instruction"}`' in err
    # OpenAI-style rows without a `columns` mapping: LLaMA-Factory's default turns column is `conversations`
    (folder / "chat.json").write_text(json.dumps([{"messages": [{"role": "user", "content": "hi"},
                                                                {"role": "assistant", "content": "yo"}]}] * 2))
    (folder / "dataset_info.json").write_text(json.dumps({"rows": {"file_name": "chat.json", "formatting": "openai"}}))
    assert main(["data", *_args(model_dir, folder)]) == 2
    err = capsys.readouterr().err
    assert "its rows have no column `conversations` (the default column for `messages`" in err
    assert 'Set `columns: {"messages": "messages"}`' in err
