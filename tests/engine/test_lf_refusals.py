"""Inputs LLaMA-Factory 0.9.5 refuses (or reads in one particular way) are refused or read the same way here, each
checked against its code and a run of it (see each test)."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from engine.data import DatasetError, load_examples


def _args(folder):
    return SimpleNamespace(dataset_dir=str(folder), max_samples=None, mix_strategy="concat", interleave_probs=None)


def _write(folder, name: str, rows: list, **entry) -> None:
    (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    info = folder / "dataset_info.json"
    registry = json.loads(info.read_text(encoding="utf-8")) if info.is_file() else {}
    registry[name] = {"file_name": f"{name}.json", **entry}
    info.write_text(json.dumps(registry), encoding="utf-8")


def test_an_alpaca_reply_that_is_a_list_is_no_reply_without_ranking(tmp_path):
    """LLaMA-Factory's alpaca converter takes a reply only when it is text (or a pair with `ranking: true`): a list
    leaves the row without one, so sft drops it ("Cannot find valid samples" when all are such). Here the first
    answer of the list was trained on."""
    _write(tmp_path, "pairs", [{"instruction": f"Pick {i}", "output": [f"good {i}", f"bad {i}"]} for i in range(3)])
    with pytest.raises(DatasetError, match=r"no usable rows for stage sft .*column 'output' holds a list, not text; "
                                           r".*`ranking: true` in dataset_info.json"):
        load_examples(_args(tmp_path), "pairs", "sft")
    assert [e["text"] for e in load_examples(_args(tmp_path), "pairs", "pt")] == ["Pick 0", "Pick 1", "Pick 2"]
    _write(tmp_path, "ranked", [{"instruction": "a", "output": ["x", "y"]}], ranking=True)
    assert [e["chosen"]["content"] for e in load_examples(_args(tmp_path), "ranked", "dpo")] == ["x"]


@pytest.mark.parametrize("keys", [{"dataset": "a", "eval_dataset": "b", "val_size": 0.1},
                                  {"eval_dataset": "b", "val_size": 3}, {"do_predict": True, "val_size": 0.2}])
def test_val_size_needs_dataset_and_no_eval_dataset(keys):
    """LLaMA-Factory's DataArguments refuse `val_size` (above 1e-6) beside `eval_dataset`, and without `dataset`;
    here the first was taken as the evaluation set and val_size ignored, and the second ignored."""
    from engine.config import ConfigError, build_config

    with pytest.raises(ConfigError) as err:
        build_config(keys)
    if "dataset" in keys:
        assert f"`val_size: {float(keys['val_size'])}` and `eval_dataset: b` are both set" in str(err.value)
        assert "remove `val_size`" in str(err.value)
    else:
        assert "holds out part of `dataset`, which is not set" in str(err.value)
    for fine in ({"dataset": "a", "eval_dataset": "b", "val_size": 0}, {"dataset": "a", "val_size": 0.1},
                 {"eval_dataset": "b"}):
        build_config(fine)


def test_interleave_once_is_refused_saying_why():
    """LLaMA-Factory 0.9.5 lists `interleave_once` but maps it to datasets' `all_exhausted_without_replacement`, which
    its pinned datasets (<= 4.0.0) lacks: a run with identity,alpaca_en_demo stops with "ValueError:
    all_exhausted_without_replacement is not supported". Here the config is refused saying so (it was refused as an
    unknown choice, with `interleave_over` as the likely meaning)."""
    from engine.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=r"`mix_strategy: interleave_once` .*without replacement.*datasets.*"
                                          r"4\.0\.0.*stops on it.*Use `interleave_over`"):
        build_config({"dataset": "a,b", "mix_strategy": "interleave_once"})


def test_val_size_is_read_by_its_value_as_written(caplog):
    """LLaMA-Factory holds out int(val_size) rows above 1 and the fraction val_size up to 1, by the value as the YAML
    gives it: `1` holds out one row, while `1.0` asks `datasets` for every row and is refused there (here it held
    out one row). A val_size of at most 1e-6, a negative one included, holds out nothing there (here a negative one
    was refused and a tiny one held out a row)."""
    from engine.config import ConfigError, build_config
    from engine.data.loader import split_eval

    with pytest.raises(ConfigError, match=r"`val_size: 1.0` is the fraction 1.0 of the rows: all held out.*"
                                          r"`val_size: 1` holds out one row"):
        build_config({"dataset": "a", "val_size": 1.0})
    one = build_config({"dataset": "a", "val_size": 1})
    assert type(one.data.val_size) is int and "val_size: 1\n" in one.to_yaml()  # written again as a count
    assert [len(part) for part in split_eval(list(range(10)), one.data.val_size)] == [9, 1]
    assert build_config({"dataset": "a", "val_size": 2.0}).data.val_size == 2.0  # above 1: a count, as there
    for off in (-0.1, -3, 1e-7):
        caplog.clear()
        with caplog.at_level("WARNING"):
            assert build_config({"dataset": "a", "val_size": off}).data.val_size == 0
        assert f"`val_size: {off}` holds out no rows" in caplog.text
    with pytest.raises(DatasetError, match="val_size 10 leaves no training examples out of 10"):
        split_eval(list(range(10)), 10)  # every row as a count: refused, as `datasets` refuses it there


def _chat(*turns):
    return {"conversations": [dict(zip(("from", "value"), turn)) if len(turn) == 2 else {"from": turn[0]}
                              for turn in turns]}


def test_a_sharegpt_turn_without_text_refuses_the_dataset(tmp_path):
    """LLaMA-Factory's template stops the whole run on a turn whose content is null or missing (`datasets` reads
    both as None): "Expected a string, got None". Here such a turn trained as an empty one. Rows it skips first (a
    wrong role order) are skipped here too, a null system turn is its default system prompt there, and pre-training
    reads the first turn alone (all checked against LLaMA-Factory 0.9.5 with tests/golden/compare_rows)."""
    good = _chat(("human", "hi"), ("gpt", "yo"))
    _write(tmp_path, "null", [good, _chat(("human", "hi"), ("gpt", None))], formatting="sharegpt")
    _write(tmp_path, "missing", [good, good, _chat(("human", "hi"), ("gpt",))], formatting="sharegpt")
    for name, row in (("null", 1), ("missing", 2)):
        with pytest.raises(DatasetError, match=rf"Dataset '{name}', row {row}: turn 1 \('gpt'\) has no text \(its "
                                               r"'value' is null or missing\); LLaMA-Factory stops"):
            load_examples(_args(tmp_path), name, "sft")
    assert [e["text"] for e in load_examples(_args(tmp_path), "null", "pt")] == ["hi", "hi"]
    _write(tmp_path, "first", [_chat(("human", None), ("gpt", "yo"))], formatting="sharegpt")
    with pytest.raises(DatasetError, match=r"row 0: turn 0 \('human'\) has no text \(its 'value'"):
        load_examples(_args(tmp_path), "first", "pt")
    _write(tmp_path, "system", [_chat(("system", None), ("human", "hi"), ("gpt", "yo"))], formatting="sharegpt")
    assert load_examples(_args(tmp_path), "system", "sft")[0]["system"] == ""
    _write(tmp_path, "skipped", [good, _chat(("human", "hi"), ("human", None))], formatting="sharegpt")
    assert len(load_examples(_args(tmp_path), "skipped", "sft")) == 1
    pairs = [{"conversations": [{"from": "human", "value": "hi"}], "chosen": {"from": "gpt", "value": "a"},
              "rejected": {"from": "gpt", "value": None}}]
    _write(tmp_path, "pairs", pairs, formatting="sharegpt", ranking=True,
           columns={"messages": "conversations", "chosen": "chosen", "rejected": "rejected"})
    with pytest.raises(DatasetError, match="row 0: the rejected turn has no text"):
        load_examples(_args(tmp_path), "pairs", "dpo")


def test_formatting_is_read_as_written(tmp_path):
    """LLaMA-Factory looks up its converter by `formatting` as written: `ShareGPT` is "Dataset converter ShareGPT not
    found" there (here any case was read as sharegpt)."""
    rows = [_chat(("human", "hi"), ("gpt", "yo"))]
    _write(tmp_path, "upper", rows, formatting="ShareGPT")
    with pytest.raises(DatasetError, match=r"`formatting: ShareGPT` must be written in lower case, `sharegpt`"):
        load_examples(_args(tmp_path), "upper", "sft")
    _write(tmp_path, "typo", rows, formatting="sharegtp")
    with pytest.raises(DatasetError, match="unknown formatting 'sharegtp'; use alpaca, sharegpt or openai"):
        load_examples(_args(tmp_path), "typo", "sft")
    _write(tmp_path, "lower", rows, formatting="sharegpt")
    assert len(load_examples(_args(tmp_path), "lower", "sft")) == 1


@pytest.mark.parametrize("key", ["columns", "tags", "split", "formatting"])
def test_a_null_entry_key_is_refused(tmp_path, key):
    """LLaMA-Factory reads `columns`, `tags`, `split` and `formatting` as given once the key is there and fails on a
    null (`None.get`, a split dict, no converter None); here a null columns, tags or split was read as left out."""
    _write(tmp_path, "null", [{"instruction": "q", "output": "a"}], **{key: None})
    with pytest.raises(DatasetError, match=rf"dataset 'null': `{key}` is null; give it a value or remove the key"):
        load_examples(_args(tmp_path), "null", "sft")
    fine = tmp_path / "fine"
    fine.mkdir()
    _write(fine, "fine", [{"instruction": "q", "output": "a"}], subset=None, num_samples=None, ranking=None)
    assert len(load_examples(_args(fine), "fine", "sft")) == 1  # read as left out there too


def test_data_files_are_those_llama_factory_reads(tmp_path):
    """LLaMA-Factory types a data file by its extension as written (`.JSON`: "Allowed file types: ..."), and reads
    every entry of a `file_name` folder, refusing one that is not a data file of the folder's type ("File types
    should be identical"), .json and .jsonl being both JSON. Here the case was ignored, other entries were skipped,
    and .json beside .jsonl was refused."""
    from engine.data.readers import read_rows

    rows = [{"instruction": "q", "output": "a"}]
    (tmp_path / "upper.JSON").write_text(json.dumps(rows), encoding="utf-8")
    with pytest.raises(DatasetError, match=r"write its extension in lower case \(.json\); LLaMA-Factory reads only"):
        read_rows(tmp_path / "upper.JSON")
    folder = tmp_path / "parts"
    folder.mkdir()
    (folder / "a.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "b.jsonl").write_text(json.dumps({"instruction": "r", "output": "b"}) + "\n", encoding="utf-8")
    assert [row["instruction"] for row in read_rows(folder)] == ["q", "r"]
    (folder / "README.md").write_text("notes", encoding="utf-8")
    (folder / ".DS_Store").write_bytes(b"\0")
    with pytest.raises(DatasetError, match=r"holds .DS_Store, README.md, not data files .*Move them out"):
        read_rows(folder)


def test_only_a_true_or_false_kto_tag_makes_a_kto_row(tmp_path):
    """LLaMA-Factory's converters make a KTO row only of a boolean tag; a text "true", a 1 or a null makes a plain
    row there, which kto drops ("Cannot find valid samples" when all are such) and sft trains as it is. Here text and
    numbers were read as tags, and a row with a null tag was skipped in every stage."""
    columns = {"prompt": "instruction", "response": "output", "kto_tag": "tag"}
    _write(tmp_path, "text", [{"instruction": f"q{i}", "output": "a", "tag": ["true", "false"][i % 2]}
                              for i in range(4)], columns=columns)
    with pytest.raises(DatasetError, match=r"no usable rows for stage kto .*column 'tag' \(kto_tag\) is \"true\", "
                                           r"not true or false"):
        load_examples(_args(tmp_path), "text", "kto")
    assert len(load_examples(_args(tmp_path), "text", "sft")) == 4  # plain rows, every one trained, as there
    _write(tmp_path, "mixed", [{"instruction": "a", "output": "x", "tag": True},
                               {"instruction": "b", "output": "y", "tag": 0},
                               {"instruction": "c", "output": "z", "tag": None}], columns=columns)
    assert [e["kto_tag"] for e in load_examples(_args(tmp_path), "mixed", "kto")] == [True]
    assert [e["messages"][0]["content"] for e in load_examples(_args(tmp_path), "mixed", "sft")] == ["a", "b", "c"]


def test_a_kto_reply_without_text_is_an_undesirable_empty_reply(tmp_path):
    """LLaMA-Factory 0.9.5 keeps a KTO row (boolean kto_tag) whose reply is empty or null, and its kto tells the
    label by the reply having text: such a row trains as undesirable, on the empty reply (checked with
    tests.golden.compare_rows: the same rows and KL pairs, labels [True, False, False, False, False, True]); a null
    reply tagged false is formatted as it is, and its run stops. Here the rows were skipped (and the data refused
    where a kept row would pair with one of them)."""
    columns = {"prompt": "instruction", "response": "output", "kto_tag": "tag"}
    rows = [{"instruction": "q0", "output": "good", "tag": True}, {"instruction": "q1", "output": None, "tag": True},
            {"instruction": "q2", "output": "", "tag": True}, {"instruction": "q3", "output": "bad", "tag": False},
            {"instruction": "q4", "output": "", "tag": False}]
    _write(tmp_path, "kto", rows, columns=columns)
    examples = load_examples(_args(tmp_path), "kto", "kto")
    assert [(e["messages"][0]["content"], e["messages"][-1]["content"], e["kto_tag"]) for e in examples] == [
        ("q0", "good", True), ("q1", "", False), ("q2", "", False), ("q3", "bad", False), ("q4", "", False)]
    assert [e["messages"][0]["content"] for e in load_examples(_args(tmp_path), "kto", "sft")] == ["q0"]
    chat = [{"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": None}], "tag": True}]
    _write(tmp_path, "chat", chat, formatting="sharegpt", columns={"messages": "conversations", "kto_tag": "tag"})
    assert [(e["messages"][-1]["content"], e["kto_tag"]) for e in load_examples(_args(tmp_path), "chat", "kto")] \
        == [("", False)]
    _write(tmp_path, "null", [*rows, {"instruction": "q5", "output": None, "tag": False}], columns=columns)
    with pytest.raises(DatasetError, match=r"row 5: the reply of this undesirable \(kto_tag false\) row has no text"):
        load_examples(_args(tmp_path), "null", "kto")


def test_a_null_history_turn_or_openai_content_refuses_the_dataset(tmp_path):
    """The same stop in LLaMA-Factory for an alpaca history pair holding a null and for an `openai` entry's turn with
    a null content (a leading system turn and a reply whose tool_calls stand for its text are fine there). Here they
    trained as empty turns."""
    rows = [{"instruction": "q", "output": "a", "history": [["earlier", None]]}]
    _write(tmp_path, "history", rows,
           columns={"prompt": "instruction", "response": "output", "history": "history"})
    with pytest.raises(DatasetError, match=r"row 0: history pair 0's answer has no text \(null in column 'history'\)"):
        load_examples(_args(tmp_path), "history", "sft")
    assert [e["text"] for e in load_examples(_args(tmp_path), "history", "pt")] == ["earlier"]
    tags = {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
            "observation_tag": "tool", "function_tag": "function", "system_tag": "system"}
    call = [{"type": "function", "function": {"name": "f", "arguments": "{}"}}]
    fine = {"messages": [{"role": "system", "content": None}, {"role": "user", "content": "q"},
                         {"role": "assistant", "content": None, "tool_calls": call},
                         {"role": "tool", "content": "42"}, {"role": "assistant", "content": "It is 42."}]}
    null = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": None}]}
    _write(tmp_path, "openai", [fine, null], formatting="openai", columns={"messages": "messages"}, tags=tags)
    with pytest.raises(DatasetError, match=r"row 1: turn 1 \('assistant'\) has no text \(its 'content' is null"):
        load_examples(_args(tmp_path), "openai", "sft")
    _write(tmp_path, "calls", [fine], formatting="openai", columns={"messages": "messages"}, tags=tags)
    assert len(load_examples(_args(tmp_path), "calls", "sft")) == 1


@pytest.mark.parametrize(("keys", "message"), [
    ({"dataset": "a,b", "interleave_probs": "0.5,0.5"}, "but `mix_strategy` is `concat`"),
    ({"dataset": "a,b", "eval_dataset": "c", "mix_strategy": "interleave_under", "interleave_probs": "0.5,0.5"},
     r"gives 2 weights for 1 dataset in `eval_dataset`"),
])
def test_interleave_probs_as_llama_factory_reads_them(keys, message):
    """LLaMA-Factory's DataArguments refuse `interleave_probs` with `mix_strategy: concat`, and a count of weights
    other than the evaluation datasets' (it mixes those with the same weights); both passed here."""
    from engine.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=message):
        build_config(keys)
    build_config({"dataset": "a,b", "eval_dataset": "c,d", "mix_strategy": "interleave_over", "interleave_probs": "0.5,0.5"})


@pytest.mark.parametrize(("keys", "message"), [
    ({"stage": "dpo", "dataset": "a", "train_on_prompt": True}, r"`train_on_prompt: true` applies to `stage: sft` only"),
    ({"stage": "pt", "dataset": "a", "mask_history": True, "predict_with_generate": True, "val_size": 0.1},
     r"`predict_with_generate: true` and `mask_history: true` apply to `stage: sft` only"),
    ({"eval_dataset": "b", "do_predict": True}, r"`do_predict: true` writes generated replies, which needs "
                                                r"`predict_with_generate: true`"),
    ({"stage": "rm", "dataset": "a", "val_size": 0.1, "load_best_model_at_end": True},
     r"`load_best_model_at_end: true` does not work with `stage: rm`"),
    ({"dataset": "a", "do_eval": True}, r"`do_eval: true` needs evaluation data: set `eval_dataset`, or `val_size`"),
    ({"dataset": "a", "do_predict": True, "predict_with_generate": True}, r"`do_predict: true` needs evaluation data"),
])
def test_keys_llama_factory_refuses_as_it_reads_a_training_config(keys, message):
    """LLaMA-Factory's get_train_args refuses these (the sft keys elsewhere, predictions not generated, rm's best
    model reload, an evaluation without data); here they passed: the keys were ignored, do_predict generated anyway,
    and an evaluation without data was skipped or predicted on the training set."""
    from engine.config import ConfigError, build_config

    with pytest.raises(ConfigError, match=message):
        build_config(keys)
    build_config({"dataset": "a", "do_eval": True, "do_predict": True, "predict_with_generate": True, "val_size": 2,
                  "train_on_prompt": True})


def test_a_number_where_text_belongs_is_not_read_as_text(tmp_path):
    """LLaMA-Factory joins and formats text only: a number as the instruction or input ("expected str instance, int
    found"), the system prompt, a history turn or a pre-training text stops it; here each was read as its digits.
    Such rows are skipped with the reason, as rows of other non-text values are (a dataset of nothing else is
    refused); an empty (falsy) instruction, input or system is left out as there."""
    _write(tmp_path, "numbers", [{"instruction": 7, "output": "a"}, {"instruction": "q", "input": 2.5, "output": "b"},
                                 {"instruction": "q", "output": "c", "system": 3},
                                 {"instruction": "q", "output": "d", "history": [[1, "x"]]},
                                 {"instruction": "q", "input": 0, "output": "kept", "system": 0}],
           columns={"prompt": "instruction", "query": "input", "response": "output", "system": "system",
                    "history": "history"})
    examples = load_examples(_args(tmp_path), "numbers", "sft")
    assert [(e["messages"][-2]["content"], e["messages"][-1]["content"], e["system"]) for e in examples] == [
        ("q", "kept", "")]
    _write(tmp_path, "all", [{"instruction": i + 1, "output": "a"} for i in range(3)])
    with pytest.raises(DatasetError, match=r"no usable rows for stage sft .*column 'instruction' is a number, not "
                                           r"text"):
        load_examples(_args(tmp_path), "all", "sft")


@pytest.mark.parametrize("formatting", ["sharegpt", "openai"])
def test_a_preference_answer_with_a_prompt_role_is_skipped_with_the_reason(tmp_path, caplog, formatting):
    """LLaMA-Factory 0.9.5 keeps a ranking row whose chosen or rejected turn has a user role, formats that turn as a
    user prompt and trains it, followed by the assistant header and without an end of turn, as the answer (seen with
    tests.golden.compare_rows: "<|im_start|>user\\ngood<|im_end|>\\n<|im_start|>assistant\\n" as the chosen labels).
    That trains a prompt as the preferred or rejected reply, so the row is skipped here, saying so."""
    role, content, user, reply = ("from", "value", "human", "gpt") if formatting == "sharegpt" else \
        ("role", "content", "user", "assistant")

    def turn(who, text):
        return {role: who, content: text}

    rows = [{"messages": [turn(user, "q0")], "chosen": turn(reply, "good"), "rejected": turn(reply, "bad")},
            {"messages": [turn(user, "q1")], "chosen": turn(user, "good"), "rejected": turn(reply, "bad")},
            {"messages": [turn(user, "q2")], "chosen": turn(reply, "good"), "rejected": turn(user, "bad")}]
    _write(tmp_path, "pairs", rows, formatting=formatting, ranking=True,
           columns={"messages": "messages", "chosen": "chosen", "rejected": "rejected"},
           tags={"role_tag": role, "content_tag": content, "user_tag": user, "assistant_tag": reply})
    assert [e["messages"][0]["content"] for e in load_examples(_args(tmp_path), "pairs", "dpo")] == ["q0"]
    for name in ("chosen", "rejected"):
        assert f"the {name} answer is a {user!r} turn, a prompt role, not a reply; LLaMA-Factory 0.9.5 keeps such a " \
               f"row but formats that turn as a prompt and trains the prompt" in caplog.text


@pytest.mark.parametrize("stage", ["pt", "sft", "kto"])
def test_a_ranking_dataset_is_refused_outside_rm_and_dpo(tmp_path, stage):
    """LLaMA-Factory refuses `ranking: true` for every stage but rm (which dpo loads as): "The dataset is not
    applicable in the current training stage" (data/loader.py:178). Here sft trained on the chosen answers and pt
    on the prompts."""
    _write(tmp_path, "pairs", [{"instruction": "q", "chosen": "good", "rejected": "bad", "tag": True}], ranking=True,
           columns={"prompt": "instruction", "chosen": "chosen", "rejected": "rejected", "kto_tag": "tag"})
    with pytest.raises(DatasetError, match=rf"Dataset 'pairs' holds preference pairs \(`ranking: true`\), which stage "
                                           rf"{stage} cannot use; .*Use stage rm or dpo"):
        load_examples(_args(tmp_path), "pairs", stage)
    assert len(load_examples(_args(tmp_path), "pairs", "dpo")) == 1


def test_only_the_entries_a_config_uses_are_checked(tmp_path, caplog):
    """LLaMA-Factory reads only the dataset_info.json entries a config names (data/parser.py:122-152): a malformed
    entry elsewhere in the file is no error there (here it refused the whole file). The entry used is still checked,
    and the board's list shows the malformed one as broken instead of failing."""
    from engine.data.registry import list_datasets

    _write(tmp_path, "good", [{"instruction": "q", "output": "a"}])
    _write(tmp_path, "bad", [{"instruction": "q", "output": "a"}], columns={"prompt": 1})
    info = tmp_path / "dataset_info.json"
    info.write_text(json.dumps({**json.loads(info.read_text()), "odd": "x.json"}), encoding="utf-8")
    with caplog.at_level("WARNING"):
        assert len(load_examples(_args(tmp_path), "good", "sft")) == 1
    assert "dataset 'bad': `columns.prompt` must be a column name" in caplog.text
    assert "not used here, so only a warning" in caplog.text
    with pytest.raises(DatasetError, match=r"dataset 'bad': `columns.prompt` must be a column name"):
        load_examples(_args(tmp_path), "bad", "sft")
    with pytest.raises(DatasetError, match=r"dataset 'odd' is a str, not an object; write it as \"odd\""):
        load_examples(_args(tmp_path), "odd", "sft")
    listed = list_datasets(tmp_path)
    assert listed["good"]["kind"] == "sft" and listed["good"]["available"]
    assert listed["bad"]["kind"] == listed["odd"]["kind"] == "broken"
    assert "`columns.prompt` must be a column name" in listed["bad"]["problem"]


def test_a_null_column_or_tag_is_read_as_left_out(tmp_path):
    """LLaMA-Factory reads each known column and tag with `obj.get(key)` (data/parser.py:70), so a null one is the key
    left out: `"system": null` reads no system prompt, and `"system_tag": null` leaves a system turn with no role that
    fits, skipping its row (checked against its converter). Here a null was refused as not a column name."""
    _write(tmp_path, "a", [{"instruction": "q", "output": "a", "sys": "S"}],
           columns={"prompt": "instruction", "response": "output", "system": None, "images": None})
    examples = load_examples(_args(tmp_path), "a", "sft")
    assert [(e["messages"], e.get("system") or "") for e in examples] == [
        ([{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}], "")]
    chat = [{"conversations": [{"from": "system", "value": "S"}, {"from": "human", "value": "hi"},
                               {"from": "gpt", "value": "yo"}]},
            {"conversations": [{"from": "human", "value": "hi2"}, {"from": "gpt", "value": "yo2"}]}]
    _write(tmp_path, "c", chat, formatting="sharegpt", tags={"system_tag": None, "role_tag": "from",
           "content_tag": "value", "user_tag": "human", "assistant_tag": "gpt"})
    assert [e["messages"][0]["content"] for e in load_examples(_args(tmp_path), "c", "sft")] == ["hi2"]
