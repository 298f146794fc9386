"""By hand: a matrix of configs on LLaMA-Factory's own data, tokenized by LLaMA-Factory 0.9.5 and by ours, row by row.

Not part of the test suite. Each case is a config (template, stage, dataset, cutoff and options) that
``tests/golden/compare_rows.py`` could take alone; here LLaMA-Factory tokenizes every case in one process of its
environment (importing it once) and ours in this one, and a table is printed: case, rows identical / LLaMA-Factory's
rows per split, and the first row that differs (its first differing position and the ids there).

    python -m tests.golden.sweep_compat --incumbent /path/to/lf-venv/bin/python --data DIR [--only SUBSTR] [--list]

``--data`` is a folder with LLaMA-Factory's ``dataset_info.json`` and its demo files (its ``data/`` folder). The
tokenizers are the committed test tokenizers (``tests/golden/tokenizers.py``): ``family`` where the template's family
is known there (its BOS/EOS), ``special`` otherwise, saved to a temporary folder. Cases stay small (``max_samples``)
to fit a small CPU.

A case where both sides refuse counts as agreeing (read the two messages in the table); one where only one side
refuses counts as a difference. Known ones, deliberate: a template LLaMA-Factory ties to a processor (gemma3, gemma4,
llama4, ministral3, mistral_small) on a text-only tokenizer (LLaMA-Factory: "Processor was not found" even on text
rows; ours trains the text), and a KTO set under stage sft (LLaMA-Factory finds no valid row; ours trains the desirable
rows). ``--vlm-dir`` cases of qwen2_vl need a torchvision that imports in the incumbent's environment.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from tests.golden.compare_rows import _same, ours  # noqa: E402
from tests.golden.compare_stream import HIDE_MEDIA_LIBS  # noqa: E402

THEIRS = HIDE_MEDIA_LIBS + r"""
import json, sys, traceback
from llamafactory.hparams import get_train_args
from llamafactory.model import load_tokenizer
from llamafactory.data import get_template_and_fix_tokenizer, get_dataset
import copy
import llamafactory.data.template as lf_templates
cases = json.load(open(sys.argv[1]))
results = {}
pristine = copy.deepcopy(lf_templates.TEMPLATES)  # get_template_and_fix_tokenizer changes the registered template
for name, args in cases.items():
    lf_templates.TEMPLATES.clear()
    lf_templates.TEMPLATES.update(copy.deepcopy(pristine))
    try:
        model_args, data_args, training_args, finetuning_args, _ = get_train_args(dict(args))
        module = load_tokenizer(model_args)
        template = get_template_and_fix_tokenizer(module["tokenizer"], data_args)
        stage = {"dpo": "rm"}.get(args["stage"], args["stage"])
        ds = get_dataset(template, model_args, data_args, training_args, stage=stage, **module)
        pad = module["tokenizer"].pad_token_id
        out = {}
        for split in ("train_dataset", "eval_dataset"):
            d = ds.get(split)
            if d is None:
                continue
            cols = d.column_names
            if "kl_input_ids" in cols:
                out[split] = [list(r) for r in zip(d["input_ids"], d["labels"], d["kl_input_ids"], d["kl_labels"])]
            elif "chosen_input_ids" in cols:
                out[split] = [[a, b] for a, b in zip(d["chosen_input_ids"], d["rejected_input_ids"])]
            elif "labels" in cols:
                rows = []
                for ids, labels in zip(d["input_ids"], d["labels"]):
                    end = len(ids)
                    if "position_ids" in cols:
                        while end and ids[end - 1] == pad and labels[end - 1] == -100:
                            end -= 1
                    rows.append([ids[:end], labels[:end]])
                out[split] = rows
            else:
                out[split] = [[a] for a in d["input_ids"]]
        results[name] = out
    except BaseException as exc:
        results[name] = {"error": traceback.format_exc()[-1500:]}
json.dump(results, open(sys.argv[2], "w"))
"""

# template -> tokenizer setup of tests/golden/tokenizers.py (family where its BOS/EOS are known there)
TEMPLATES = ("llama3", "qwen", "qwen3", "qwen3_nothink", "deepseek3", "deepseekr1", "glm4", "mistral", "gemma",
             "gemma3", "phi4", "default", "empty", "cohere", "yi", "baichuan2", "intern2", "llama2", "chatml",
             "ministral3", "falcon_h1", "granite3", "exaone", "seed_oss", "hunyuan", "gpt_oss", "lfm2", "llama4")


# more templates, three cases each (tools, pairs cut short, kto)
MORE_TEMPLATES = ("alpaca", "vicuna", "zephyr", "ministral", "gemma2", "glm4_moe", "glmz1", "phi", "deepseek",
                  "smollm", "smollm2", "opencoder", "cpm4", "mimo", "sailor", "moonlight", "granite4", "falcon",
                  "olmo", "openchat", "solar", "starchat", "deepseekcoder", "breeze", "seed_coder", "ernie_nothink",
                  "telechat2", "xuanyuan", "glm4_7", "aeva", "chatglm3", "mistral_small", "phi4_mini", "phi_small",
                  "mimo_v2", "minimax1", "minimax2", "hy3", "hunyuan_small", "youtu", "openchat-3.6", "bailing",
                  "bailing_v2", "dbrx", "chatml_de", "ernie", "llama2_zh", "yuan", "index", "gemma4")
# templates LLaMA-Factory ties to a processor (a tiny VLM of tests/engine/tinyvlms.py, built by --vlm-dir)
VLM_TEXT = {"gemma3": "gemma3", "qwen2_vl": "qwen2_vl", "llava": "llava"}


def cases(data: str, vlm_dir: str | None = None) -> dict[str, dict]:
    base = {"dataset_dir": data, "max_samples": 50, "preprocessing_num_workers": 1}
    out: dict[str, dict] = {}

    def add(name, template, stage, dataset, cutoff, **more):
        out[name] = {"template": template, "stage": stage, "dataset": dataset, "cutoff_len": cutoff, **base, **more}

    for t in TEMPLATES:
        add(f"{t}/sft/glaive/1024", t, "sft", "glaive_toolcall_en_demo", 1024)
        add(f"{t}/sft/glaive/64", t, "sft", "glaive_toolcall_en_demo", 64)
        add(f"{t}/sft/alpaca+identity/17", t, "sft", "alpaca_en_demo,identity", 17)
        add(f"{t}/rm/dpo_en/1024", t, "rm", "dpo_en_demo", 1024)
        add(f"{t}/kto/kto_en/64", t, "kto", "kto_en_demo", 64)
    for t in ("llama3", "qwen3", "glm4", "mistral", "gemma3", "deepseek3", "phi4", "cohere"):
        add(f"{t}/sft/glaive/mask_history", t, "sft", "glaive_toolcall_en_demo", 1024, mask_history=True)
        add(f"{t}/sft/glaive/train_on_prompt", t, "sft", "glaive_toolcall_en_demo", 1024, train_on_prompt=True)
        add(f"{t}/sft/identity/default_system", t, "sft", "identity", 1024, default_system="Be brief.")
        add(f"{t}/sft/alpaca/val_size", t, "sft", "alpaca_en_demo", 128, val_size=0.2, do_eval=True)
        add(f"{t}/sft/glaive/packing", t, "sft", "glaive_toolcall_en_demo", 256, packing=True)
        add(f"{t}/sft/glaive/neat_packing", t, "sft", "glaive_toolcall_en_demo", 256, neat_packing=True)
        add(f"{t}/pt/c4/64", t, "pt", "c4_demo", 64)
        add(f"{t}/dpo/dpo_en/64", t, "dpo", "dpo_en_demo", 64)
    for t in ("qwen3", "deepseekr1", "glm4"):
        add(f"{t}/sft/glaive/enable_thinking_false", t, "sft", "glaive_toolcall_en_demo", 1024, enable_thinking=False)
        add(f"{t}/rm/dpo_en/enable_thinking_false", t, "rm", "dpo_en_demo", 1024, enable_thinking=False)
    for t in ("qwen", "llama3"):
        add(f"{t}/sft/mix/interleave_under", t, "sft", "alpaca_en_demo,identity,glaive_toolcall_en_demo", 256,
            mix_strategy="interleave_under", interleave_probs="0.5,0.2,0.3", seed=7)
        add(f"{t}/sft/mix/interleave_over", t, "sft", "alpaca_zh_demo,identity", 256,
            mix_strategy="interleave_over", interleave_probs="0.3,0.7")
        add(f"{t}/sft/glaive/tool_format_glm4", t, "sft", "glaive_toolcall_en_demo", 1024, tool_format="glm4")
        add(f"{t}/sft/glaive/tool_format_qwen", t, "sft", "glaive_toolcall_en_demo", 1024, tool_format="qwen")
        add(f"{t}/sft/glaive/tool_format_mistral", t, "sft", "glaive_toolcall_en_demo", 1024,
            tool_format="mistral")
        add(f"{t}/pt/wiki/packing_false", t, "pt", "wiki_demo", 128, packing=False)
        add(f"{t}/kto/kto_en/val_size", t, "kto", "kto_en_demo", 256, val_size=0.2, do_eval=True)
        add(f"{t}/rm/dpo_en/mask_history", t, "rm", "dpo_en_demo", 256, mask_history=True)
    for t in MORE_TEMPLATES:
        add(f"{t}/sft/glaive/1024", t, "sft", "glaive_toolcall_en_demo", 1024)
        add(f"{t}/rm/dpo_en/17", t, "rm", "dpo_en_demo", 17)
        add(f"{t}/kto/kto_en/64", t, "kto", "kto_en_demo", 64)
    for t in ("qwen3", "deepseekr1", "glm4_moe", "qwen3_nothink"):
        add(f"{t}/sft/glaive/mask_history_64", t, "sft", "glaive_toolcall_en_demo", 64, mask_history=True)
        add(f"{t}/kto/kto_en/enable_thinking_false", t, "kto", "kto_en_demo", 256, enable_thinking=False)
        add(f"{t}/pt/c4/packing", t, "pt", "c4_demo", 64, packing=True)
        add(f"{t}/sft/identity/default_system_17", t, "sft", "identity", 17, default_system="Be brief.")
    for t in ("qwen", "mistral"):
        add(f"{t}/sft/alpaca/val_size_int", t, "sft", "alpaca_en_demo", 128, val_size=7, do_eval=True)
        add(f"{t}/sft/alpaca+glaive/eval_dataset", t, "sft", "alpaca_en_demo,glaive_toolcall_en_demo", 128,
            eval_dataset="identity", do_eval=True)
        add(f"{t}/sft/mix/interleave_under_noprobs", t, "sft", "alpaca_en_demo,identity", 128,
            mix_strategy="interleave_under")
        add(f"{t}/rm/dpo_en/packing", t, "rm", "dpo_en_demo", 256, packing=True)
        add(f"{t}/rm/dpo_en/val_size", t, "rm", "dpo_en_demo", 256, val_size=0.1, do_eval=True)
        add(f"{t}/sft/kto_en/as_sft", t, "sft", "kto_en_demo", 256)
        add(f"{t}/sft/dpo_en/as_sft", t, "sft", "dpo_en_demo", 256)
        add(f"{t}/pt/alpaca/pt", t, "pt", "alpaca_en_demo", 64)
        add(f"{t}/sft/glaive_zh/17", t, "sft", "alpaca_zh_demo", 17, train_on_prompt=True)
    # tokenizers that add their BOS to every encoding (as Llama 2, Mistral and Gemma's real ones do)
    for t in ("default", "llama2", "mistral", "gemma", "llama3", "deepseek3", "cohere", "yi"):
        bos = {"bos_setup": True}
        add(f"{t}/bos/sft/glaive/64", t, "sft", "glaive_toolcall_en_demo", 64, **bos)
        add(f"{t}/bos/sft/identity/mask_history", t, "sft", "identity", 1024, mask_history=True, **bos)
        add(f"{t}/bos/rm/dpo_en/1024", t, "rm", "dpo_en_demo", 1024, **bos)
        add(f"{t}/bos/kto/kto_en/64", t, "kto", "kto_en_demo", 64, **bos)
        add(f"{t}/bos/pt/c4/64", t, "pt", "c4_demo", 64, **bos)
        add(f"{t}/bos/pt/c4/packing_false", t, "pt", "c4_demo", 64, packing=False, **bos)
        add(f"{t}/bos/sft/glaive/neat_packing_17", t, "sft", "glaive_toolcall_en_demo", 17, neat_packing=True, **bos)
    if vlm_dir:
        for t, family in VLM_TEXT.items():
            model = {"model_name_or_path": str(Path(vlm_dir) / family)}
            add(f"{t}/vlm/sft/glaive/1024", t, "sft", "glaive_toolcall_en_demo", 1024, **model)
            add(f"{t}/vlm/sft/glaive/64", t, "sft", "glaive_toolcall_en_demo", 64, **model)
            add(f"{t}/vlm/rm/dpo_en/64", t, "rm", "dpo_en_demo", 64, **model)
            add(f"{t}/vlm/kto/kto_en/64", t, "kto", "kto_en_demo", 64, **model)
            add(f"{t}/vlm/sft/alpaca/mask_history", t, "sft", "alpaca_en_demo,identity", 128, mask_history=True,
                **model)
    return out


def _tokenizer_folder(template: str, root: Path, bos: bool = False) -> str:
    """The test tokenizer for ``template`` saved with a tiny model config; ``bos``: one adding its BOS to every
    encoding (a post-processor, as Llama 2's, Mistral's and Gemma's real tokenizers do)."""
    from tokenizers import processors

    from tests.golden.tokenizers import FAMILY_SPECIALS, load

    folder = root / f"tok_{template}{'_bos' if bos else ''}"
    if not folder.exists():
        setup = "family" if template in FAMILY_SPECIALS else "special"
        tokenizer = load(setup, template if setup == "family" else None)
        if bos:
            token = tokenizer.bos_token or "<s>"
            tokenizer.backend_tokenizer.post_processor = processors.TemplateProcessing(
                single=f"{token} $A", pair=f"{token} $A {token} $B",
                special_tokens=[(token, tokenizer.convert_tokens_to_ids(token))])
        tokenizer.save_pretrained(folder)
        config = {"model_type": "llama", "architectures": ["LlamaForCausalLM"], "hidden_size": 32,
                  "intermediate_size": 64, "num_hidden_layers": 1, "num_attention_heads": 2,
                  "num_key_value_heads": 2, "vocab_size": len(tokenizer)}
        (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")  # ours reads the model's config
    return str(folder)


def _first_difference(theirs: list, mine: list) -> str:
    for i, (a, b) in enumerate(zip(theirs, mine)):
        if a != b:
            for part, (x, y) in enumerate(zip(a, b)):
                if x != y:
                    at = next((j for j, (p, q) in enumerate(zip(x, y)) if p != q), min(len(x), len(y)))
                    return (f"row {i} part {part} at {at}: LF {x[max(at - 2, 0):at + 4]} (len {len(x)}) "
                            f"ours {y[max(at - 2, 0):at + 4]} (len {len(y)})")
    return f"row counts LF {len(theirs)} ours {len(mine)}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--incumbent", required=True, help="python of an environment with llamafactory 0.9.5")
    parser.add_argument("--data", required=True, help="LLaMA-Factory's data folder (dataset_info.json and demo files)")
    parser.add_argument("--only", default="", help="run only the cases whose name contains this")
    parser.add_argument("--vlm-dir", help="a folder of tiny VLMs (tests/engine/tinyvlms.py's save_tiny_vlm, one "
                        "subfolder per family of VLM_TEXT) for the templates LLaMA-Factory ties to a processor")
    parser.add_argument("--list", action="store_true", help="list the cases and stop")
    opts = parser.parse_args()
    chosen = {k: v for k, v in cases(opts.data, opts.vlm_dir).items() if opts.only in k}
    if opts.list:
        print("\n".join(chosen))
        return 0
    os.environ.setdefault("DISABLE_VERSION_CHECK", "1")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        for name, args in chosen.items():
            args.setdefault("model_name_or_path", _tokenizer_folder(args["template"], root, args.pop("bos_setup", False)))
            args.update({"do_train": True,
                         "finetuning_type": "lora", "output_dir": str(root / "out" / name.replace("/", "_")),
                         "report_to": "none", "overwrite_cache": True})
        (root / "cases.json").write_text(json.dumps(chosen), encoding="utf-8")
        proc = subprocess.run([opts.incumbent, "-c", THEIRS, str(root / "cases.json"), str(root / "theirs.json")],
                              capture_output=True, text=True)
        if proc.returncode:
            print(proc.stderr[-3000:])
            return 1
        theirs_all = json.loads((root / "theirs.json").read_text(encoding="utf-8"))
        bad = 0
        print(f"{'case':55} {'split':14} identical/LF rows (ours)  first difference")
        for name, args in chosen.items():
            theirs = theirs_all[name]
            try:
                mine = ours(dict(args))
            except Exception as exc:  # a refusal or crash on our side is a result of the sweep too
                mine = {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
                if not type(exc).__module__.startswith("engine"):  # a crash, not one of our refusals
                    traceback.print_exc()
            if "error" in theirs or "error" in mine:
                same = "error" in theirs and "error" in mine
                bad += not same
                lf = theirs.get("error", "ok").strip().splitlines()[-1][:150]
                print(f"{name:55} {'-':14} LF: {lf} | ours: {mine.get('error', 'ok')[:150]}")
                continue
            for split, rows in theirs.items():
                got = mine.get(split, [])
                n = sum(_same(split, a, b) for a, b in zip(rows, got))
                ok = n == len(rows) == len(got)
                bad += not ok
                print(f"{name:55} {split:14} {n}/{len(rows)} ({len(got)})  {'' if ok else _first_difference(rows, got)}",
                      flush=True)
        print(f"{len(chosen)} cases, {bad} with a difference")
    return 0 if not bad else 1


if __name__ == "__main__":
    sys.exit(main())
