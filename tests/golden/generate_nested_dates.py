"""Regenerate tests/golden/lf_nested_dates.json: what LLaMA-Factory 0.9.5 makes of data files whose nested texts are
all ISO dates.

    python -m tests.golden.generate_nested_dates /path/to/lf-venv/bin/python

``datasets`` reads JSON lines with pyarrow's JSON reader, which types a field by its path over the whole file: where
every value of a nested field is ISO date text (``2024-01-05``, ``2024-01-05 10:00:00``, ``...T10:00:00Z``), as
every turn's ``value`` of ``turns.jsonl`` or every history item of ``history.jsonl``, the field holds timestamps. A
turn, history item or preference answer that is one stops LLaMA-Factory (its template's "Expected a string", or
pyarrow refusing a column of dates and texts), as do tool calls or tools holding one (``json.dumps``); a field that
also holds other text (``half_turns.jsonl``), or one LLaMA-Factory never reads (``meta.jsonl``), trains as written,
and so does a JSON list of the same rows (pandas keeps nested values as they are). Each case is tokenized by
LLaMA-Factory's own ``get_dataset`` (the ``special`` test tokenizer, the qwen template): its rows' ids (sft and pt:
input ids and labels, rm: chosen and rejected input ids), or the last line of its error; for
tests/engine/test_nested_dates_lf.py. Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS

JSON_PATH = Path(__file__).with_name("lf_nested_dates.json")

THEIRS = HIDE_MEDIA_LIBS + r"""
import json, sys
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
model_args, data_args, training_args, _, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
ds = get_dataset(template, model_args, data_args, training_args, stage=args["stage"], **module)["train_dataset"]
keys = ("chosen_input_ids", "rejected_input_ids") if args["stage"] == "rm" else ("input_ids", "labels")
print(json.dumps([{key: list(row[key]) for key in keys} for row in ds]))
"""
"""LLaMA-Factory's side: the train rows' ids of one config (given as JSON)."""


def _turns(*values: str | None, system: str | None = None) -> dict:
    turns = [{"from": "system", "value": system}] if system else []
    return {"conversations": turns + [{"from": ("human", "gpt")[i % 2], "value": v} for i, v in enumerate(values)]}


def _call(day: str) -> dict:
    return {"type": "function", "function": {"name": "book", "arguments": {"day": day}}}


def _chat(calls: list[dict], tools: list | None = None) -> dict:
    row = {"messages": [{"role": "user", "content": "Book it."}, {"role": "assistant", "content": "", "tool_calls": calls},
                        {"role": "tool", "content": "booked"}, {"role": "assistant", "content": "Done."}]}
    return {**row, "tools": tools} if tools is not None else row


TOOL = {"type": "function", "function": {"name": "book", "description": "Book a day.", "parameters": {
    "type": "object", "properties": {"day": {"type": "string", "default": "2024-01-05"}}}}}

FILES: dict[str, list[dict]] = {
    "turns": [_turns("2024-01-05", "2024-01-05 10:00:00"),
              _turns("2024-02-06T10:30:00Z", "2024-02-07", system="2024-03-01")],
    "half_turns": [_turns("2024-01-05", "In winter."), _turns("2024-02-06 10:30:00", "Later.", system="Be brief.")],
    "meta": [{**_turns("When?", "Soon."), "meta": {"created": "2024-01-05"}, "tags": ["2024-01-05", "2024-02-06"]}],
    "history": [{"instruction": "Hi", "output": "Hello", "history": []},
                {"instruction": "When?", "output": "Then.", "history": [["2024-01-05", "2024-01-06 08:00:00"]]}],
    "half_history": [{"instruction": "When?", "output": "Then.", "history": [["2024-01-05", "A winter day."]]}],
    "pairs": [{**_turns("Which day?"), "chosen": {"from": "gpt", "value": "2024-01-05"},
               "rejected": {"from": "gpt", "value": "No idea."}}],
    "calls": [_chat([_call("2024-01-05")]), _chat([_call("2024-02-06")])],
    "half_calls": [_chat([_call("2024-01-05"), _call("today")])],
    "tools": [_chat([_call("today")], [TOOL])],
}
"""Each data file's rows (written as JSON lines, and a few as a JSON list too: :data:`LISTS`)."""
LISTS = ("turns", "history", "pairs", "calls")

OPENAI = {"formatting": "openai", "columns": {"messages": "messages", "tools": "tools"},
          "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                   "observation_tag": "tool", "function_tag": "function_call", "system_tag": "system"}}
ENTRIES = {"turns": {"formatting": "sharegpt"}, "half_turns": {"formatting": "sharegpt"},
           "meta": {"formatting": "sharegpt"},
           "history": {"columns": {"prompt": "instruction", "response": "output", "history": "history"}},
           "half_history": {"columns": {"prompt": "instruction", "response": "output", "history": "history"}},
           "pairs": {"formatting": "sharegpt", "ranking": True,
                     "columns": {"messages": "conversations", "chosen": "chosen", "rejected": "rejected"}},
           "calls": OPENAI, "half_calls": OPENAI, "tools": OPENAI}
"""Each file's dataset_info.json entry (its JSON lines are dataset ``NAME``, its JSON list ``NAME_list``)."""

CASES = {**{name: {"dataset": name, "stage": "sft"} for name in FILES if name != "pairs"},
         **{f"{name}_list": {"dataset": f"{name}_list", "stage": "sft"} for name in LISTS if name != "pairs"},
         "pairs": {"dataset": "pairs", "stage": "rm"}, "pairs_list": {"dataset": "pairs_list", "stage": "rm"},
         "turns_pt": {"dataset": "turns", "stage": "pt"}}
"""Each case: its keys over the common config (qwen template, cutoff_len 1024, one preprocessing worker)."""


def write_data(folder: Path) -> Path:
    """:data:`FILES` as ``NAME.jsonl`` (and :data:`LISTS` as ``NAME.json`` lists) with their dataset_info.json in
    ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    info = {}
    for name, rows in FILES.items():
        (folder / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
        info[name] = {"file_name": f"{name}.jsonl", **ENTRIES[name]}
        if name in LISTS:
            (folder / f"{name}.json").write_text(json.dumps(rows, indent=1), encoding="utf-8")
            info[f"{name}_list"] = {"file_name": f"{name}.json", **ENTRIES[name]}
    (folder / "dataset_info.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    return folder


def main() -> None:
    from tests.golden.tokenizers import load

    python = sys.argv[1]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "DISABLE_VERSION_CHECK": "1", "HF_HUB_OFFLINE": "1"}
    record: dict = {"cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        data = write_data(Path(tmp) / "data")
        tokenizer = Path(tmp) / "tok"
        load("special").save_pretrained(tokenizer)
        for case, keys in CASES.items():
            args = {"model_name_or_path": str(tokenizer), "do_train": True, "finetuning_type": "lora",
                    "template": "qwen", "dataset_dir": str(data), "cutoff_len": 1024, "preprocessing_num_workers": 1,
                    "overwrite_cache": True, "report_to": "none", "output_dir": str(Path(tmp) / "out" / case), **keys}
            proc = subprocess.run([python, "-c", THEIRS, json.dumps(args)], env=env, capture_output=True, text=True)
            if proc.returncode:
                record["cases"][case] = {"config": keys, "error": proc.stderr.strip().splitlines()[-1]}
            else:
                record["cases"][case] = {"config": keys, "rows": json.loads(proc.stdout.strip().splitlines()[-1])}
    JSON_PATH.write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
