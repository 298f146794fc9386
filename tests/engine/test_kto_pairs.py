"""KTO's mismatched (KL) pairs are LLaMA-Factory 0.9.5's: each row takes the completion of the row before it within
each batch of LLaMA-Factory's preprocessing map (``preprocessing_batch_size`` rows, within each of
``preprocessing_num_workers`` contiguous shards), and each pair is cut to ``cutoff_len`` as a pair of its own."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
from datasets import Dataset

from engine.config import build_config
from engine.data import get_dataset, load_examples
from engine.data.kto_pairs import SOURCE_COLUMNS, kl_inputs, kl_partners
from engine.data.tokenize import TokenizeOptions, fit_pair, infer_seqlen, prompt_and_reply, tokenize_kto
from engine.templates import get_template
from engine.train.preference import KLPairCollator, _with_kl_pairs


def llama_factory_partners(rows: int, batch_size: int, workers: int | None) -> list[int]:
    """What LLaMA-Factory's feedback processor computes, through the same `datasets` map it runs."""
    def rotate(batch):  # llamafactory/data/processor/feedback.py: kl_response = [last] + all but the last
        return {"kl": [batch["i"][-1]] + batch["i"][:-1]}

    dataset = Dataset.from_dict({"i": list(range(rows))})
    return dataset.map(rotate, batched=True, batch_size=batch_size, num_proc=workers)["kl"]


@pytest.mark.parametrize("rows, batch_size, workers", [
    (23, 5, None), (23, 5, 3), (10, 1000, 16), (7, 1000, 4), (2000, 1000, None), (2500, 1000, 2), (1, 1000, None),
])
def test_pairs_are_those_of_llama_factorys_preprocessing(rows, batch_size, workers):
    assert kl_partners(rows, batch_size, workers) == llama_factory_partners(rows, batch_size, workers)


def test_the_default_groups_are_llama_factorys_1000_rows():
    partners = kl_partners(1500)
    assert partners[0] == 999 and partners[1] == 0 and partners[1000] == 1499 and partners[1001] == 1000


# --------------------------------------------------------------------------------- each KL pair cut as LLaMA-Factory's
def _kto_dataset(tmp_path, rows: int = 23) -> Path:
    """KTO rows of varied prompt and answer lengths (short, long and very long sides), in LLaMA-Factory's layout."""
    words = "alpha beta gamma delta epsilon zeta eta theta iota kappa".split()
    data = []
    for i in range(rows):
        prompt = " ".join(words[(i + k) % len(words)] for k in range(1 + (i * 7) % 40))
        answer = " ".join(words[(i * 3 + k) % len(words)] for k in range(1 + (i * 11) % 50))
        data.append({"messages": [{"role": "user", "content": prompt}, {"role": "assistant", "content": answer}],
                     "label": i % 3 != 0})
    (tmp_path / "kto_mixed.json").write_text(json.dumps(data), encoding="utf-8")
    info = {"kto_mixed": {"file_name": "kto_mixed.json", "formatting": "sharegpt",
                          "columns": {"messages": "messages", "kto_tag": "label"},
                          "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                   "assistant_tag": "assistant"}}}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return tmp_path


def _llama_factory_kl_pairs(examples, tokenizer, template, cutoff: int, partners, keep_end: bool = False):
    """LLaMA-Factory's construction, from the examples themselves: row i's prompt with row j's reply, encoded as one
    conversation and cut as a pair (infer_seqlen; fit_pair and the prompt's end with our keep_prompt_end)."""
    pairs = []
    for i, j in enumerate(partners):
        own = examples[i]
        prompt, reply = prompt_and_reply(tokenizer, template, {**own, "messages": own["messages"][:-1]},
                                         examples[j]["messages"][-1])
        if keep_end:
            keep, reply_keep = fit_pair(len(prompt), len(reply), cutoff)
            pairs.append((prompt[len(prompt) - keep:] if keep else [], reply[:reply_keep]))
        else:
            keep, reply_keep = infer_seqlen(len(prompt), len(reply), cutoff)
            pairs.append((prompt[:keep], reply[:reply_keep]))
    return pairs


@pytest.mark.parametrize("keep_end", [False, True])
@pytest.mark.parametrize("batch_size, workers", [(5, 2), (1000, None)])
def test_the_trainer_gets_llama_factorys_kl_pairs(tmp_path, chat_tokenizer, monkeypatch, keep_end, batch_size,
                                                 workers):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = build_config({"model_name_or_path": "unused", "dataset_dir": str(_kto_dataset(tmp_path)),
                        "dataset": "kto_mixed", "stage": "kto", "template": "chatml", "cutoff_len": 40,
                        "keep_prompt_end": keep_end, "preprocessing_batch_size": batch_size,
                        "preprocessing_num_workers": workers})
    template = get_template("chatml")
    train = get_dataset(cfg, chat_tokenizer, template).train
    assert len(train) == 23 and "KL_prompt_ids" in train.column_names  # paired by get_dataset already
    paired = _with_kl_pairs(train, cfg)
    assert not set(SOURCE_COLUMNS) & set(paired.column_names)
    partners = kl_partners(23, batch_size, workers)
    examples = list(load_examples(cfg.data, "kto_mixed", "kto"))
    expected = _llama_factory_kl_pairs(examples, chat_tokenizer, template, 40, partners, keep_end)
    got = list(zip(paired["KL_prompt_ids"], paired["KL_completion_ids"]))
    assert got == [(list(p), list(c)) for p, c in expected]
    naive = [(train["prompt_ids"][i] + train["completion_ids"][j])[:40] for i, j in enumerate(partners)]
    assert sum(p + c != n for (p, c), n in zip(got, naive)) >= 5  # the cut as a pair matters on this data


def test_the_collator_builds_the_kl_sequences_from_the_kl_prompts():
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference

    collate = KLPairCollator(DataCollatorForUnpairedPreference(pad_token_id=0, max_length=8))
    batch = collate([
        {"prompt_ids": [1, 2, 3], "completion_ids": [4, 5], "label": True,
         "KL_prompt_ids": [1, 2], "KL_completion_ids": [6, 7, 8]},
        {"prompt_ids": [9], "completion_ids": [6, 7, 8], "label": False,
         "KL_prompt_ids": [9], "KL_completion_ids": [4, 5]},
    ])
    assert batch["input_ids"].tolist() == [[1, 2, 3, 4, 5], [9, 6, 7, 8, 0]]
    assert batch["KL_input_ids"].tolist() == [[1, 2, 6, 7, 8], [9, 4, 5, 0, 0]]
    assert batch["KL_completion_mask"].tolist() == [[0, 0, 1, 1, 1], [0, 1, 1, 0, 0]]
    assert batch["KL_attention_mask"].tolist() == [[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]]
    assert batch["label"].tolist() == [True, False]


def test_a_media_prompt_is_never_cut_inside_its_media():
    opts = TokenizeOptions(cutoff_len=10)
    columns = {"prompt_ids": [[1, 2, 7, 7, 3, 4]], "completion_ids": [[5, 6]], "prompt_len": [6], "completion_len": [20],
               "prompt_rest_ids": [[]], "completion_rest_ids": [list(range(30, 38))], "prompt_floor": [4]}
    prompts, completions = kl_inputs(columns, [0], opts)  # infer_seqlen(6, 20, 10) keeps 2 prompt tokens
    assert prompts == [[1, 2, 7, 7]] and completions == [[5, 6, 30, 31, 32, 33]]


def test_data_tokenized_before_these_columns_still_trains_with_a_warning(caplog):
    train = Dataset.from_dict({"prompt_ids": [[1], [2], [3]], "completion_ids": [[4], [5], [6]],
                               "label": [True, False, True]})
    with caplog.at_level(logging.WARNING, logger="engine"):
        paired = _with_kl_pairs(train, None)
    assert paired["KL_completion_ids"] == [[6], [4], [5]] and "KL_prompt_ids" not in paired.column_names
    assert any("overwrite_cache: true" in r.getMessage() for r in caplog.records)


def _thinking_kto_dataset(tmp_path) -> Path:
    """KTO rows whose replies have no thought, a whole one, or only the markers that thinking off cannot remove
    (`<think>x</think>`: Qwen3's thought words carry newlines), so with thinking off only some prompts end with the
    empty thought block."""
    replies = ["Four.", "<think>\nAdd them.\n</think>\n\nSix.", "<think>Add.</think>Eight.", "<think></think>Ten.",
               "Twelve, as six and six make twelve."]
    data = [{"messages": [{"role": "user", "content": f"What is {i} plus {i}? Answer briefly, please."},
                          {"role": "assistant", "content": replies[i % len(replies)]}], "label": i % 3 != 0}
            for i in range(11)]
    (tmp_path / "kto_think.json").write_text(json.dumps(data), encoding="utf-8")
    info = {"kto_think": {"file_name": "kto_think.json", "formatting": "sharegpt",
                          "columns": {"messages": "messages", "kto_tag": "label"},
                          "tags": {"role_tag": "role", "content_tag": "content", "user_tag": "user",
                                   "assistant_tag": "assistant"}}}
    (tmp_path / "dataset_info.json").write_text(json.dumps(info), encoding="utf-8")
    return tmp_path


@pytest.mark.parametrize("keep_end", [False, True])
@pytest.mark.parametrize("cutoff", [24, 1024])
def test_with_thinking_off_a_kl_prompt_ends_as_the_partners_reply_leaves_it(tmp_path, chat_tokenizer, monkeypatch,
                                                                          keep_end, cutoff):
    """LLaMA-Factory encodes the KL pair's prompt with the partner's reply: with thinking off the empty thought
    block ends that prompt only when the partner's reply has no thought (an outside check found our KL prompts
    keeping the row's own block: tests/golden/compare_rows.py differed on every such KTO row)."""
    chat_tokenizer = copy.deepcopy(chat_tokenizer)  # fix_tokenizer sets its end of turn: the fixture is session-wide
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    cfg = build_config({"model_name_or_path": "unused", "dataset_dir": str(_thinking_kto_dataset(tmp_path)),
                        "dataset": "kto_think", "stage": "kto", "template": "qwen3", "enable_thinking": False,
                        "cutoff_len": cutoff, "keep_prompt_end": keep_end, "preprocessing_batch_size": 4})
    template = get_template("qwen3", enable_thinking=False)
    template.fix_tokenizer(chat_tokenizer)
    paired = get_dataset(cfg, chat_tokenizer, template).train  # a KTO set comes with its KL pairs
    partners = kl_partners(11, 4)
    examples = list(load_examples(cfg.data, "kto_think", "kto"))
    blocks = tokenize_kto(examples, chat_tokenizer, template, TokenizeOptions(cutoff_len=cutoff))[0]["prompt_block_ids"]
    assert any(blocks) and not all(blocks)  # some replies leave the empty thought block, some do not
    expected = _llama_factory_kl_pairs(examples, chat_tokenizer, template, cutoff, partners, keep_end)
    assert list(zip(paired["KL_prompt_ids"], paired["KL_completion_ids"])) == [(list(p), list(c)) for p, c in expected]
