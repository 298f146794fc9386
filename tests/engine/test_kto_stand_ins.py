"""KTO rows that are skipped still lend their reply to the KL pairs, as in LLaMA-Factory 0.9.5, which forms the
mismatched pairs over a preprocessing batch before it drops the rows it cannot use."""

from __future__ import annotations

import json

import pytest

from engine.config import build_config
from engine.data import get_dataset
from engine.data.errors import DatasetError
from engine.data.kto_pairs import kl_partners
from engine.data.tokenize import infer_seqlen, prompt_and_reply
from engine.templates import get_template

INFO = {"kto_skips": {"file_name": "kto_skips.json", "formatting": "sharegpt",
                      "columns": {"messages": "messages", "kto_tag": "label"},
                      "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                               "assistant_tag": "assistant"}}}


def _rows(count: int = 14) -> list[dict]:
    rows = []
    for i in range(count):
        rows.append({"messages": [{"role": "user", "content": f"question {i} " + "why " * (i % 4)},
                                  {"role": "assistant", "content": f"answer {i} " + "because " * (i % 5)}],
                     "label": i % 3 != 0})
    return rows


def _write(tmp_path, rows):
    (tmp_path / "kto_skips.json").write_text(json.dumps(rows), encoding="utf-8")
    (tmp_path / "dataset_info.json").write_text(json.dumps(INFO), encoding="utf-8")


def _config(tmp_path, **extra):
    return build_config({"model_name_or_path": "unused", "dataset_dir": str(tmp_path), "dataset": "kto_skips",
                         "stage": "kto", "template": "chatml", "cutoff_len": 64, **extra})


@pytest.mark.parametrize("batch_size", [1000, 4])
def test_skipped_rows_lend_their_reply_to_the_kl_pairs(tmp_path, chat_tokenizer, monkeypatch, batch_size):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = _rows()
    rows[3]["label"] = None  # no boolean kto_tag: skipped, but its reply is the next row's KL completion
    del rows[7]["label"]
    rows[10]["messages"] = rows[10]["messages"][:1]  # broken (no reply): skipped; the next row is skipped too,
    rows[11]["label"] = None  # so no kept row pairs with it
    _write(tmp_path, rows)
    template = get_template("chatml")
    train = get_dataset(_config(tmp_path, preprocessing_batch_size=batch_size), chat_tokenizer, template).train
    kept = [i for i in range(len(rows)) if i not in (3, 7, 10, 11)]
    assert len(train) == len(kept) and "kl_stand_in" not in train.column_names
    partners = kl_partners(len(rows), batch_size)  # over every row, the skipped ones included
    expected = []
    for i in kept:
        own = rows[i]["messages"]
        prompt, reply = prompt_and_reply(chat_tokenizer, template, {"messages": own[:1], "system": "", "tools": ""},
                                         rows[partners[i]]["messages"][-1])
        keep, reply_keep = infer_seqlen(len(prompt), len(reply), 64)
        expected.append(prompt[:keep] + reply[:reply_keep])
    got = [list(p) + list(c) for p, c in zip(train["KL_prompt_ids"], train["KL_completion_ids"])]
    assert got == expected
    assert any(partners[i] in (3, 7, 11) for i in kept)  # a kept row pairs with a skipped one on this data


def test_a_kept_row_whose_partner_has_no_reply_is_refused(tmp_path, chat_tokenizer, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = _rows(6)
    rows[2]["messages"] = rows[2]["messages"][:1]  # LLaMA-Factory pairs row 3 with it and fails (IndexError)
    _write(tmp_path, rows)
    with pytest.raises(DatasetError, match=r"no reply to give .*: dataset `kto_skips` row 2\. "):
        get_dataset(_config(tmp_path), chat_tokenizer, get_template("chatml"))


def test_without_skipped_rows_nothing_changes(tmp_path, chat_tokenizer, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    rows = _rows(6)
    _write(tmp_path, rows)
    train = get_dataset(_config(tmp_path), chat_tokenizer, get_template("chatml")).train
    assert len(train) == 6 and list(train["KL_completion_ids"][1]) == list(train["completion_ids"][0])
