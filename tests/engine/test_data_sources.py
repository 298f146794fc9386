"""Dataset registry, readers, converters and loading: every format, every error path, and the shared demo data."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from engine.data import (
    DatasetError,
    list_datasets,
    load_examples,
    read_rows,
    register_dataset,
    resolve_dataset,
    split_eval,
)
from engine.data.loader import mix_examples
from engine.data.registry import check_datasets
from engine.errors import UserError
from engine.templates import get_template

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def args(dataset_dir, **kw):
    return SimpleNamespace(dataset_dir=str(dataset_dir), max_samples=kw.pop("max_samples", None),
                           mix_strategy=kw.pop("mix_strategy", "concat"), interleave_probs=kw.pop("probs", None))


@pytest.fixture
def data_dir(tmp_path, fixture_data_dir):
    """A writable copy of tests/fixtures/data."""
    target = tmp_path / "data"
    shutil.copytree(fixture_data_dir, target)
    return target


# --------------------------------------------------------------------------------------------- converters
def test_alpaca(fixture_data_dir):
    examples = load_examples(args(fixture_data_dir), "alpaca_small", "sft")
    assert len(examples) == 4
    assert examples[0]["messages"] == [{"role": "user", "content": "Say hello."},
                                       {"role": "assistant", "content": "Hello!"}]
    assert examples[1]["messages"][0]["content"] == "Add the numbers.\n2 and 3"
    assert examples[1]["system"] == "You are a calculator."
    assert [m["role"] for m in examples[2]["messages"]] == ["user", "assistant", "user", "assistant"]
    assert examples[2]["messages"][0]["content"] == "Are you there?"
    assert all(e["tools"] == "" and e["images"] == [] for e in examples)


def test_sharegpt_with_tools_and_system_turn(fixture_data_dir, caplog):
    with caplog.at_level(logging.WARNING):
        examples = load_examples(args(fixture_data_dir), "sharegpt_small", "sft")
    assert len(examples) == 3  # the row with a blank answer stays, as in LLaMA-Factory
    first = examples[0]
    assert first["system"] == "You are a weather bot."
    assert [m["role"] for m in first["messages"]] == ["user", "function", "observation", "assistant"]
    assert json.loads(first["messages"][1]["content"]) == [{"name": "get_weather", "arguments": {"city": "Paris"}}]
    assert json.loads(first["tools"])[0]["name"] == "get_weather"
    assert examples[1]["system"] == "Be kind."
    assert examples[2]["messages"] == [{"role": "user", "content": "Empty answer"}, {"role": "assistant", "content": "  "}]
    assert "skipped 1 of 4 rows" in caplog.text and "row 2 (" in caplog.text


def test_openai_layout_with_tool_calls_parts_and_media(fixture_data_dir):
    examples = load_examples(args(fixture_data_dir), "openai_small", "sft")
    assert len(examples) == 3
    tool_row = examples[0]
    assert tool_row["system"] == "Use tools when needed.\n"  # LLaMA-Factory's OpenAI converter adds it with tools
    assert examples[1]["system"] == "detailed thinking off"  # and, without tools or a system prompt, this one
    assert [m["role"] for m in tool_row["messages"]] == ["user", "function", "observation", "assistant"]
    # OpenAI's arguments are JSON text, and stay text, as LLaMA-Factory writes them (quoted) in training rows
    assert json.loads(tool_row["messages"][1]["content"]) == [{"name": "get_weather", "arguments": '{"city": "Rome"}'}]
    assert json.loads(tool_row["tools"])[0]["name"] == "get_weather"
    assert examples[1]["messages"][1] == {"role": "assistant", "content": "4", "thinking": "Two plus two is four."}
    assert examples[2]["messages"][0]["content"] == "<image>What is this?"
    assert examples[2]["images"] == [str(fixture_data_dir / "media" / "dot.png")]


def test_plain_file_paths_are_detected(fixture_data_dir):
    """Unregistered files are accepted by path, their layout detected from the rows."""
    path = str(fixture_data_dir / "openai_small.jsonl")
    assert len(load_examples(args(fixture_data_dir), path, "sft")) == 3
    assert load_examples(args("/nonexistent"), str(fixture_data_dir / "kto_small.json"), "kto")[1]["kto_tag"] is False
    texts = load_examples(args(fixture_data_dir), "text_small.txt", "pt")
    assert [e["text"] for e in texts] == ["The first document is short.", "",  # a blank line: its EOS alone
                                          "The second document talks about cats and dogs.",
                                          "A third line of plain text."]
    assert len(load_examples(args(fixture_data_dir), "qa_small.csv", "sft")) == 2


def test_preference_and_kto(fixture_data_dir):
    pairs = load_examples(args(fixture_data_dir), "dpo_small", "dpo")
    assert pairs[0]["chosen"] == {"role": "assistant", "content": "Blue."}
    assert pairs[0]["rejected"] == {"role": "assistant", "content": "Dog."}
    assert [m["role"] for m in pairs[1]["messages"]] == ["user", "assistant", "user"]
    alpaca_pairs = load_examples(args(fixture_data_dir), "dpo_alpaca", "rm")
    assert [(e["chosen"]["content"], e["rejected"]["content"]) for e in alpaca_pairs] == [("Apple.", "Chair."),
                                                                                         ("Yes.", "No.")]
    with pytest.raises(DatasetError, match="not applicable in the current training stage"):
        load_examples(args(fixture_data_dir), "dpo_small", "sft")  # refused by LLaMA-Factory too
    kto = load_examples(args(fixture_data_dir), "kto_small", "kto")
    assert [e["kto_tag"] for e in kto] == [True, False]


def test_media_paths_resolved_and_missing_files_skipped(fixture_data_dir, caplog):
    with caplog.at_level(logging.WARNING):
        examples = load_examples(args(fixture_data_dir), "mm_small", "sft")
    assert len(examples) == 1 and Path(examples[0]["images"][0]).is_file()
    assert "image file not found" in caplog.text and "missing.png" in caplog.text


def test_pt_from_any_layout(fixture_data_dir):
    assert [e["text"] for e in load_examples(args(fixture_data_dir), "pt_small", "pt")][0] == \
        "Pretraining text number one."
    # LLaMA-Factory pre-trains on the first message of the prompt alone (the first history query where there is one)
    texts = [e["text"] for e in load_examples(args(fixture_data_dir), "alpaca_small", "pt")]
    assert texts[0] == "Say hello." and texts[1] == "Add the numbers.\n2 and 3" and texts[2] == "Are you there?"


def _entries(tmp_path, rows, **entries):
    (tmp_path / "rows.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps(
        {name: {"file_name": "rows.json", **entry} for name, entry in entries.items()}), encoding="utf-8")
    return lambda name, stage="sft": load_examples(args(tmp_path), name, stage)


def test_an_entry_reads_the_columns_llamafactory_reads_and_no_others(tmp_path):
    """LLaMA-Factory's DatasetAttr: without `columns`, instruction/input/output only; with `columns`, exactly the
    keys it names (an outside check found ours reading unmapped system/history/input columns: other tokens)."""
    row = {"instruction": "Q", "input": "ctx", "output": "A", "system": "SYS", "history": [["h1", "h2"]]}
    load = _entries(tmp_path, [row], bare={}, partial={"columns": {"prompt": "instruction", "response": "output"}},
                    full={"columns": {"prompt": "instruction", "query": "input", "response": "output",
                                      "system": "system", "history": "history"}})
    bare, partial, full = load("bare")[0], load("partial")[0], load("full")[0]
    assert bare["system"] == "" and bare["messages"] == [{"role": "user", "content": "Q\nctx"},
                                                          {"role": "assistant", "content": "A"}]
    assert partial["messages"][0] == {"role": "user", "content": "Q"}  # `input` is not mapped: not read
    assert full["system"] == "SYS" and [m["content"] for m in full["messages"]] == ["h1", "h2", "Q\nctx", "A"]
    assert load("bare", "pt")[0]["text"] == "Q\nctx" and load("full", "pt")[0]["text"] == "h1"  # the first message


def test_a_sharegpt_entry_reads_turns_as_llamafactory_does(tmp_path):
    def turn(role, text):
        return {"from": role, "value": text}

    rows = [
        {"conversations": [turn("system", "TURN SYS"), turn("human", "q0"), turn("gpt", "a0")], "system": "COL SYS"},
        {"conversations": [turn("observation", "obs first"), turn("gpt", "a1")]},  # a tool result may open it
        {"conversations": [turn("human", "q2"), turn("gpt", "a2"), turn("observation", "o"), turn("gpt", "a2b")]},
        {"conversations": [turn("user", "q3"), turn("assistant", "a3")]},  # roles outside the tags: skipped
        {"conversations": [turn("human", "q4"), turn("function_call", "[]"), turn("observation", "x"),
                           turn("observation", "y"), turn("gpt", "a4")]},  # two results in a row: skipped
        {"conversations": [turn("human", "q5"), {"from": "gpt", "value": "a5", "reasoning_content": "hidden",
                                                 "tool_calls": [{"name": "f", "arguments": {}}]}]},
    ]
    load = _entries(tmp_path, rows, sg={"formatting": "sharegpt", "columns": {"messages": "conversations",
                                                                              "system": "system"}},
                    no_system_tag={"formatting": "sharegpt", "tags": {"role_tag": "from", "content_tag": "value",
                                                                      "user_tag": "human", "assistant_tag": "gpt"}})
    examples = load("sg")
    assert [e["messages"][0]["content"] for e in examples] == ["q0", "obs first", "q2", "q5"]
    assert examples[0]["system"] == "TURN SYS"  # a leading system turn comes before the system column
    assert examples[3]["messages"][1] == {"role": "assistant", "content": "a5"}  # only the content is read
    # an entry whose tags leave out system_tag, observation_tag and function_tag: turns with those roles fit no tag,
    # so their rows are skipped (LLaMA-Factory's own kto_en_demo and mllm entries are written so)
    assert [e["messages"][0]["content"] for e in load("no_system_tag")] == ["q5"]


def test_a_sharegpt_entry_whose_turns_use_role_and_content_is_read_without_the_openai_entry_rules(tmp_path):
    """LLaMA-Factory cannot read such rows (no `from` tag); they are read as the OpenAI layout, without the system
    prompt its OpenAI converter adds to `formatting: openai` entries."""
    rows = [{"messages": [{"role": "system", "content": "S"}, {"role": "user", "content": "q"},
                          {"role": "assistant", "content": "a"}]},
            {"messages": [{"role": "user", "content": "q2"}, {"role": "assistant", "content": "a2"}]}]
    load = _entries(tmp_path, rows, sg={"formatting": "sharegpt", "columns": {"messages": "messages"}})
    assert [e["system"] for e in load("sg")] == ["S", ""]


# ---------------------------------------------------------------------------------------------- errors
def test_malformed_rows_are_counted(fixture_data_dir, caplog):
    with caplog.at_level(logging.WARNING):
        examples = load_examples(args(fixture_data_dir), "alpaca_malformed", "sft")
    # an empty prompt or an empty answer stays, as in LLaMA-Factory (whose converters keep empty turns)
    assert [e["messages"][0]["content"] for e in examples] == ["Good row.", "", "No answer.", "Another good row."]
    assert examples[2]["messages"][1] == {"role": "assistant", "content": ""}
    assert "skipped 1 of 5 rows" in caplog.text and "row 3 (" in caplog.text


def test_unknown_name_suggests(fixture_data_dir):
    with pytest.raises(DatasetError, match="Did you mean 'alpaca_small'") as info:
        load_examples(args(fixture_data_dir), "alpaca_smal", "sft")
    assert "sharegpt_small" in str(info.value) and "hub_only" not in str(info.value)
    assert isinstance(info.value, UserError)


def test_missing_info_file(tmp_path):
    with pytest.raises(DatasetError, match="no dataset_info.json"):
        load_examples(args(tmp_path), "anything", "sft")
    with pytest.raises(DatasetError, match="No dataset given"):
        load_examples(args(tmp_path), " , ", "sft")


def test_hub_entry_refused(fixture_data_dir):
    with pytest.raises(DatasetError, match="hub_only.*not in the local cache.*offline.*set `file_name`"):
        load_examples(args(fixture_data_dir), "hub_only", "sft")


def test_missing_file_names_path(fixture_data_dir):
    with pytest.raises(DatasetError, match="not_there.json"):
        load_examples(args(fixture_data_dir), "missing_file", "sft")


def test_bad_json_reports_line_and_column(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('[\n {"instruction": "a", "output": "b"},\n {"instruction": "c" "output": "d"}\n]\n')
    with pytest.raises(DatasetError, match=r"bad.json is not valid JSON: Expecting ',' delimiter at line 3, column 22"):
        read_rows(bad)
    lines = tmp_path / "bad.jsonl"
    lines.write_text('{"text": "ok"}\n\n{"text": broken}\n')
    with pytest.raises(DatasetError, match="bad.jsonl is not valid JSON: .* at line 3, column 10"):
        read_rows(lines)
    (tmp_path / "dataset_info.json").write_text('{\n  "a": {"file_name": "x.json",}\n}')
    with pytest.raises(DatasetError, match="dataset_info.json is not valid JSON: .* line 2"):
        load_examples(args(tmp_path), "a", "sft")


def test_a_name_written_twice_in_dataset_info_takes_the_last_entry_and_is_warned_about_once(tmp_path, caplog):
    """LLaMA-Factory's json.load keeps the last of a repeated key without a word; the same entry is used here and
    the duplicate is named (it had been taken silently)."""
    from engine.data.registry import load_dataset_info

    (tmp_path / "first.json").write_text(json.dumps([{"instruction": "FIRST", "output": "a"}]))
    (tmp_path / "second.json").write_text(json.dumps([{"instruction": "SECOND", "output": "b"}]))
    (tmp_path / "dataset_info.json").write_text(
        '{"mine": {"file_name": "first.json"},\n "other": {"file_name": "first.json", "columns": {"prompt": "x", '
        '"prompt": "instruction"}},\n "mine": {"file_name": "second.json"}}')
    with caplog.at_level(logging.WARNING, logger="engine.data.registry"):
        info = load_dataset_info(tmp_path)
        load_dataset_info(tmp_path)
    assert info["mine"] == {"file_name": "second.json"} and info["other"]["columns"] == {"prompt": "instruction"}
    warnings = [r.getMessage() for r in caplog.records if "more than once" in r.getMessage()]
    assert len(warnings) == 1 and "`prompt` in `other`, `mine` written more than once" in warnings[0]
    assert "the last one is used" in warnings[0]
    assert "SECOND" in str(load_examples(args(tmp_path), "mine", "sft")[0])
    # registering another dataset rewrites the file: refused, since the rewrite would delete the first `mine`
    before = (tmp_path / "dataset_info.json").read_text()
    with pytest.raises(DatasetError, match="`prompt` in `other`, `mine` written more than once.*would delete the earlier"):
        register_dataset(tmp_path, "new", "first.json", formatting="alpaca")
    assert (tmp_path / "dataset_info.json").read_text() == before


def test_empty_and_unusable_datasets(tmp_path):
    (tmp_path / "empty.json").write_text("[]")
    with pytest.raises(DatasetError, match="is empty"):
        load_examples(args(tmp_path), str(tmp_path / "empty.json"), "sft")
    (tmp_path / "bad_rows.json").write_text(json.dumps([{"instruction": "q", "output": "a", "history": [["x"]]}] * 3))
    with pytest.raises(DatasetError, match="no usable rows for stage sft .*3 rows read"):
        load_examples(args(tmp_path), str(tmp_path / "bad_rows.json"), "sft")
    (tmp_path / "odd.json").write_text(json.dumps([{"foo": 1}]))
    with pytest.raises(DatasetError, match="Cannot tell the layout"):
        load_examples(args(tmp_path), str(tmp_path / "odd.json"), "sft")


@pytest.mark.parametrize(("name", "stage", "message"), [
    ("alpaca_small", "dpo", "Stage dpo needs preference pairs, but dataset 'alpaca_small'"),
    ("sharegpt_small", "rm", "Stage rm needs preference pairs"),
    ("alpaca_small", "kto", "has no kto_tag column"),
    ("text_small", "sft", "'text_small' is plain text for pre-training"),
    ("pt_small", "kto", "no kto_tag"),
])
def test_stage_mismatch(fixture_data_dir, name, stage, message):
    with pytest.raises(DatasetError, match=message):
        load_examples(args(fixture_data_dir), name, stage)
    assert check_datasets(fixture_data_dir, name, stage)[0].startswith("`dataset`: ")


def test_check_datasets_ok(fixture_data_dir):
    assert check_datasets(fixture_data_dir, "alpaca_small, sharegpt_small", "sft") == []
    problems = check_datasets(fixture_data_dir, "alpaca_small,nope", "sft", key="eval_dataset")
    assert len(problems) == 1 and problems[0].startswith("`eval_dataset`: Unknown dataset 'nope'")


# --------------------------------------------------------------------------------------------- readers
def test_readers(tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"instruction": "q", "output": "a"}]), tmp_path / "d.parquet")
    assert read_rows(tmp_path / "d.parquet") == [{"instruction": "q", "output": "a"}]
    # .arrow, as datasets' arrow loader (LLaMA-Factory's for that extension) reads it: the stream format datasets
    # writes, or the file format; a damaged one is named
    table = pa.Table.from_pylist([{"instruction": f"q{i}", "output": "a"} for i in range(5)])
    with pa.ipc.new_stream(tmp_path / "s.arrow", table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    with pa.ipc.new_file(tmp_path / "f.arrow", table.schema) as writer:
        writer.write_table(table, max_chunksize=2)
    assert read_rows(tmp_path / "s.arrow") == read_rows(tmp_path / "f.arrow") == table.to_pylist()
    (tmp_path / "bad.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(DatasetError, match="is not a readable Arrow file"):
        read_rows(tmp_path / "bad.arrow")
    (tmp_path / "lines.json").write_text('{"text": "a"}\n{"text": "b"}\n')
    assert read_rows(tmp_path / "lines.json") == [{"text": "a"}, {"text": "b"}]
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.jsonl").write_text('{"text": "one"}\n')
    (folder / "b.jsonl").write_text('{"text": "two"}\n')
    assert read_rows(folder) == [{"text": "one"}, {"text": "two"}]
    assert [e["text"] for e in load_examples(args(tmp_path), "parts", "pt")] == ["one", "two"]
    (folder / "c.csv").write_text("text\nthree\n")
    with pytest.raises(DatasetError, match="mixes file types"):
        read_rows(folder)
    (tmp_path / "x.xml").write_text("<a/>")
    with pytest.raises(DatasetError, match="Unsupported data file type '.xml'"):
        read_rows(tmp_path / "x.xml")
    (tmp_path / "obj.json").write_text('{"a": 1, "b": 2}')
    with pytest.raises(DatasetError, match="expected a list"):
        read_rows(tmp_path / "obj.json")
    (tmp_path / "scalars.json").write_text("[1, 2]")
    with pytest.raises(DatasetError, match="row 0 is a int"):
        read_rows(tmp_path / "scalars.json")


# -------------------------------------------------------------------------------------------- registry
def test_list_datasets_kinds(fixture_data_dir):
    listed = list_datasets(fixture_data_dir)
    kinds = {name: info["kind"] for name, info in listed.items()}
    assert kinds["alpaca_small"] == "sft" and kinds["dpo_small"] == "preference" and kinds["kto_small"] == "kto"
    assert kinds["text_small"] == "pt" and kinds["pt_small"] == "pt"
    assert listed["hub_only"]["hub"] and not listed["hub_only"]["available"]
    assert not listed["missing_file"]["available"] and listed["alpaca_small"]["available"]
    assert list_datasets(fixture_data_dir / "media") == {}


def test_listing_ten_thousand_entries_reads_the_file_once_per_version(tmp_path, monkeypatch):
    """The board lists a folder four times for one change of folder (both tabs' pickers and notes), and each
    listing parsed dataset_info.json (twice: entries, then repeated keys) and checked every entry again: 10,000
    entries took ~12 s the first time. Now one parse per version of the file; every check is still made, and
    ``available`` still follows the data files."""
    from engine.data import registry

    entries = []
    for i in range(10_000):
        entry = [{"file_name": f"f{i}.json"}, {"file_name": f"p{i % 7}.json", "ranking": True},
                 {"hf_hub_url": f"org/d{i}"}, {"file_name": 5}, "bare.json"][i % 5]
        entries.append(f"{json.dumps(f'd{i}')}: {json.dumps(entry)}")
    entries.append('"d0": {"file_name": "f0.json", "formatting": "sharegpt"}')  # d0 written twice: the last is used
    info = tmp_path / "dataset_info.json"
    info.write_text("{" + ",\n".join(entries) + "}")
    for i in range(0, 10_000, 10):
        (tmp_path / f"f{i}.json").write_text("[]")
    parses = []
    real_parse = registry.parse_noting_repeats
    monkeypatch.setattr(registry, "parse_noting_repeats", lambda path: parses.append(path) or real_parse(path))

    listed = list_datasets(tmp_path)
    assert len(listed) == 10_000
    assert listed["d0"]["formatting"] == "sharegpt" and listed["d0"]["available"] and listed["d0"]["kind"] == "sft"
    assert not listed["d5"]["available"] and not listed["d5"]["hub"]  # f5.json is missing
    assert listed["d1"]["kind"] == "preference" and not listed["d1"]["available"]
    assert listed["d2"]["hub"] and listed["d2"]["file_name"] is None
    assert listed["d3"]["kind"] == "broken" and "`file_name` must be text" in listed["d3"]["problem"]
    assert listed["d4"]["kind"] == "broken" and "is a str, not an object" in listed["d4"]["problem"]
    assert sum(item["kind"] == "broken" for item in listed.values()) == 4000
    assert "`d0` written more than once" in registry.repeated_keys_note(tmp_path)

    listed["d0"]["columns"]["prompt"] = "changed by a caller"  # a private copy: the next listing is as read
    listed["d1"]["kind"] = "changed"
    (tmp_path / "f5.json").write_text("[]")  # a data file added: the same dataset_info.json, a new answer
    again = list_datasets(tmp_path)
    assert again["d0"]["columns"] == {} and again["d1"]["kind"] == "preference" and again["d5"]["available"]
    assert registry.repeated_keys_note(tmp_path) is not None
    assert len(parses) == 1

    info.write_text('{"only": {"file_name": "f0.json"}}')  # a new version of the file is read again
    assert list(list_datasets(tmp_path)) == ["only"] and registry.repeated_keys_note(tmp_path) is None
    assert len(parses) == 2


def test_register_dataset(data_dir):
    (data_dir / "upload.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}) + "\n")
    entry = register_dataset(data_dir, "upload", "upload.jsonl")
    assert entry["formatting"] == "sharegpt" and entry["tags"]["role_tag"] == "role"
    info = json.loads((data_dir / "dataset_info.json").read_text())
    assert info["upload"] == entry and "alpaca_small" in info
    assert load_examples(args(data_dir), "upload", "sft")[0]["messages"][1]["content"] == "yo"
    assert not list(data_dir.glob(".dataset_info.*"))
    register_dataset(data_dir, "texts", "text_small.txt")
    assert list_datasets(data_dir)["texts"]["kind"] == "pt"
    with pytest.raises(DatasetError, match="already exists"):
        register_dataset(data_dir, "upload", "upload.jsonl")
    register_dataset(data_dir, "upload", "alpaca_small.json", formatting="alpaca", overwrite=True)
    assert resolve_dataset("upload", data_dir).formatting == "alpaca"
    with pytest.raises(DatasetError, match="not found"):
        register_dataset(data_dir, "ghost", "ghost.json", formatting="alpaca")
    with pytest.raises(DatasetError, match="no comma"):
        register_dataset(data_dir, "a,b", "alpaca_small.json")
    fresh = data_dir / "fresh"
    fresh.mkdir()
    shutil.copy(data_dir / "alpaca_small.json", fresh / "a.json")
    register_dataset(fresh, "a", "a.json")
    # its second row has a system prompt and its third a history: named, since only named columns are read
    assert json.loads((fresh / "dataset_info.json").read_text()) == {"a": {"file_name": "a.json", "columns": {
        "prompt": "instruction", "query": "input", "response": "output", "system": "system", "history": "history"}}}
    assert load_examples(args(fresh), "a", "sft")[1]["system"] == "You are a calculator."
    (fresh / "plain.json").write_text(json.dumps([{"instruction": "a", "input": "", "output": "b"}]))
    assert "columns" not in register_dataset(fresh, "plain", "plain.json")  # LLaMA-Factory's own defaults
    (fresh / "calls.jsonl").write_text(json.dumps({"messages": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "w", "arguments": "{}"}}]},
        {"role": "tool", "content": "sunny"}, {"role": "assistant", "content": "Sunny."}]}) + "\n")
    calls = register_dataset(fresh, "calls", "calls.jsonl")
    assert calls["formatting"] == "openai"  # tool calls need the OpenAI converter
    assert [m["role"] for m in load_examples(args(fresh), "calls", "sft")[0]["messages"]] == \
        ["user", "function", "observation", "assistant"]


# ------------------------------------------------------------------------------------------ mixing / split
def test_max_samples_and_mixing(fixture_data_dir):
    both = load_examples(args(fixture_data_dir, max_samples=2), "alpaca_small,sharegpt_small", "sft")
    assert [e["_dataset"] for e in both] == ["alpaca_small"] * 2 + ["sharegpt_small"] * 2
    groups = [[{"i": i} for i in range(3)], [{"j": j} for j in range(10)]]
    under = mix_examples(groups, "interleave_under", seed=1)
    assert sum("i" in e for e in under) == 3 and len(under) < 13
    over = mix_examples(groups, "interleave_over", seed=1)
    assert sum("j" in e for e in over) >= 10
    assert mix_examples(groups, "interleave_under", seed=1) == under
    with pytest.raises(DatasetError, match="mix_strategy"):
        mix_examples(groups, "zip")


@pytest.mark.parametrize("strategy, probs", [("interleave_under", None), ("interleave_over", None),
                                              ("interleave_under", [0.2, 0.5, 0.3]),
                                              ("interleave_over", [0.7, 0.1, 0.2])])
def test_interleaving_is_llama_factorys(strategy, probs):
    # LLaMA-Factory's merge_dataset: datasets.interleave_datasets(probabilities, seed, first/all_exhausted)
    from datasets import Dataset, interleave_datasets

    groups = [[{"text": f"{name}{i}"} for i in range(size)] for name, size in (("a", 7), ("b", 30), ("c", 12))]
    theirs = interleave_datasets([Dataset.from_list(g) for g in groups], probabilities=probs, seed=42,
                                 stopping_strategy="first_exhausted" if strategy.endswith("under") else "all_exhausted")
    assert mix_examples(groups, strategy, probs, seed=42) == list(theirs)


@pytest.mark.parametrize("val_size", [0.1, 0.25, 0.5, 3, 12.0])
def test_the_evaluation_split_is_llama_factorys(fixture_data_dir, val_size):
    # LLaMA-Factory's split_dataset: train_test_split(test_size=val_size, or int(val_size) above 1, seed) before
    # preprocessing; both parts in its shuffled order
    from datasets import Dataset

    rows = [{"text": f"row {i}"} for i in range(30)]
    test_size = int(val_size) if val_size > 1 else val_size
    theirs = Dataset.from_list(rows).train_test_split(test_size=test_size, seed=42)
    train, held = split_eval(rows, val_size, seed=42)
    assert (train, held) == (list(theirs["train"]), list(theirs["test"]))
    lazy = load_examples(args(fixture_data_dir), "alpaca_small,sharegpt_small", "sft")
    train, held = split_eval(lazy, 0.5, seed=7)
    order = Dataset.from_dict({"i": list(range(len(lazy)))}).train_test_split(test_size=0.5, seed=7)
    assert list(train) == [lazy[i] for i in order["train"]["i"]] and list(held) == [lazy[i] for i in order["test"]["i"]]


def test_split_eval():
    examples = [{"i": i} for i in range(10)]
    train, held = split_eval(examples, 0.2, seed=3)
    assert len(train) == 8 and len(held) == 2 and split_eval(examples, 0.2, seed=3) == (train, held)
    assert {e["i"] for e in train} | {e["i"] for e in held} == set(range(10))
    assert len(split_eval(examples, 3)[1]) == 3
    assert split_eval(examples, 0) == (examples, [])
    with pytest.raises(DatasetError, match="leaves no training examples"):
        split_eval(examples, 10)


# ------------------------------------------------------------------------------------------- shared data
SHARED_EXPECTED = {
    "alpaca_en_demo": ("sft", 999), "alpaca_zh_demo": ("sft", 1000), "identity": ("sft", 91),
    "glaive_toolcall_en_demo": ("sft", 300), "dpo_en_demo": ("dpo", 300), "kto_en_demo": ("kto", 300),
    "c4_demo": ("pt", 300), "wiki_demo": ("pt", 30), "mllm_demo": ("sft", 6), "mllm_audio_demo": ("sft", 3),
    "mllm_video_demo": ("sft", 3), "mllm_video_audio_demo": ("sft", 3),
}
needs_shared = pytest.mark.skipif(not (SHARED_DATA / "dataset_info.json").is_file(),
                                  reason="../shared/data is not present")


@needs_shared
@pytest.mark.parametrize("name", sorted(SHARED_EXPECTED))
def test_shared_dataset_loads_whole(name, caplog):
    stage, count = SHARED_EXPECTED[name]
    with caplog.at_level(logging.WARNING):
        examples = load_examples(args(SHARED_DATA), name, stage)
    assert len(examples) == count and "skipped" not in caplog.text
    assert list_datasets(SHARED_DATA)[name]["kind"] == {"sft": "sft", "dpo": "preference", "kto": "kto",
                                                         "pt": "pt"}[stage]


@needs_shared
def test_shared_details():
    identity = load_examples(args(SHARED_DATA), "identity", "sft")
    assert "{{name}}" in identity[0]["messages"][1]["content"] and "{{author}}" in identity[0]["messages"][1]["content"]
    glaive = load_examples(args(SHARED_DATA), "glaive_toolcall_en_demo", "sft")
    calls = [m for e in glaive for m in e["messages"] if m["role"] == "function"]
    assert len(calls) == 211 and all(json.loads(m["content"])[0]["name"] for m in calls)
    rendered = get_template("qwen").render(glaive[0]["messages"], tools=glaive[0]["tools"])
    assert '<tool_call>\n{"name": "search_recipes"' in rendered and "<tool_response>" in rendered
    mllm = load_examples(args(SHARED_DATA), "mllm_demo", "sft")
    assert all(Path(p).is_absolute() and Path(p).is_file() for e in mllm for p in e["images"])
    video_audio = load_examples(args(SHARED_DATA), "mllm_video_audio_demo", "sft")[0]
    assert video_audio["videos"][0].endswith("4.mp4") and video_audio["audios"][0].endswith("4.mp3")
    with pytest.raises(DatasetError, match="alpaca_en.*not in the local cache"):
        load_examples(args(SHARED_DATA), "alpaca_en", "sft")
    with pytest.raises(DatasetError, match="glaive_toolcall_zh_demo.json"):
        load_examples(args(SHARED_DATA), "glaive_toolcall_zh_demo", "sft")


@needs_shared
def test_shared_reasoning_tool_use(caplog):
    with caplog.at_level(logging.WARNING):
        examples = load_examples(args(SHARED_DATA), str(SHARED_DATA / "reason_tool_use_demo_50.jsonl"), "sft")
    assert len(examples) == 50 and "skipped" not in caplog.text
    assert all(e["system"] for e in examples)
    # two rows declare an empty tool list: kept as "[]", as LLaMA-Factory passes it to the template
    assert sum(bool(e["tools"]) and e["tools"] != "[]" for e in examples) == 48
    assert sum(e["tools"] == "[]" for e in examples) == 2
    replies = [m for e in examples for m in e["messages"] if m["role"] in ("assistant", "function")]
    assert all(m.get("thinking") for m in replies)
    multi = [m for m in replies if m["role"] == "function" and len(json.loads(m["content"])) == 3]
    assert len(multi) == 3
    rendered = get_template("qwen3").render(examples[0]["messages"], examples[0]["system"], examples[0]["tools"])
    assert rendered.count("<think>\n") == 1


def test_registering_an_empty_file_says_it_is_empty(tmp_path):
    (tmp_path / "blank.jsonl").write_text("")
    with pytest.raises(DatasetError) as err:
        register_dataset(tmp_path, "blank", "blank.jsonl")
    assert "blank.jsonl has no rows" in str(err.value) and "layout" not in str(err.value)
    assert not (tmp_path / "dataset_info.json").exists()


def test_registering_on_a_full_disk_keeps_dataset_info_whole(data_dir, monkeypatch):
    """A registration that cannot be written leaves dataset_info.json as it was (every other entry kept) and no temp
    file; one that is written gets the umask's permissions, like any file the user makes (not a temp file's 0600)."""
    from tests.full_disk import fill_disk

    (data_dir / "upload.jsonl").write_text(json.dumps({"instruction": "hi", "output": "yo"}) + "\n")
    before = (data_dir / "dataset_info.json").read_bytes()
    with monkeypatch.context() as patched:
        fill_disk(patched, str(data_dir))
        with pytest.raises(OSError, match="No space left"):
            register_dataset(data_dir, "upload", "upload.jsonl")
    assert (data_dir / "dataset_info.json").read_bytes() == before
    assert sorted(p.name for p in data_dir.iterdir() if p.name.startswith(".")) == []
    register_dataset(data_dir, "upload", "upload.jsonl")
    umask = os.umask(0)
    os.umask(umask)
    assert (data_dir / "dataset_info.json").stat().st_mode & 0o777 == 0o666 & ~umask
    assert "upload" in json.loads((data_dir / "dataset_info.json").read_text())


@pytest.mark.parametrize("value", [",", " , ,", "  "])
def test_a_dataset_value_of_commas_alone_is_named_before_the_run(fixture_data_dir, value):
    """`dataset: ","` split into no name: the check passed it and the run then said "No dataset given"; it is named
    with the fix before anything starts (a blank value is the train command's own "`dataset` is empty")."""
    problems = check_datasets(fixture_data_dir, value, "sft", key="eval_dataset")
    if value.strip():
        assert problems == [f"`eval_dataset: {value.strip()}` names no dataset (only commas and spaces); set it to "
                            "names from dataset_info.json, separated by commas."]
    else:
        assert problems == []
