"""Regenerate tests/golden/lf_demo_data.json.gz: LLaMA-Factory 0.9.5's SFT, DPO and KTO rows on its own demo data.

    python -m tests.golden.generate_data [DATA_DIR]

The first 50 rows of each demo file are converted and tokenized by LLaMA-Factory's converters and dataset
processors (``lf_harness``) with the ``special`` test tokenizer, at cutoffs 256, 1024 and 8192. Per row the file
keeps a digest of the input ids and of the labels (and their lengths; for KTO also of the KL pair's), so tests/engine/test_lf_demo_data.py can
check that our pipeline gives the same ids on the same files. Llama 3's tool prompt carries the date: LLaMA-Factory
writes :data:`tests.golden.generate.FIXED_DATE` (kept in the file as ``date``) and the test gives ours the same.
"""

from __future__ import annotations

import copy
import gzip
import hashlib
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from tests.golden.generate import FIXED_DATE, fix_date
from tests.golden.lf_harness import load_lf
from tests.golden.tokenizers import load

ROWS = 50
CUTOFFS = (256, 1024, 8192)
SFT_SETS = ("alpaca_en_demo", "identity", "glaive_toolcall_en_demo")
TEMPLATES = ("default", "qwen", "qwen3", "llama3", "glm4", "mistral", "gemma4", "alpaca")
# sft packing: LLaMA-Factory's packed processor (cutoff_len - 1 per example, its greedy knapsack, padded rows)
PACK_SETS = ("alpaca_en_demo", "glaive_toolcall_en_demo")
PACK_TEMPLATES = ("qwen", "llama3")
PACK_OPTIONS = ({"packing": True}, {"neat_packing": True})
PT_SETS = ("c4_demo", "wiki_demo")
PT_TEMPLATES = ("default", "qwen", "llama3")  # llama3: LLaMA-Factory ends texts with <|end_of_text|> there
PT_CUTOFFS = {"c4_demo": (256, 1024), "wiki_demo": (1024,)}  # wiki_demo's 30 long lines make thousands of blocks
# pre-training: `packing` unset (blocks), true (blocks one token shorter), false (one row per text); add_bos: a
# tokenizer that adds BOS (LLaMA-Factory writes it over each block's first token, or before each text); pad_is_eos:
# pad and EOS one token (LLaMA-Factory's pt collator masks the pad token's id, so EOS is not trained)
PT_OPTIONS = ({}, {"packing": True}, {"packing": False})
PT_EXTRA = [("c4_demo", "default", 256, {"add_bos": True}), ("c4_demo", "default", 256, {"add_bos": True, "packing": False}),
            ("c4_demo", "default", 256, {"pad_is_eos": True})]
# (dataset, stage, template, options) combinations beyond the full grid
EXTRA = [
    ("glaive_toolcall_en_demo", "sft", "qwen3", {"enable_thinking": False}),
    ("glaive_toolcall_en_demo", "sft", "qwen", {"mask_history": True}),
    ("glaive_toolcall_en_demo", "sft", "glm4", {"mask_history": True}),
    ("glaive_toolcall_en_demo", "sft", "qwen", {"train_on_prompt": True}),
]


def digest(ids: list[int]) -> str:
    return hashlib.sha1(json.dumps(ids).encode()).hexdigest()[:16]


def combos() -> list[tuple[str, str, str, int, dict]]:
    out = []
    for template in TEMPLATES:
        for cutoff in CUTOFFS:
            out += [(name, "sft", template, cutoff, {}) for name in SFT_SETS]
            out.append(("dpo_en_demo", "dpo", template, cutoff, {}))
            out.append(("kto_en_demo", "kto", template, cutoff, {}))
    for name, stage, template, options in EXTRA:
        out += [(name, stage, template, cutoff, options) for cutoff in CUTOFFS]
    for name in PACK_SETS:
        for template in PACK_TEMPLATES:
            for cutoff in CUTOFFS[:2]:
                out += [(name, "sft", template, cutoff, options) for options in PACK_OPTIONS]
    for name in PT_SETS:
        for template in PT_TEMPLATES:
            for cutoff in PT_CUTOFFS[name]:
                out += [(name, "pt", template, cutoff, options) for options in PT_OPTIONS]
    out += [(name, "pt", template, cutoff, options) for name, template, cutoff, options in PT_EXTRA]
    return out


def pt_rows(data_dir: str, name: str, info: dict) -> list[dict]:
    """The first ROWS rows of a pre-training file as LLaMA-Factory reads it (``datasets``' json/text builders)."""
    from datasets import load_dataset

    path = str(Path(data_dir) / info[name]["file_name"])
    builder = "text" if path.endswith(".txt") else "json"
    return list(load_dataset(builder, data_files=path, split="train"))[:ROWS]


def key(name: str, stage: str, template: str, cutoff: int, options: dict) -> str:
    extra = ",".join(f"{k}={v}" for k, v in sorted(options.items()))
    return f"{name}|{stage}|{template}|{cutoff}|{extra}"


def convert(attr, rows: list[dict], data_dir: str, alpaca: type, sharegpt: type) -> dict[str, list]:
    """Rows through LLaMA-Factory's converter for the dataset's format, as one batch of columns."""
    kind = alpaca if attr.formatting == "alpaca" else sharegpt
    converter = kind(attr, SimpleNamespace(media_dir=data_dir))
    batch: dict[str, list] = {}
    for row in rows:
        for column, value in converter(row).items():
            batch.setdefault(column, []).append(value)
    return batch


def main(data_dir: str) -> None:
    load_lf()
    from llamafactory.data import template as lf_template
    from llamafactory.data import tool_utils
    from llamafactory.data.converter import AlpacaDatasetConverter, SharegptDatasetConverter
    from llamafactory.data.parser import DatasetAttr
    from llamafactory.data.processor.feedback import FeedbackDatasetProcessor
    from llamafactory.data.processor.pairwise import PairwiseDatasetProcessor
    from llamafactory.data.processor.pretrain import PretrainDatasetProcessor
    from llamafactory.data.processor.supervised import PackedSupervisedDatasetProcessor, SupervisedDatasetProcessor
    from transformers import DataCollatorForLanguageModeling

    info = json.loads((Path(data_dir) / "dataset_info.json").read_text(encoding="utf-8"))
    converted: dict[str, dict[str, list]] = {}
    for name in (*SFT_SETS, "dpo_en_demo", "kto_en_demo"):
        attr = DatasetAttr("file", name)
        attr.join(info[name])
        rows = json.loads((Path(data_dir) / info[name]["file_name"]).read_text(encoding="utf-8"))[:ROWS]
        converted[name] = convert(attr, rows, data_dir, AlpacaDatasetConverter, SharegptDatasetConverter)
    for name in PT_SETS:
        attr = DatasetAttr("file", name)
        attr.join(info[name])
        converted[name] = convert(attr, pt_rows(data_dir, name, info), data_dir, AlpacaDatasetConverter,
                                  SharegptDatasetConverter)
    fix_date(tool_utils)  # Llama 3's tool prompt writes today's date: a fixed one, which the test gives ours too
    out: dict = {"rows": ROWS, "date": FIXED_DATE.strftime("%d %b %Y"), "cases": {}}
    for name, stage, template, cutoff, options in combos():
        tokenizer = load("special")
        if options.get("add_bos"):
            tokenizer.add_bos_token = True
        if options.get("pad_is_eos"):
            tokenizer.pad_token = tokenizer.eos_token
        tpl = copy.deepcopy(lf_template.TEMPLATES[template])
        if "enable_thinking" in options:
            tpl.enable_thinking = options["enable_thinking"]
        tpl.fix_special_tokens(tokenizer)
        data_args = SimpleNamespace(cutoff_len=cutoff, train_on_prompt=options.get("train_on_prompt", False),
                                    mask_history=options.get("mask_history", False), neat_packing=False)
        if stage == "pt":  # LLaMA-Factory's parser: packing defaults to true for pt; an explicit true takes 1 off
            packing = options.get("packing")
            data_args = SimpleNamespace(cutoff_len=cutoff - (packing is True), packing=packing is not False,
                                        template=template)
        packed = stage == "sft" and (options.get("packing") or options.get("neat_packing"))
        if packed:  # LLaMA-Factory's DataArguments: neat_packing sets packing, packing takes 1 off cutoff_len
            data_args = SimpleNamespace(cutoff_len=cutoff - 1, train_on_prompt=False, mask_history=False,
                                        packing=True, neat_packing=bool(options.get("neat_packing")))
        processor_class = {"sft": PackedSupervisedDatasetProcessor if packed else SupervisedDatasetProcessor,
                           "dpo": PairwiseDatasetProcessor, "kto": FeedbackDatasetProcessor,
                           "pt": PretrainDatasetProcessor}[stage]
        processor = processor_class(template=tpl, tokenizer=tokenizer, processor=None, data_args=data_args)
        result = processor.preprocess_dataset(copy.deepcopy(converted[name]))
        if stage == "dpo":
            rows = [[digest(a), digest(b), digest(c), digest(d), len(a), len(c)] for a, b, c, d in zip(
                result["chosen_input_ids"], result["chosen_labels"], result["rejected_input_ids"],
                result["rejected_labels"])]
        elif packed:  # each packed row without the padding LLaMA-Factory adds up to cutoff_len
            rows = []
            for ids, labels, positions in zip(result["input_ids"], result["labels"], result["position_ids"]):
                end = len(ids)
                while end and ids[end - 1] == tokenizer.pad_token_id and labels[end - 1] == -100 \
                        and positions[end - 1] == 0:
                    end -= 1
                rows.append([digest(ids[:end]), digest(labels[:end]), digest(positions[:end]), end])
        elif stage == "pt":  # labels as LLaMA-Factory's pt collator makes them (the pad token's id masked)
            collate = DataCollatorForLanguageModeling(tokenizer=tokenizer, mlm=False)
            rows = [[digest(a), digest(collate([{"input_ids": a}])["labels"][0].tolist()), len(a)]
                    for a in result["input_ids"]]
        elif stage == "kto":
            rows = [[digest(a), digest(b), len(a), bool(t), digest(c), digest(d), len(c)] for a, b, t, c, d in zip(
                result["input_ids"], result["labels"], result["kto_tags"], result["kl_input_ids"],
                result["kl_labels"])]
        else:
            rows = [[digest(a), digest(b), len(a), sum(x != -100 for x in b)] for a, b in zip(result["input_ids"],
                                                                                               result["labels"])]
        out["cases"][key(name, stage, template, cutoff, options)] = rows
    path = Path(__file__).resolve().parent / "lf_demo_data.json.gz"
    path.write_bytes(gzip.compress(json.dumps(out, sort_keys=True).encode("utf-8"), compresslevel=9, mtime=0))
    print(f"wrote {path} ({len(out['cases'])} cases)")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "../shared/data")
