"""``streaming: true`` with a set without a ``kto_tag`` column mixed with a KTO set under ``stage: kto`` streams
LLaMA-Factory 0.9.5's rows in its order (tests/golden/lf_kto_untagged_stream.json, from
tests/golden/generate_kto_untagged_stream.py): the untagged rows lend their replies to the KL pairs of their map
batch and are dropped, as without streaming (test_kto_untagged_mix.py). Here the stream refused the whole mix ("has no
kto_tag column"), each set being checked alone."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from engine.config import build_config
from engine.data import get_dataset
from engine.templates import get_template
from tests.golden.compare_stream import _lf_row
from tests.golden.generate_kto_untagged import write_data
from tests.golden.generate_kto_untagged_stream import JSON_PATH
from tests.golden.tokenizers import load

GOLDEN = json.loads(Path(JSON_PATH).read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def tokenizer():
    return load("special")


def _streamed(rows, epoch, limit=None) -> list:
    rows.set_epoch(epoch)
    out = []
    for row in rows:  # one shard (dataloader_num_workers 1): the order a single data loader worker yields
        out.append(_lf_row(row, "kto"))
        if limit is not None and len(out) >= limit:
            break
    return out


@pytest.mark.parametrize("case", sorted(GOLDEN["cases"]))
def test_streamed_rows_are_llama_factorys(case, tokenizer, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    data = write_data(tmp_path / "data")
    keys = GOLDEN["cases"][case]["config"]
    cfg = build_config({**GOLDEN["common"], "dataset_dir": str(data), "output_dir": str(tmp_path / "out"), **keys})
    bundle = get_dataset(cfg, tokenizer, get_template("empty", tokenizer))
    expected = GOLDEN["cases"][case]["rows"]
    assert _streamed(bundle.train, 0) == expected["epoch 0"]
    assert _streamed(bundle.train, 1, GOLDEN["epoch1_rows"]) == expected["epoch 1"]
    if "eval" in expected:
        assert [_lf_row(row, "kto") for row in bundle.eval] == expected["eval"]
    else:
        assert bundle.eval is None


def test_the_untagged_set_trains_no_row(tokenizer, tmp_path, monkeypatch):
    """Every streamed row is one of the KTO set's (its prompts are the tagged set's), and an untagged set alone is
    still refused, naming the missing column."""
    from engine.data import DatasetError

    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    data = write_data(tmp_path / "data")
    template = get_template("empty", tokenizer)
    cfg = build_config({**GOLDEN["common"], "dataset_dir": str(data), "dataset": "plain,tagged"})
    rows = _streamed(get_dataset(cfg, tokenizer, template).train, 0)
    assert len(rows) == 8 and all(" t" in tokenizer.decode(row["input_ids"]) for row in rows)
    with pytest.raises(DatasetError, match=r"dataset 'plain' has no kto_tag column"):
        get_dataset(build_config({**GOLDEN["common"], "dataset_dir": str(data), "dataset": "plain"}), tokenizer,
                    template)
