"""Chunked tokenization into a memory-mapped Arrow file: the same rows and stats as all at once."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import build_config
from engine.data import load_examples
from engine.data.parallel import tokenize_parallel
from engine.data.stream import tokenize_to_arrow
from engine.data.tokenize import TokenizeOptions
from engine.templates import get_template

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "data"
CASES = [("sft", "alpaca_small,sharegpt_small"), ("dpo", "dpo_small"), ("rm", "dpo_small"), ("kto", "kto_small")]


@pytest.mark.parametrize("workers", [None, 2])
@pytest.mark.parametrize(("stage", "names"), CASES)
def test_chunks_give_the_rows_and_stats_of_one_pass(stage, names, workers, chat_tokenizer):
    cfg = build_config({"dataset": names, "dataset_dir": str(FIXTURES)})
    examples = list(load_examples(cfg.data, cfg.data.dataset, stage)) * 4  # several chunks of 3
    assert len(examples) > 6
    template = get_template("chatml", chat_tokenizer)
    opts = TokenizeOptions(cutoff_len=48)
    columns, stats, _ = tokenize_parallel(examples, stage, chat_tokenizer, template, opts, None)
    dataset, chunked_stats = tokenize_to_arrow(examples, stage, chat_tokenizer, template, opts, workers, chunk_rows=3)
    assert chunked_stats == stats
    assert dataset.to_dict() == columns
    assert dataset.cache_files  # memory-mapped from the Arrow file, not held in memory
    one_pass, _ = tokenize_to_arrow(examples, stage, chat_tokenizer, template, opts, workers, chunk_rows=1000)
    assert dataset.data.schema.equals(one_pass.data.schema, check_metadata=True)


def test_a_token_column_empty_in_the_first_chunk_takes_ids_in_a_later_one(chat_tokenizer):
    """KTO rows keep the tokens a cut left out for their KL pairs (empty lists where nothing was cut): a first chunk
    of uncut rows typed that column null, and the first cut row of a later chunk (more than 2000 rows, or a small
    ``preprocessing_batch_size``) then failed to write ("Couldn't cast array of type int64 to null")."""
    cfg = build_config({"dataset": "kto_small", "dataset_dir": str(FIXTURES)})
    short = list(load_examples(cfg.data, cfg.data.dataset, "kto"))
    long = {**short[0], "messages": [*short[0]["messages"][:-1],
                                     {"role": "assistant", "content": "word " * 60}]}
    examples = short * 2 + [long]  # chunks of 3: the last holds the one row cut at 48 tokens
    template = get_template("chatml", chat_tokenizer)
    opts = TokenizeOptions(cutoff_len=48)
    columns, _, _ = tokenize_parallel(examples, "kto", chat_tokenizer, template, opts, None)
    assert not any(columns["completion_rest_ids"][:-1]) and columns["completion_rest_ids"][-1]
    dataset, _ = tokenize_to_arrow(examples, "kto", chat_tokenizer, template, opts, None, chunk_rows=3)
    assert dataset.to_dict() == columns


def test_a_set_within_one_chunk_takes_the_one_pass_path(chat_tokenizer):
    cfg = build_config({"dataset": "alpaca_small", "dataset_dir": str(FIXTURES)})
    examples = load_examples(cfg.data, cfg.data.dataset, "sft")
    template = get_template("chatml", chat_tokenizer)
    dataset, stats = tokenize_to_arrow(examples, "sft", chat_tokenizer, template, TokenizeOptions(cutoff_len=48))
    assert len(dataset) == stats["kept"] and not dataset.cache_files


def test_rows_left_with_nothing_to_train_are_kept_and_counted(chat_tokenizer):
    """As LLaMA-Factory keeps them (the caller refuses data where no row has a trained token)."""
    cfg = build_config({"dataset": "alpaca_small", "dataset_dir": str(FIXTURES)})
    examples = load_examples(cfg.data, cfg.data.dataset, "sft")
    template = get_template("chatml", chat_tokenizer)
    dataset, stats = tokenize_to_arrow(examples, "sft", chat_tokenizer, template, TokenizeOptions(cutoff_len=1),
                                       chunk_rows=2)
    assert stats["kept"] == len(examples) == len(dataset) == stats["untrained"] and stats["trainable_tokens"] == 0


def test_token_columns_reach_the_writer_as_arrow_arrays(chat_tokenizer, monkeypatch):
    """datasets' per-value conversion of Python lists is left out for the token columns."""
    from datasets import arrow_writer

    def refuse(data, *args, col=None, **kwargs):
        raise AssertionError(f"column {col} was converted value by value")

    monkeypatch.setattr(arrow_writer, "OptimizedTypedSequence", refuse)
    cfg = build_config({"dataset": "alpaca_small,sharegpt_small", "dataset_dir": str(FIXTURES)})
    examples = list(load_examples(cfg.data, cfg.data.dataset, "sft")) * 4
    template = get_template("chatml", chat_tokenizer)
    dataset, stats = tokenize_to_arrow(examples, "sft", chat_tokenizer, template, TokenizeOptions(cutoff_len=48),
                                       chunk_rows=3)
    assert len(dataset) == stats["kept"] > 6
