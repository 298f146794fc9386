"""A `cutoff_len` below 8 is taken, as LLaMA-Factory 0.9.5 takes it, with the same rows.

LLaMA-Factory has no lower bound on ``cutoff_len`` (hparams/data_args.py:46): each (prompt, reply) pair gets its
share from ``infer_seqlen`` (data/processor/processor_utils.py:76-88), and an sft row left without a trained token
is kept (processor/supervised.py:72-106). Packing takes one token off first (data_args.py:188-189), so
``cutoff_len: 1`` with packing leaves nothing: pt fails there with a ZeroDivisionError (processor/pretrain.py:45),
and ours refuses the config. A set where no row has a token left to train on is refused too: such a run learns
nothing (a causal LM loss over no tokens is NaN).

The expected rows were produced by LLaMA-Factory 0.9.5 itself (``tests/golden/compare_rows.py``'s LLaMA-Factory
side, with the committed ``family`` qwen3 test tokenizer saved to a folder) on the rows of :func:`_dataset`, kept as
digests of the rows' ids as compare_rows lists them, with the number of trained tokens where there are labels.
"""

from __future__ import annotations

import json
import logging

import pytest
from golden.stage_rows import digest, qwen3_rows

from engine.config import ConfigError, build_config
from engine.data.errors import DatasetError


def _dataset(folder) -> str:
    alpaca = [{"instruction": "Hi", "input": "", "output": "Hello there, how are you?"},
              {"instruction": "What is two plus two? Answer briefly.", "input": "", "output": "Four."},
              {"instruction": "Say yes", "input": "please", "output": "Yes."}]
    multi = [{"messages": [{"role": "user", "content": "Hello!"}, {"role": "assistant", "content": "Hi, how can I help?"},
                           {"role": "user", "content": "Two plus two?"}, {"role": "assistant", "content": "Four."}]}]
    ranked = [{"instruction": "Hi", "input": "", "chosen": "Hello there.", "rejected": "Go away now, please."},
              {"instruction": "What is two plus two? Answer briefly.", "input": "", "chosen": "Four.",
               "rejected": "Five."}]
    kto = [{"instruction": "Hi", "input": "", "output": "Hello there.", "kto_tag": True},
           {"instruction": "What is two plus two?", "input": "", "output": "Five.", "kto_tag": False}]
    info = {"tiny_alpaca": {"file_name": "alpaca.json"},
            "tiny_multi": {"file_name": "multi.json", "formatting": "sharegpt", "columns": {"messages": "messages"},
                           "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                    "assistant_tag": "assistant"}},
            "tiny_ranked": {"file_name": "ranked.json", "ranking": True,
                            "columns": {"prompt": "instruction", "query": "input", "chosen": "chosen",
                                        "rejected": "rejected"}},
            "tiny_kto": {"file_name": "kto.json", "columns": {"prompt": "instruction", "query": "input",
                                                              "response": "output", "kto_tag": "kto_tag"}}}
    for name, rows in (("alpaca", alpaca), ("multi", multi), ("ranked", ranked), ("kto", kto)):
        (folder / f"{name}.json").write_text(json.dumps(rows), encoding="utf-8")
    (folder / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return str(folder)


# (stage, dataset, cutoff_len, more config) -> LLaMA-Factory 0.9.5's rows: digests, trained tokens per row (sft)
CASES = {
    "sft-3": ("sft", "tiny_alpaca", 3, {}),
    "sft-5": ("sft", "tiny_alpaca", 5, {}),
    "sft-7-mask_history": ("sft", "tiny_multi", 7, {"mask_history": True}),
    "sft-6-packing": ("sft", "tiny_alpaca", 6, {"packing": True}),
    "dpo-5": ("dpo", "tiny_ranked", 5, {}),
    "kto-5": ("kto", "tiny_kto", 5, {}),
    "pt-3": ("pt", "tiny_alpaca", 3, {}),
}
LF_ROWS: dict[str, tuple[list[str], list[int] | None]] = {
    "dpo-5": (["f38ef26d3fbc773f", "b48bcd7478e60638"], None),
    "kto-5": (["fd727f85d90135a3", "b48bcd7478e60638"], None),
    "pt-3": (["07215b5a344e93ca", "3cba6ed28a2b8be5", "3e8cd02f619b664d", "bb286aa990ba5e3d", "35ea0da6553c05d3",
              "634ee8717c1c3470", "ec238c7e191fd053", "7ac89b8c6f58ebfa", "3f3cecdb8ad1b431"], None),
    "sft-3": (["57ef4f204a8407af", "57ef4f204a8407af", "928a6595fddd461d"], [1, 1, 0]),  # the empty thought's first
    "sft-5": (["68a9c124397ce6b4", "82296fe6889a5c7a", "c1e5839c9f956fd2"], [2, 1, 1]),  # token trained at 3
    "sft-6-packing": (["c1e5839c9f956fd2", "82296fe6889a5c7a", "68a9c124397ce6b4"], [1, 1, 2]),
    "sft-7-mask_history": (["cd68f1be4377337c"], [3]),
}


def _config(folder, stage, dataset, cutoff, more):
    return build_config({"model_name_or_path": "unused", "dataset_dir": _dataset(folder), "dataset": dataset,
                         "stage": stage, "template": "qwen3", "cutoff_len": cutoff, **more})


def _rows(cfg) -> list:
    return qwen3_rows(cfg)[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_are_llamafactorys(tmp_path, case):
    stage, dataset, cutoff, more = CASES[case]
    rows = _rows(_config(tmp_path, stage, dataset, cutoff, more))
    digests, trained = LF_ROWS[case]
    if trained is not None:
        assert [sum(label != -100 for label in row[1]) for row in rows] == trained
    assert [digest(row) for row in rows] == digests


def test_a_tiny_cutoff_is_taken_with_a_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="engine.config.cross_checks"):
        cfg = _config(tmp_path, "sft", "tiny_alpaca", 4, {})
    assert cfg.data.cutoff_len == 4
    assert "`cutoff_len: 4` keeps at most 4 tokens of each row" in caplog.text


def test_rows_left_untrained_are_kept_with_a_warning(tmp_path, caplog):
    """At cutoff_len 3 the first row's prompt takes every token (LLaMA-Factory keeps the row, all labels masked)."""
    with caplog.at_level(logging.WARNING):
        rows = _rows(_config(tmp_path, "sft", "tiny_alpaca", 3, {}))
    assert len(rows) == 3 and any(all(label == -100 for label in row[1]) for row in rows)
    assert "1 of 3 train rows has no trained token left after cutting to cutoff_len=3; it is kept" in caplog.text


def test_messages_after_packing_quote_the_cutoff_len_written(tmp_path, caplog):
    """Packing keeps one token of cutoff_len free (LLaMA-Factory's data_args.py:188-189); a message quotes the
    value the config gives, and says so, instead of the one less it cuts to (here `cutoff_len=3` for 4)."""
    with caplog.at_level(logging.WARNING):
        _rows(_config(tmp_path, "sft", "tiny_alpaca", 4, {"packing": True}))
    assert ("cutting to cutoff_len=4 (packing keeps one token of it free, as LLaMA-Factory does, so rows are cut to "
            "3)") in caplog.text
    assert "cutoff_len=3" not in caplog.text.replace("cut to 3", "")
    with pytest.raises(DatasetError, match=r"after cutting to cutoff_len=2 \(packing keeps one token of it free"):
        _rows(_config(tmp_path, "sft", "tiny_alpaca", 2, {"packing": True}))


def test_no_token_to_train_on_anywhere_is_refused(tmp_path):
    with pytest.raises(DatasetError, match=r"None of the 3 train examples has a token to train on .*NaN.*Raise "
                                           r"cutoff_len"):
        _rows(_config(tmp_path, "sft", "tiny_alpaca", 1, {}))


@pytest.mark.parametrize("more", [{"packing": True}, {"neat_packing": True}])
def test_packing_with_cutoff_len_1_is_refused(tmp_path, more):
    with pytest.raises(ConfigError, match=r"`cutoff_len: 1` with `(neat_)?packing: true` leaves no token per row.*"
                                          r"raise cutoff_len to 2 or more"):
        _config(tmp_path, "pt", "tiny_alpaca", 1, more)


def test_zero_is_below_the_minimum():
    with pytest.raises(ConfigError, match=r"`cutoff_len: 0` is below the minimum 1; raise it"):
        build_config({"model_name_or_path": "unused", "cutoff_len": 0})
