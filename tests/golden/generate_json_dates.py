"""Regenerate tests/golden/lf_json_dates.json: what LLaMA-Factory 0.9.5 makes of a ``.json`` list whose columns are
named like dates (``date``, ``created_at``, ``modified``).

    python -m tests.golden.generate_json_dates /path/to/lf-venv/bin/python

``datasets`` reads such a file with pandas' ``read_json``, which turns a column named like a date into timestamps
where all of its values parse: ``created_at`` here (a null included) becomes dates, so a reply taken from it is no
text and every row is dropped (LLaMA-Factory stops: no valid samples; mixed with another dataset it stops too, on
features it cannot align), and a system prompt taken from it stops LLaMA-Factory (TypeError); ``date`` (one value is
``soon``) and ``modified`` (two date formats) stay text and train as written. JSON lines (:data:`LINES`) go to
pyarrow's reader, which makes timestamps of any column of ISO date texts: a reply from ``when`` drops every row. Each case is tokenized by LLaMA-Factory's own
``get_dataset`` (sft, the ``special`` test tokenizer, the qwen template): its rows' input ids and labels with their
decoded text, or the last line of its error; for tests/engine/test_json_dates_lf.py. Nothing of LLaMA-Factory is
copied here.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from tests.golden.generate_openai_typing import THEIRS

JSON_PATH = Path(__file__).with_name("lf_json_dates.json")
CASES = {
    "reply_from_dates": {"dataset": "dated_reply"},
    "mixed": {"dataset": "mixed"},
    "system_from_dates": {"dataset": "dated_system"},
    "lines_mixed": {"dataset": "lines_mixed"},
    "lines_reply_from_dates": {"dataset": "lines_dated_reply"},
}
"""Each case: its keys over the common sft config (qwen template, cutoff_len 1024, one preprocessing worker)."""

ROWS = [
    {"instruction": "When was it made?", "created_at": "2024-01-05", "date": "2024-03-01",
     "modified": "2024-01-05T10:00:00Z", "output": "In winter."},
    {"instruction": "And this one?", "created_at": "2024-02-06 10:30", "date": "soon", "modified": "2024-01-06",
     "output": "Later."},
    {"instruction": "Plain?", "created_at": None, "date": "2024-03-02", "modified": "2024-02-01", "output": "Yes."},
]

LINES = [
    {"instruction": "Say when.", "output": "2024-01-05", "when": "2024-01-05"},
    {"instruction": "Again.", "output": "2024-02-06 10:00:00", "when": None},
    {"instruction": "And now?", "output": "fine", "when": "2024-03-01T10:00:00Z"},
]
"""JSON lines: pyarrow makes ``when`` (ISO dates and a null, whatever its name) timestamps; ``output`` (``fine``)
stays text."""


def write_data(folder: Path) -> Path:
    """:data:`ROWS` as ``dated.json`` (a JSON list), :data:`LINES` as ``dated_lines.jsonl`` and their
    dataset_info.json in ``folder``: ``dated_reply`` takes the reply from ``created_at``, ``mixed`` the prompt from
    ``date`` and the query from ``modified``, ``dated_system`` the system prompt from ``created_at``;
    ``lines_mixed`` the reply from ``output``, ``lines_dated_reply`` from ``when``."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "dated.json").write_text(json.dumps(ROWS, indent=1), encoding="utf-8")
    info = {
        "dated_reply": {"file_name": "dated.json", "columns": {"prompt": "instruction", "response": "created_at"}},
        "mixed": {"file_name": "dated.json", "columns": {"prompt": "date", "query": "modified", "response": "output"}},
        "dated_system": {"file_name": "dated.json",
                         "columns": {"prompt": "instruction", "response": "output", "system": "created_at"}},
    }
    (folder / "dated_lines.jsonl").write_text("".join(json.dumps(row) + "\n" for row in LINES), encoding="utf-8")
    info["lines_mixed"] = {"file_name": "dated_lines.jsonl", "columns": {"prompt": "instruction", "response": "output"}}
    info["lines_dated_reply"] = {"file_name": "dated_lines.jsonl",
                                 "columns": {"prompt": "instruction", "response": "when"}}
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
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
            args = {"model_name_or_path": str(tokenizer), "stage": "sft", "do_train": True, "finetuning_type": "lora",
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
