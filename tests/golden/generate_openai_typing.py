"""Regenerate tests/golden/lf_openai_typing.json.gz: the training text LLaMA-Factory 0.9.5 makes of ``openai`` rows whose
tool calls give ``arguments`` as JSON objects and whose ``tools`` column holds objects.

    python -m tests.golden.generate_openai_typing /path/to/lf-venv/bin/python

LLaMA-Factory reads a local file with ``datasets`` (an Arrow table, one type per column for the whole file), so every
call's arguments and every tool get the keys of all of them (the missing ones null, in the order they first appear)
and numbers of a key that is fractional somewhere become floats. :func:`write_data` writes a few such rows as a JSON
list (``calls``), as JSON lines (``calls_lines``) and, for ``split``, the JSON list read through ``train[1:]``; each
case is tokenized by LLaMA-Factory's own ``get_dataset`` (sft, the ``special`` test tokenizer, the template named) and
each training row's input ids and labels are kept, with its decoded text to read, for
tests/engine/test_openai_typing_lf.py. Llama 3's tool prompt is given :data:`tests.golden.generate.FIXED_DATE` as
the day it runs (the test gives ours the date the golden holds). Nothing of LLaMA-Factory is copied here.
"""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.compare_stream import HIDE_MEDIA_LIBS
from tests.golden.generate import FIXED_DATE

JSON_PATH = Path(__file__).with_name("lf_openai_typing.json.gz")
CASES = {
    "qwen": {"dataset": "calls", "template": "qwen"},
    "qwen_lines": {"dataset": "calls_lines", "template": "qwen"},
    "qwen_split": {"dataset": "calls_split", "template": "qwen"},
    "llama3": {"dataset": "calls", "template": "llama3"},
    "llama3_empty_tools": {"dataset": "no_tools", "template": "llama3"},
    "qwen_empty_tools": {"dataset": "no_tools", "template": "qwen"},
    "qwen_long_floats": {"dataset": "long_floats", "template": "qwen"},
    "qwen_long_floats_lines": {"dataset": "long_floats_lines", "template": "qwen"},
    "qwen_long_floats_list_jsonl": {"dataset": "long_floats_list_jsonl", "template": "qwen"},
}
"""Each case: its keys over the common sft config (cutoff_len 1024, one preprocessing worker)."""

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "description": "Weather of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}},
    {"type": "function", "function": {"name": "calc", "parameters": {
        "type": "object", "properties": {"x": {"type": "array", "items": {"type": "number"}}, "n": {"type": "number"}}}}},
]


def _call(name: str, arguments: dict, call_id: str | None = None) -> dict:
    call = {"type": "function", "function": {"name": name, "arguments": arguments}}
    return {"id": call_id, **call} if call_id else call


def rows() -> list[dict]:
    """Four rows: two calls in one reply, keys differing from call to call (and given in another order), whole and
    fractional numbers for one key, a null argument, a tools list whose declarations have different keys."""
    return [
        {"messages": [
            {"role": "user", "content": "Weather in Paris, and 1 plus 2?"},
            {"role": "assistant", "content": "", "tool_calls": [
                _call("get_weather", {"city": "Paris"}, "c1"), _call("calc", {"x": [1, 2], "n": 3}, "c2")]},
            {"role": "tool", "content": "{\"sky\": \"sunny\"}"}, {"role": "tool", "content": "3"},
            {"role": "assistant", "content": "Sunny; 3."}], "tools": TOOLS},
        {"messages": [
            {"role": "user", "content": "Half of 5?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"function": {"arguments": {"n": 2.5, "x": [0.5], "round": None}, "name": "calc"}, "type": "function"}]},
            {"role": "tool", "content": "2.5"}, {"role": "assistant", "content": "2.5."}], "tools": TOOLS[1:]},
        {"messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Rome?"},
            {"role": "assistant", "content": "", "tool_calls": [_call("get_weather", {"unit": "c", "city": "Rome"})]},
            {"role": "tool", "content": "{\"sky\": \"rain\"}"}, {"role": "assistant", "content": "Rain."}],
         "tools": TOOLS[:1]},
        {"messages": [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}], "tools": TOOLS},
    ]


LONG_FLOATS = [0.7071067811865476, 1.2345678901234567, 0.3333333333333333, 0.1234567891]
"""Fractions as arguments and in a tools schema: pandas' JSON parser (LLaMA-Factory's reader of a JSON list) rounds all
but the last (``0.7071067811865476`` -> ``0.707106781186547``); pyarrow's (its reader of JSON lines) reads them exactly."""


def long_float_rows(with_nan: bool) -> list[dict]:
    """Two rows whose tool call arguments and tools hold :data:`LONG_FLOATS` (and, ``with_nan``, a NaN argument,
    which pandas reads as null; pyarrow refuses NaN, so the JSON lines file has none)."""
    tool = {"type": "function", "function": {"name": "scale", "parameters": {"type": "object", "properties": {
        "factor": {"type": "number", "default": LONG_FLOATS[0], "maximum": LONG_FLOATS[1]}}}}}
    arguments = {"factor": LONG_FLOATS[2], "offset": LONG_FLOATS[3], "steps": [LONG_FLOATS[1], 2.5]}
    if with_nan:
        arguments["missing"] = float("nan")
    return [
        {"messages": [
            {"role": "user", "content": "Scale it."},
            {"role": "assistant", "content": "", "tool_calls": [_call("scale", arguments)]},
            {"role": "tool", "content": "done"}, {"role": "assistant", "content": "Scaled."}], "tools": [tool]},
        {"messages": [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}], "tools": [tool]},
    ]


def write_data(folder: Path) -> Path:
    """The rows of :func:`rows` as ``calls.json`` and ``calls.jsonl``, ``no_tools.json`` (a row whose tools are an
    empty list, which LLaMA-Factory writes as the text ``[]``, and one without tools), :func:`long_float_rows` as
    ``long_floats.json``, as JSON lines in ``long_floats.jsonl`` and as a list in ``long_floats_list.jsonl`` (which
    ``datasets`` reads as a .json list), and their dataset_info.json in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    data = rows()
    (folder / "calls.json").write_text(json.dumps(data), encoding="utf-8")
    (folder / "calls.jsonl").write_text("".join(json.dumps(row) + "\n" for row in data), encoding="utf-8")
    plain = [{"messages": [{"role": "user", "content": "Hi."}, {"role": "assistant", "content": "Hello."}], "tools": []},
             {"messages": [{"role": "user", "content": "Bye."}, {"role": "assistant", "content": "Bye."}]}]
    (folder / "no_tools.json").write_text(json.dumps(plain), encoding="utf-8")
    (folder / "long_floats.json").write_text(json.dumps(long_float_rows(True), indent=1), encoding="utf-8")
    (folder / "long_floats.jsonl").write_text("".join(json.dumps(row) + "\n" for row in long_float_rows(False)),
                                              encoding="utf-8")
    (folder / "long_floats_list.jsonl").write_text(json.dumps(long_float_rows(True)), encoding="utf-8")
    entry = {"formatting": "openai", "columns": {"messages": "messages", "tools": "tools"},
             "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user", "assistant_tag": "assistant",
                      "observation_tag": "tool", "function_tag": "function_call", "system_tag": "system"}}
    info = {"calls": {"file_name": "calls.json", **entry}, "calls_lines": {"file_name": "calls.jsonl", **entry},
            "calls_split": {"file_name": "calls.json", "split": "train[1:]", **entry},
            "no_tools": {"file_name": "no_tools.json", **entry},
            "long_floats": {"file_name": "long_floats.json", **entry},
            "long_floats_lines": {"file_name": "long_floats.jsonl", **entry},
            "long_floats_list_jsonl": {"file_name": "long_floats_list.jsonl", **entry}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


THEIRS = HIDE_MEDIA_LIBS + r"""
import datetime, json, sys
from llamafactory.data import tool_utils
class FixedDatetime(datetime.datetime):  # Llama 3's tool prompt writes the day it runs: a fixed one (FIXED_DATE)
    @classmethod
    def now(cls, tz=None):
        return datetime.datetime.strptime(sys.argv[2], "%Y-%m-%d")
tool_utils.datetime = FixedDatetime
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
args = json.loads(sys.argv[1])
model_args, data_args, training_args, _, _ = get_train_args(args)
module = load_tokenizer(model_args)
template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
ds = get_dataset(template, model_args, data_args, training_args, stage="sft", **module)["train_dataset"]
print(json.dumps([{"input_ids": list(ids), "labels": list(labels), "text": module["tokenizer"].decode(list(ids))}
                  for ids, labels in zip(ds["input_ids"], ds["labels"])]))
"""


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
            args = {"model_name_or_path": str(tokenizer), "stage": "sft", "do_train": True, "finetuning_type": "lora",
                    "dataset_dir": str(data), "cutoff_len": 1024, "preprocessing_num_workers": 1,
                    "overwrite_cache": True, "report_to": "none", "output_dir": str(Path(tmp) / "out" / case), **keys}
            proc = subprocess.run([python, "-c", THEIRS, json.dumps(args), FIXED_DATE.strftime("%Y-%m-%d")], env=env,
                                  capture_output=True, text=True)
            if proc.returncode:
                raise SystemExit(f"{case}: LLaMA-Factory failed:\n{proc.stderr[-3000:]}")
            record["cases"][case] = {"config": keys, "rows": json.loads(proc.stdout.strip().splitlines()[-1])}
    with gzip.open(JSON_PATH, "wt", encoding="utf-8") as handle:
        handle.write(json.dumps(record) + "\n")


if __name__ == "__main__":
    main()
