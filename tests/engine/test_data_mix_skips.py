"""Mixed datasets with unusable rows train and evaluate LLaMA-Factory 0.9.5's rows in its order: it mixes the
datasets and splits off ``val_size`` with every row and drops the unusable ones afterwards, so a skipped row still
takes its draw and its place in the split (golden: tests/golden/lf_mix_skips.json, recorded by
tests/golden/generate_mix_skips.py). Packed rows join the rows of one of its preprocessing batches, which it cuts with
the unusable rows still in."""

from __future__ import annotations

import json
import re

import pytest

from engine.config import build_config
from engine.data import get_dataset, load_eval_prompts
from engine.templates import get_template
from engine.train.rl import get_prompt_dataset
from tests.golden.generate_mix_skips import JSON_PATH, write_data
from tests.golden.tokenizers import load

CASES = json.loads(JSON_PATH.read_text(encoding="utf-8"))["cases"]


@pytest.mark.parametrize("case", sorted(CASES))
def test_mixed_rows_with_skips_are_llama_factorys(case, tmp_path, monkeypatch):
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    keys = {"preprocessing_num_workers": 1,
            **{k: v for k, v in CASES[case]["config"].items() if k not in ("seed", "do_eval")}}
    cfg = build_config({"stage": "sft", "template": "empty", "dataset_dir": str(write_data(tmp_path / "data")),
                        "cutoff_len": 64, "seed": CASES[case]["config"].get("seed", 42), **keys})
    tokenizer = load("special")
    bundle = get_dataset(cfg, tokenizer, get_template("empty", tokenizer))
    for split, part in (("train", bundle.train), ("eval", bundle.eval)):
        expected = CASES[case]["rows"].get(split)
        got = None if part is None else ["+".join(re.findall(r"q ([cps][0-9]+)", tokenizer.decode(ids)))
                                         for ids in part["input_ids"]]
        assert got == expected, split
    if "eval" in CASES[case]["rows"] and not keys.get("packing"):  # prediction's rows (never packed): the same
        prompts = load_eval_prompts(cfg, tokenizer, get_template("empty", tokenizer))  # held-out rows, same order
        assert [re.search(r"q ([cps][0-9]+)", row["prompt"]).group(1) for row in prompts] == CASES[case]["rows"]["eval"]


@pytest.mark.parametrize("case", sorted(name for name in CASES if "eval" in CASES[name]["rows"]
                                        and not CASES[name]["config"].get("packing")))
def test_rl_prompts_hold_out_the_rows_sft_holds_out(case, tmp_path, monkeypatch):
    """GRPO/RLOO's held-out prompts of a config with val_size are the rows sft (and LLaMA-Factory) holds out of
    the same data, unusable rows and all, in the same order (they had been split on the usable rows only)."""
    monkeypatch.setenv("LF_ENGINE_CACHE", "off")
    keys = {k: v for k, v in CASES[case]["config"].items() if k not in ("seed", "do_eval")}
    cfg = build_config({"stage": "grpo", "reward_funcs": "length", "template": "empty", "cutoff_len": 64,
                        "dataset_dir": str(write_data(tmp_path / "data")), "seed": CASES[case]["config"].get("seed", 42),
                        **keys})
    tokenizer = load("special")
    bundle = get_prompt_dataset(cfg, tokenizer, get_template("empty", tokenizer))
    for split, part in (("train", bundle.train), ("eval", bundle.eval)):
        assert [re.search(r"q ([cps][0-9]+)", prompt).group(1) for prompt in part["prompt"]] == CASES[case]["rows"][split]
