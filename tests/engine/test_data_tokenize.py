"""Tokenization per stage (masks, truncation, packing), collation, get_dataset, eval prompts and the preview."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import build_config
from engine.data import (
    DatasetError,
    PaddingCollator,
    TokenizeOptions,
    build_collator,
    get_dataset,
    load_eval_prompts,
    load_examples,
    preview_dataset,
    tokenize_examples,
)
from engine.data.collator import block_causal_mask
from engine.data.tokenize import IGNORE, fit_pair, infer_seqlen, pack_rows, sft_row
from engine.templates import get_template

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"


def config(data_dir, **overrides):
    base = {"model_name_or_path": "unused", "dataset_dir": str(data_dir), "template": "qwen", "cutoff_len": 1024}
    return build_config({**base, **overrides})


def trained_text(tokenizer, input_ids, labels):
    """The trained tokens of a row, decoded run by run."""
    runs, current = [], []
    for token, label in zip(input_ids, labels):
        if label != IGNORE:
            current.append(token)
        elif current:
            runs.append(tokenizer.decode(current))
            current = []
    if current:
        runs.append(tokenizer.decode(current))
    return runs


# ------------------------------------------------------------------------------------------------------ sft
def test_sft_masks(fixture_data_dir, chat_tokenizer):
    cfg = config(fixture_data_dir, dataset="alpaca_small")
    bundle = get_dataset(cfg, chat_tokenizer, get_template("qwen"))
    train = bundle.train
    assert train.column_names == ["input_ids", "labels", "attention_mask"] and len(train) == 4
    row = train[0]
    assert trained_text(chat_tokenizer, row["input_ids"], row["labels"]) == ["Hello!<|im_end|>\n"]
    assert chat_tokenizer.decode(row["input_ids"]).startswith("<|im_start|>system\nYou are Qwen")
    history = train[2]
    assert trained_text(chat_tokenizer, history["input_ids"], history["labels"]) == ["Yes.<|im_end|>\n",
                                                                                   "Still here.<|im_end|>\n"]
    stats = bundle.stats["train"]
    assert stats["rows"] == 4 and stats["kept"] == 4 and stats["dropped"] == 0 and stats["truncated"] == 0
    assert stats["trainable_tokens"] == sum(sum(x != IGNORE for x in r) for r in train["labels"])
    assert bundle.eval is None


def test_train_on_prompt_and_mask_history(fixture_data_dir, chat_tokenizer):
    on_prompt = get_dataset(config(fixture_data_dir, dataset="alpaca_small", train_on_prompt=True), chat_tokenizer,
                            get_template("qwen")).train[0]
    assert on_prompt["labels"] == on_prompt["input_ids"]
    last_only = get_dataset(config(fixture_data_dir, dataset="alpaca_small", mask_history=True), chat_tokenizer,
                            get_template("qwen")).train[2]
    assert trained_text(chat_tokenizer, last_only["input_ids"], last_only["labels"]) == ["Still here.<|im_end|>\n"]


def test_template_options_from_config(fixture_data_dir, chat_tokenizer):
    cfg = config(fixture_data_dir, dataset="alpaca_small", template="qwen3", default_system="Sys.")
    row = get_dataset(cfg, chat_tokenizer, get_template("qwen3")).train[0]
    assert chat_tokenizer.decode(row["input_ids"]).startswith("<|im_start|>system\nSys.<|im_end|>")
    # max_samples 2: its third row has an image, which a text model refuses (test_text_model_media.py)
    cfg = config(fixture_data_dir, dataset="openai_small", template="qwen3", enable_thinking=False,
                 default_system="Sys.", max_samples=2)
    row = get_dataset(cfg, chat_tokenizer, get_template("qwen3")).train[1]
    text = chat_tokenizer.decode(row["input_ids"])
    # a `formatting: openai` row without a system prompt or tools gets LLaMA-Factory's own, before default_system
    assert text.startswith("<|im_start|>system\ndetailed thinking off<|im_end|>") and "Two plus two" not in text
    assert trained_text(chat_tokenizer, row["input_ids"], row["labels"]) == ["4<|im_end|>\n"]
    thinking = get_dataset(config(fixture_data_dir, dataset="openai_small", template="qwen3", max_samples=2),
                           chat_tokenizer, get_template("qwen3")).train[1]
    assert trained_text(chat_tokenizer, thinking["input_ids"], thinking["labels"]) == [
        "<think>\nTwo plus two is four.\n</think>\n\n4<|im_end|>\n"]


def test_tokenizer_chat_template_fallback(fixture_data_dir, tokenizer_factory):
    tokenizer = tokenizer_factory(chat_template=get_template("chatml").to_jinja())
    template = get_template(None, tokenizer)
    bundle = get_dataset(config(fixture_data_dir, dataset="alpaca_small", template=None), tokenizer, template)
    row = bundle.train[2]
    assert trained_text(tokenizer, row["input_ids"], row["labels"]) == ["Yes.<|im_end|>\n", "Still here.<|im_end|>\n"]


def test_fit_pair():
    assert fit_pair(10, 10, 30) == (10, 10)
    assert fit_pair(10, 30, 20) == (10, 10)
    assert fit_pair(60, 20, 40) == (20, 20)
    assert fit_pair(60, 40, 50) == (30, 20)
    assert fit_pair(100, 1, 10) == (9, 1)
    assert fit_pair(5, 5, 0) == (0, 0)


def test_infer_seqlen_is_llamafactorys_rule():
    assert infer_seqlen(60, 30, 40) == (27, 13), "both long: split in proportion, int() on the reply"
    assert infer_seqlen(60, 19, 40) == (21, 19), "a reply under half the budget stays whole"
    assert infer_seqlen(19, 60, 40) == (19, 21), "else a prompt under half stays whole"
    assert infer_seqlen(10, 10, 30) == (10, 10)
    assert infer_seqlen(10000, 1, 256) == (255, 1)
    assert infer_seqlen(5, 5, 0) == (0, 0)


def test_sft_truncation_keeps_the_start_like_llamafactory():
    prompt, response = list(range(100, 160)), list(range(200, 230))
    ids, labels, truncated = sft_row([(prompt, response)], TokenizeOptions(cutoff_len=40))
    assert truncated and ids == prompt[:27] + response[:13] and labels == [IGNORE] * 27 + response[:13]
    pairs = [(list(range(10)), list(range(10, 20))), (list(range(20, 30)), list(range(30, 40)))]
    ids, labels, truncated = sft_row(pairs, TokenizeOptions(cutoff_len=30))
    assert truncated and ids == list(range(25)) + list(range(30, 35))
    assert labels == [IGNORE] * 10 + list(range(10, 20)) + [IGNORE] * 5 + list(range(30, 35))
    ids, labels, truncated = sft_row(pairs, TokenizeOptions(cutoff_len=30, mask_history=True))
    assert ids == list(range(5)) + list(range(10, 15)) + list(range(20, 40)) and truncated
    assert labels == [IGNORE] * 20 + list(range(30, 40))
    ids, labels, _ = sft_row(pairs, TokenizeOptions(cutoff_len=100, mask_history=True))
    assert ids == list(range(40)) and labels == [IGNORE] * 30 + list(range(30, 40))


def test_sft_efficient_eos_rows():
    pairs = [([1, 2], [3, 4]), ([5, 6, 7], [8])]
    ids, labels, truncated = sft_row(pairs, TokenizeOptions(cutoff_len=100), eos_id=99)
    assert ids == [1, 2, 3, 4, 5, 6, 7, 8, 99] and not truncated
    assert labels == [IGNORE, IGNORE, 3, 4, 99, IGNORE, IGNORE, 8, 99], "EOS labels the next prompt's first token"
    ids, labels, _ = sft_row(pairs, TokenizeOptions(cutoff_len=5), eos_id=99)
    assert ids == [1, 2, 3, 4, 99], "the final EOS is counted in the budget"


def test_keep_prompt_end_truncation():
    keep_end = {"keep_prompt_end": True}
    prompt, response = list(range(100, 160)), list(range(200, 230))
    ids, labels, truncated = sft_row([(prompt, response)], TokenizeOptions(cutoff_len=40, **keep_end))
    assert truncated and len(ids) == 40
    assert ids[:26] == prompt[-26:] and ids[26:] == response[:14]
    assert labels == [IGNORE] * 26 + response[:14]
    ids, _, _ = sft_row([(prompt, response[:20])], TokenizeOptions(cutoff_len=40, **keep_end))
    assert ids == prompt[-20:] + response[:20], "a reply needing half the budget or less stays whole"
    pairs = [(list(range(10)), list(range(10, 20))), (list(range(20, 30)), list(range(30, 40)))]
    ids, labels, truncated = sft_row(pairs, TokenizeOptions(cutoff_len=30, **keep_end))
    assert truncated and ids == list(range(20)) + list(range(25, 30)) + list(range(30, 35))
    ids, _, _ = sft_row(pairs, TokenizeOptions(cutoff_len=24, **keep_end))
    assert ids == list(range(20)), "a later turn with too little room is dropped, not shredded"
    ids, labels, truncated = sft_row(pairs, TokenizeOptions(cutoff_len=30, mask_history=True, **keep_end))
    assert ids == list(range(20, 40)) and labels == [IGNORE] * 10 + list(range(30, 40)) and truncated


class _EmptyReplyTemplate:
    """A template stand-in whose reply has no tokens (nothing to train)."""

    name = "stand-in"

    def encode_multiturn(self, tokenizer, messages, system=None, tools=None, discard_history=False):
        return [([1, 2, 3], [])] if messages[0]["content"] == "empty" else [([1, 2], [3, 4])]


def test_rows_without_trained_tokens_are_kept_and_counted():
    """LLaMA-Factory keeps them (its loss term is zero); the data summary warns how many there are."""
    examples = [{"messages": [{"role": "user", "content": c}]} for c in ("empty", "ok", "empty")]
    columns, stats = tokenize_examples(examples, "sft", None, _EmptyReplyTemplate(), TokenizeOptions(cutoff_len=16))
    assert columns["input_ids"] == [[1, 2, 3], [1, 2, 3, 4], [1, 2, 3]]
    assert stats["dropped"] == 0 and stats["kept"] == 3 and stats["untrained"] == 2


def test_cutoff_truncates_real_rows(fixture_data_dir, chat_tokenizer):
    bundle = get_dataset(config(fixture_data_dir, dataset="sharegpt_small", cutoff_len=16), chat_tokenizer,
                         get_template("qwen"))
    assert all(len(ids) <= 16 for ids in bundle.train["input_ids"])
    assert bundle.stats["train"]["truncated"] == 3 and bundle.stats["train"]["kept"] == 3
    untrained = sum(not any(x != IGNORE for x in labels) for labels in bundle.train["labels"])
    assert 0 < untrained == bundle.stats["train"]["untrained"] < 3  # kept and counted, as LLaMA-Factory keeps them


# ------------------------------------------------------------------------------------------------- packing
def test_pack_rows():
    rows = [([1] * 5, [1] * 5), ([2] * 3, [2] * 3), ([3] * 4, [3] * 4), ([4] * 8, [4] * 8)]
    packed = pack_rows(rows, 9)
    assert [len(ids) for ids in packed["input_ids"]] == [8, 9, 3]
    assert packed["position_ids"][1] == [0, 1, 2, 3, 4, 0, 1, 2, 3]
    assert packed["labels"][1] == [IGNORE, 1, 1, 1, 1, IGNORE, 3, 3, 3]
    assert sorted(t for ids in packed["input_ids"] for t in ids) == sorted(t for ids, _ in rows for t in ids)


def test_sft_packing(fixture_data_dir, chat_tokenizer):
    # LLaMA-Factory takes one off cutoff_len when packing: each example is cut as an unpacked one at 127
    plain = get_dataset(config(fixture_data_dir, dataset="alpaca_small,sharegpt_small", cutoff_len=127), chat_tokenizer,
                        get_template("qwen"))
    packed = get_dataset(config(fixture_data_dir, dataset="alpaca_small,sharegpt_small", packing=True, cutoff_len=128),
                         chat_tokenizer, get_template("qwen"))
    assert "position_ids" in packed.train.column_names and len(packed.train) < len(plain.train)
    assert all(len(ids) <= 127 for ids in packed.train["input_ids"])
    examples = sorted(zip(plain.train["input_ids"], plain.train["labels"]))
    pieces = []
    for ids, labels, positions in zip(packed.train["input_ids"], packed.train["labels"], packed.train["position_ids"]):
        starts = [i for i, p in enumerate(positions) if p == 0] + [len(ids)]
        pieces += [(ids[a:b], labels[a:b]) for a, b in zip(starts, starts[1:])]
    assert sorted(pieces) == examples  # the same examples, labels whole (the first ones kept, as there)
    assert packed.stats["train"]["packed_sequences"] == len(packed.train)


@pytest.mark.parametrize(("stage", "dataset"), [("dpo", "dpo_small"), ("rm", "dpo_small"), ("kto", "kto_small")])
def test_packing_takes_one_token_off_cutoff_len_in_every_stage_as_llamafactory(fixture_data_dir, chat_tokenizer,
                                                                                stage, dataset):
    """LLaMA-Factory's DataArguments take 1 off cutoff_len whenever `packing` is set, whatever the stage; only pt and
    sft rows are then packed (tests/golden/compare_rows.py matched its dpo/rm/kto rows this way)."""
    template = get_template("chatml", chat_tokenizer)
    one_less = get_dataset(config(fixture_data_dir, dataset=dataset, stage=stage, template="chatml", cutoff_len=11),
                           chat_tokenizer, template)
    packing = get_dataset(config(fixture_data_dir, dataset=dataset, stage=stage, template="chatml", cutoff_len=12,
                                 packing=True), chat_tokenizer, template)
    assert packing.train.to_dict() == one_less.train.to_dict()


def test_neat_packing_outside_pt_and_sft_is_refused_as_in_llamafactory(fixture_data_dir):
    from engine.config.loader import ConfigError

    with pytest.raises(ConfigError, match="`neat_packing: true` packs rows of stages sft and pt only"):
        config(fixture_data_dir, dataset="dpo_small", stage="dpo", neat_packing=True)


def test_a_dataset_named_twice_is_used_once_as_in_llamafactory(fixture_data_dir, caplog):
    data = config(fixture_data_dir).data
    once = load_examples(data, "alpaca_small,sharegpt_small", "sft")
    with caplog.at_level("WARNING"):
        twice = load_examples(data, "alpaca_small,sharegpt_small,alpaca_small", "sft")
    assert [ex["messages"] for ex in twice] == [ex["messages"] for ex in once]
    assert "Dataset `alpaca_small` is named more than once" in caplog.text


def test_pt_rows_are_llama_factorys_blocks_or_documents(fixture_data_dir, chat_tokenizer):
    # LLaMA-Factory's pre-training processor (the golden test checks ids against it on its own demo data)
    tok, template = chat_tokenizer, get_template("qwen")
    texts = [ex["text"] for ex in load_examples(config(fixture_data_dir).data, "pt_small,text_small", "pt")]
    stream = [t for text in texts for t in tok.encode(text + tok.eos_token, add_special_tokens=False)]
    blocks = get_dataset(config(fixture_data_dir, dataset="pt_small,text_small", stage="pt", cutoff_len=16), tok,
                         template)
    whole = len(stream) // 16 * 16
    assert blocks.train["input_ids"] == [stream[i:i + 16] for i in range(0, whole, 16)]  # the rest is left out
    assert blocks.stats["train"]["remainder_tokens"] == len(stream) - whole > 0
    assert blocks.train["labels"] == [[IGNORE if t == tok.pad_token_id else t for t in ids]
                                      for ids in blocks.train["input_ids"]]
    explicit = get_dataset(config(fixture_data_dir, dataset="pt_small,text_small", stage="pt", cutoff_len=16,
                                  packing=True), tok, template).train
    assert {len(ids) for ids in explicit["input_ids"]} == {15}  # an explicit `packing: true` takes one off there
    documents = get_dataset(config(fixture_data_dir, dataset="pt_small,text_small", stage="pt", cutoff_len=16,
                                   packing=False), tok, template).train
    assert documents["input_ids"] == [tok.encode(text + tok.eos_token, add_special_tokens=False)[:16]
                                      for text in texts]
    packed = get_dataset(config(fixture_data_dir, dataset="pt_small,text_small", stage="pt", cutoff_len=16,
                                neat_packing=True), tok, template).train
    assert all(len(ids) <= 16 for ids in packed["input_ids"])
    for positions, labels in zip(packed["position_ids"], packed["labels"]):
        assert positions[0] == 0 and labels[0] == IGNORE
        starts = [i for i, p in enumerate(positions) if p == 0]
        assert all(labels[i] == IGNORE for i in starts)


def test_pt_text_shorter_than_one_block_is_named_with_the_fix(fixture_data_dir, chat_tokenizer):
    with pytest.raises(DatasetError, match="not one whole block.*Lower cutoff_len, or set `packing: false`"):
        get_dataset(config(fixture_data_dir, dataset="pt_small", stage="pt", cutoff_len=4096), chat_tokenizer,
                    get_template("qwen"))


# ---------------------------------------------------------------------------------------------- preference
def test_dpo_rm_kto_columns(fixture_data_dir, chat_tokenizer):
    tok, template = chat_tokenizer, get_template("chatml")
    dpo = get_dataset(config(fixture_data_dir, dataset="dpo_small", stage="dpo", template="chatml"), tok, template)
    assert dpo.train.column_names == ["prompt_ids", "chosen_ids", "rejected_ids"]
    row = dpo.train[1]
    messages = [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello"},
                {"role": "user", "content": "2+2?"}]
    assert row["prompt_ids"] == template.encode_prompt(tok, messages)
    assert tok.decode(row["chosen_ids"]) == "4<|im_end|>\n" and tok.decode(row["rejected_ids"]) == "5<|im_end|>\n"
    rm = get_dataset(config(fixture_data_dir, dataset="dpo_small", stage="rm", template="chatml"), tok, template)
    assert rm.train.column_names == ["chosen_ids", "rejected_ids"]
    assert rm.train[1]["chosen_ids"] == row["prompt_ids"] + row["chosen_ids"]
    kto = get_dataset(config(fixture_data_dir, dataset="kto_small", stage="kto", template="chatml"), tok, template)
    # the KL pairs are formed here (engine.data.kto_pairs), and what they needed is gone
    assert kto.train.column_names == ["prompt_ids", "completion_ids", "label", "KL_prompt_ids", "KL_completion_ids"]
    assert kto.train["KL_prompt_ids"] == kto.train["prompt_ids"]  # nothing cut
    assert kto.train["KL_completion_ids"] == kto.train["completion_ids"][::-1]  # two rows: each takes the other's
    assert kto.train["label"] == [True, False] and tok.decode(kto.train[1]["completion_ids"]) == "Lisbon.<|im_end|>\n"
    short = get_dataset(config(fixture_data_dir, dataset="dpo_small", stage="dpo", template="chatml", cutoff_len=8),
                        tok, template)
    assert all(len(p) + max(len(c), len(r)) <= 8 for p, c, r in zip(
        short.train["prompt_ids"], short.train["chosen_ids"], short.train["rejected_ids"]))
    assert short.stats["train"]["truncated"] == 2


@pytest.mark.parametrize("stage", ["dpo", "rm", "kto"])
def test_pairs_whose_reply_the_cutoff_leaves_no_token_are_kept_as_llamafactory_keeps_them(chat_tokenizer, stage):
    """infer_seqlen gives a reply no share when the prompt is long enough against cutoff_len; LLaMA-Factory keeps
    such a row (its pair trains nothing), so the rows after it keep their places, and KTO's KL partners too."""
    from engine.data.tokenize import tokenize_examples

    template = get_template("chatml")
    long_prompt, reply = " ".join(["alpha beta"] * 200), " ".join(["gamma"] * 12)
    if stage == "kto":
        examples = [{"messages": [{"role": "user", "content": text}, {"role": "assistant", "content": reply}],
                     "kto_tag": tag} for text, tag in ((long_prompt, True), ("Hi", False))]
    else:
        examples = [{"messages": [{"role": "user", "content": text}], "chosen": {"role": "assistant", "content": reply},
                     "rejected": {"role": "assistant", "content": "no"}} for text in (long_prompt, "Hi")]
    columns, stats = tokenize_examples(examples, stage, chat_tokenizer, template, TokenizeOptions(cutoff_len=16))
    assert stats["kept"] == 2 and stats["dropped"] == 0 and stats["untrained"] == 1
    if stage == "rm":
        assert len(columns["chosen_ids"][0]) == 16 == len(columns["rejected_ids"][0])  # the prompt's first 16
    else:
        replies = columns["completion_ids" if stage == "kto" else "chosen_ids"]
        assert replies[0] == [] and replies[1] and len(columns["prompt_ids"][0]) == 16


# ------------------------------------------------------------------------------------------------ collator
def test_collator_pads_to_multiple_of_eight(tokenizer_factory):
    tokenizer = tokenizer_factory()
    features = [{"input_ids": [5, 6, 7], "labels": [IGNORE, 6, 7], "attention_mask": [1, 1, 1]},
                {"input_ids": [8] * 10, "labels": [8] * 10, "attention_mask": [1] * 10}]
    batch = build_collator(tokenizer)(features)
    pad = tokenizer.pad_token_id
    assert batch["input_ids"].shape == (2, 16)
    assert batch["input_ids"][0].tolist() == [5, 6, 7] + [pad] * 13
    assert batch["labels"][0].tolist() == [IGNORE, 6, 7] + [IGNORE] * 13
    assert batch["attention_mask"][0].tolist() == [1, 1, 1] + [0] * 13
    tokenizer.padding_side = "left"
    left = build_collator(tokenizer)(features)
    assert left["input_ids"][0].tolist() == [pad] * 13 + [5, 6, 7]
    assert left["attention_mask"][0].tolist() == [0] * 13 + [1, 1, 1]


def test_packed_batch_layouts(tokenizer_factory):
    tokenizer = tokenizer_factory()
    feature = {"input_ids": [5, 6, 7, 8, 9], "labels": [IGNORE, 6, 7, IGNORE, 9], "attention_mask": [1] * 5,
               "position_ids": [0, 1, 2, 0, 1]}
    batch = PaddingCollator(tokenizer)([feature])
    assert "attention_mask" not in batch and batch["use_cache"] is False
    assert batch["position_ids"][0].tolist() == [0, 1, 2, 0, 1, 0, 1, 2]
    mask = PaddingCollator(tokenizer, packed_attention="4d")([feature])["attention_mask"]
    assert mask.shape == (1, 1, 8, 8) and mask.dtype.is_floating_point is False
    assert mask[0, 0, 4].tolist() == [False, False, False, True, True, False, False, False]
    assert mask[0, 0, 2].tolist() == [True, True, True, False, False, False, False, False]
    assert mask[0, 0, 6].tolist() == [False] * 6 + [True, False]
    with pytest.raises(ValueError):
        PaddingCollator(tokenizer, packed_attention="magic")


@pytest.mark.parametrize(("attention", "packed_attention", "side"), [
    ("sdpa", "position_ids", "right"), ("eager", "position_ids", "left"), ("sdpa", "4d", "left"),
])
def test_packed_rows_match_separate_rows(tokenizer_factory, attention, packed_attention, side):
    """A tiny llama gives the same logits for packed examples as for each example alone."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    model_config = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    model_config._attn_implementation = attention
    model = LlamaForCausalLM(model_config).train()
    examples = [list(range(5, 10)), list(range(10, 13)), list(range(20, 24)), list(range(30, 39))]
    packed = pack_rows([(ids, ids) for ids in examples], 9)
    features = [{key: packed[key][i] for key in packed} for i in range(len(packed["input_ids"]))]
    tokenizer = tokenizer_factory()
    tokenizer.padding_side = side
    batch = PaddingCollator(tokenizer, packed_attention=packed_attention)(features)
    batch.pop("labels")
    with torch.no_grad():
        logits = model(**batch).logits
        width = batch["input_ids"].shape[1]
        for row, feature in enumerate(features):
            offset = width - len(feature["input_ids"]) if side == "left" else 0
            starts = [i for i, p in enumerate(feature["position_ids"]) if p == 0] + [len(feature["input_ids"])]
            for start, end in zip(starts, starts[1:]):
                alone = model(input_ids=torch.tensor([feature["input_ids"][start:end]])).logits[0]
                assert torch.allclose(logits[row, offset + start:offset + end], alone, atol=1e-5)


def test_block_causal_mask_without_padding():
    import torch

    mask = block_causal_mask(torch.tensor([[0, 1, 0, 1, 2]]), torch.ones(1, 5, dtype=torch.bool))
    assert mask[0, 0].int().tolist() == [[1, 0, 0, 0, 0], [1, 1, 0, 0, 0], [0, 0, 1, 0, 0], [0, 0, 1, 1, 0],
                                         [0, 0, 1, 1, 1]]


# --------------------------------------------------------------------------------------- bundle / prompts
def test_val_size_eval_dataset_and_cache(fixture_data_dir, chat_tokenizer, tmp_path):
    template = get_template("qwen")
    split = get_dataset(config(fixture_data_dir, dataset="alpaca_small", val_size=0.25), chat_tokenizer, template)
    assert len(split.train) == 3 and len(split.eval) == 1 and split.stats["eval"]["rows"] == 1
    named = get_dataset(config(fixture_data_dir, dataset="alpaca_small", eval_dataset="sharegpt_small", packing=True),
                        chat_tokenizer, template)
    assert len(named.eval) == 1 and "position_ids" in named.eval.column_names  # packed too, as LLaMA-Factory does
    cache = tmp_path / "tokenized"
    first = get_dataset(config(fixture_data_dir, dataset="alpaca_small", tokenized_path=str(cache)), chat_tokenizer,
                        template)
    again = get_dataset(config(fixture_data_dir, dataset="nonexistent", tokenized_path=str(cache)), chat_tokenizer,
                        template)
    assert again.train["input_ids"] == first.train["input_ids"] and again.stats == first.stats
    with pytest.raises(DatasetError, match="Unknown dataset 'nonexistent'"):
        get_dataset(config(fixture_data_dir, dataset="nonexistent", tokenized_path=str(cache), overwrite_cache=True),
                    chat_tokenizer, template)


def test_load_eval_prompts(fixture_data_dir, chat_tokenizer):
    template = get_template("qwen")
    cfg = config(fixture_data_dir, dataset="alpaca_small", eval_dataset="sharegpt_small")
    rows = load_eval_prompts(cfg, chat_tokenizer, template)
    # labels as LLaMA-Factory's predictions file has them: the reply's ids decoded, the template's "\n" after its
    # end of turn included (checked against LLaMA-Factory 0.9.5's own predictions: the same file)
    assert len(rows) == 3 and rows[2]["label"] == "  \n"  # the blank answer is a (blank) label, as in LLaMA-Factory
    first = rows[0]
    assert first["label"] == "It is 21 degrees in Paris.\n"
    assert first["prompt_ids"] == template.encode_prompt(chat_tokenizer, first["messages"], first["system"],
                                                         first["tools"])
    assert first["prompt"].endswith("</tool_response><|im_end|>\n<|im_start|>assistant\n")
    split = load_eval_prompts(config(fixture_data_dir, dataset="alpaca_small", val_size=1), chat_tokenizer, template)
    assert len(split) == 1
    with pytest.raises(DatasetError, match="set `eval_dataset`"):
        load_eval_prompts(config(fixture_data_dir), chat_tokenizer, template)


def test_preview(fixture_data_dir, chat_tokenizer):
    template = get_template("qwen")
    cfg = config(fixture_data_dir, dataset="alpaca_small", cutoff_len=40)
    preview = preview_dataset(cfg.data, "sft", chat_tokenizer, template, n=2)
    assert len(preview["rows"]) == 2 and preview["num_examples"] == 4 and len(preview["lengths"]) == 4
    spans = preview["rows"][0]["spans"]
    assert [text for text, trained in spans if trained] == ["Hello!<|im_end|>\n"]
    assert "".join(text for text, _ in spans) == template.render(
        [{"role": "user", "content": "Say hello."}, {"role": "assistant", "content": "Hello!"}])
    assert preview["over_cutoff"] == sum(n > 40 for n in preview["lengths"]) and preview["over_cutoff"] > 0
    dpo = preview_dataset(config(fixture_data_dir, dataset="dpo_small").data, "dpo", chat_tokenizer, template)
    assert dpo["rows"][0]["spans"][1] == ("Blue.<|im_end|>\n", True)
    assert dpo["rows"][0]["rejected_spans"][1] == ("Dog.<|im_end|>\n", True)
    pt = preview_dataset(config(fixture_data_dir, dataset="text_small").data, "pt", chat_tokenizer, template, n=1)
    assert pt["rows"] == [{"spans": [("The first document is short.", True)]}]
    kto = preview_dataset(config(fixture_data_dir, dataset="kto_small").data, "kto", chat_tokenizer, template)
    assert [row["kto_tag"] for row in kto["rows"]] == [True, False]


@pytest.mark.skipif(not (SHARED_DATA / "dataset_info.json").is_file(), reason="../shared/data is not present")
@pytest.mark.parametrize(("dataset", "stage", "template"), [
    ("glaive_toolcall_en_demo", "sft", "gemma4"), ("identity,alpaca_zh_demo", "sft", "llama3"),
    ("dpo_en_demo", "dpo", "qwen3"), ("kto_en_demo", "kto", "glm4"), ("c4_demo,wiki_demo", "pt", "qwen"),
    ("mllm_demo", "pt", "gemma3"),  # a text model: its text only (sft refuses the images, as LLaMA-Factory does)
])
def test_shared_data_tokenizes(chat_tokenizer, dataset, stage, template):
    cutoff = 64 if dataset == "mllm_demo" else 256  # its 6 texts make two blocks of 64 tokens
    cfg = config(SHARED_DATA, dataset=dataset, stage=stage, template=template, max_samples=40, cutoff_len=cutoff)
    bundle = get_dataset(cfg, chat_tokenizer, get_template(template))
    stats = bundle.stats["train"]
    assert stats["kept"] > 0 and stats["trainable_tokens"] > 0
    first_column = bundle.train.column_names[0]
    assert all(len(ids) <= cutoff for ids in bundle.train[first_column])


def test_a_tokenized_path_saved_by_llamafactory_keeps_its_validation_split(fixture_data_dir, chat_tokenizer, tmp_path):
    """LLaMA-Factory saves `train` and `validation`; the held-out rows must be evaluated, not dropped."""
    from datasets import Dataset, DatasetDict

    rows = {"input_ids": [[1, 2, 3]], "attention_mask": [[1, 1, 1]], "labels": [[-100, 2, 3]]}
    DatasetDict({"train": Dataset.from_dict(rows), "validation": Dataset.from_dict(rows)}).save_to_disk(tmp_path / "lf")
    bundle = get_dataset(config(fixture_data_dir, dataset="alpaca_small", tokenized_path=str(tmp_path / "lf")),
                         chat_tokenizer, get_template("qwen"))
    assert bundle.origin == "tokenized_path" and bundle.eval is not None and bundle.eval["labels"] == [[-100, 2, 3]]


def test_prediction_prompts_take_the_one_token_packing_takes_off_cutoff_len(fixture_data_dir, chat_tokenizer):
    template = get_template("qwen")
    packed = load_eval_prompts(config(fixture_data_dir, eval_dataset="alpaca_small", cutoff_len=12, packing=True),
                               chat_tokenizer, template)
    shorter = load_eval_prompts(config(fixture_data_dir, eval_dataset="alpaca_small", cutoff_len=11), chat_tokenizer,
                                template)
    plain = load_eval_prompts(config(fixture_data_dir, eval_dataset="alpaca_small", cutoff_len=12), chat_tokenizer,
                              template)
    assert [r["prompt_ids"] for r in packed] == [r["prompt_ids"] for r in shorter]
    assert [r["prompt_ids"] for r in packed] != [r["prompt_ids"] for r in plain]


@pytest.mark.parametrize(("datasets", "weights", "message"), [
    ("alpaca_small,sharegpt_small,alpaca_small", "0.5,0.5", "is named more than once"),
    ("alpaca_small,sharegpt_small", "0.5,0.3,0.2", "gives 3 weights for 2 datasets"),
])
def test_interleave_probs_must_weigh_each_named_dataset_once(fixture_data_dir, datasets, weights, message):
    from engine.config.loader import ConfigError

    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        config(fixture_data_dir, dataset=datasets, mix_strategy="interleave_under", interleave_probs=weights)
